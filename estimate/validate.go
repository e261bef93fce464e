package estimate

import (
	"errors"
	"fmt"

	"github.com/gclock/gclock/internal/satmath"
)

// maxRoundSpread bounds how far the timestamps and offsets of one round may
// lie from its first sample's (2^44 ns, about 4.9 hours): a round is a
// burst of exchanges, so anything wider is corrupt, and the bound keeps the
// estimators' relative arithmetic exact.
const maxRoundSpread = 1 << 44

// ErrBadRound is wrapped by the errors of rounds rejected as corrupt.
var ErrBadRound = errors.New("bad round")

// ValidateRound checks that round is not empty and that its timestamps and
// offsets lie within 2^44 ns of the first sample's; the error names the
// sample and wraps ErrBadRound.
func ValidateRound(round []Sample) error {
	if len(round) == 0 {
		return fmt.Errorf("empty round: %w", ErrBadRound)
	}
	x0 := round[0].LocRecv
	c0, ok := satmath.SubChecked(round[0].SrcSend, round[0].LocRecv)
	if !ok {
		return fmt.Errorf("round[0]: offset SrcSend-LocRecv overflows int64: %w", ErrBadRound)
	}
	for i, s := range round {
		for _, p := range [2][2]int64{{s.LocRecv, s.SrcSend}, {s.LocSend, s.SrcRecv}} {
			dx, ok1 := satmath.SubChecked(p[0], x0)
			off, ok2 := satmath.SubChecked(p[1], p[0])
			dc, ok3 := satmath.SubChecked(off, c0)
			if !ok1 || dx < -maxRoundSpread || dx > maxRoundSpread {
				return fmt.Errorf("round[%d]: local time %d is more than 2^44 ns from round[0]'s %d: %w", i, p[0], x0, ErrBadRound)
			}
			if !ok2 || !ok3 || dc < -maxRoundSpread || dc > maxRoundSpread {
				return fmt.Errorf("round[%d]: offset differs from round[0]'s by more than 2^44 ns: %w", i, ErrBadRound)
			}
		}
	}
	return nil
}
