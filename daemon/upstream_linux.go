//go:build linux

package daemon

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// adjtimex reads the kernel's clock state (modes 0: reads only, needs no
// privilege).
func adjtimex() (kernelTimex, error) {
	var tx unix.Timex
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return kernelTimex{}, fmt.Errorf("adjtimex: %w", err)
	}
	return kernelTimex{State: state, Status: tx.Status, MaxErrUs: int64(tx.Maxerror), EstErrUs: int64(tx.Esterror),
		Tick: int64(tx.Tick), Freq: int64(tx.Freq), Offset: int64(tx.Offset)}, nil
}
