package estimate

import "errors"

// Sample is one two-way exchange between the estimating node (its local
// clock is x) and its source (the clock it follows, y). It works for either
// direction of initiation:
//
//   - source-initiated (Liao, node 0 starts): SrcSend=T1, LocRecv=T2,
//     LocSend=T3, SrcRecv=T4;
//   - node-initiated (NTP, Intel's child-to-master): LocSend=T1,
//     SrcRecv=T2, SrcSend=T3, LocRecv=T4.
//
// Causality gives two constraints on the true line y = f(x) (Jezequel 4.2):
// the message from the source was sent before it arrived, so the point
// LOW = (LocRecv, SrcSend) lies on or below the line; the message to the
// source arrived after it was sent, so UP = (LocSend, SrcRecv) lies on or
// above it.
type Sample struct {
	SrcSend int64 // source clock when its message left
	LocRecv int64 // local clock when the source's message arrived
	LocSend int64 // local clock when the local message left
	SrcRecv int64 // source clock when the local message arrived
}

// RTT is the round trip minus the time either side held the message:
// (SrcRecv-SrcSend) + (LocRecv-LocSend). It is the width of the exchange's
// uncertainty window; negative only for corrupt samples.
func (s Sample) RTT() int64 {
	return (s.SrcRecv - s.SrcSend) + (s.LocRecv - s.LocSend)
}

// Mid returns the midpoints of the exchange on each clock: the local
// midpoint x and the source midpoint y, assumed simultaneous when the
// network is symmetric (Cristian, Intel's offset from the midpoint).
func (s Sample) Mid() (x, y int64) {
	return Midpoint(s.LocRecv, s.LocSend), Midpoint(s.SrcSend, s.SrcRecv)
}

// Offset is y - x at the midpoint: the source clock minus the local clock.
func (s Sample) Offset() int64 {
	x, y := s.Mid()
	return y - x
}

// Midpoint returns (a+b)/2 without overflow, rounded toward a.
func Midpoint(a, b int64) int64 { return a + (b-a)/2 }

// ErrInconsistent is returned (wrapped) by an estimator when its samples no
// longer fit one line inside the error model: UP and LOW are not separable
// (a drift change, a clock step). The estimator has restarted its window
// with the newest sample when it returns this.
var ErrInconsistent = errors.New("samples are not consistent with one line")

// Estimator turns samples into a Mapping. Estimators read no clock and open
// no socket: timestamps come in as arguments.
type Estimator interface {
	// AddRound feeds the exchanges of one sync round (Liao: the ping-pongs of
	// one global resync; Intel: one sync session). MinRTT keeps the shortest,
	// Regression and Hull use them all, Spline condenses them to one point.
	// A wrapped ErrInconsistent means the window was restarted; other errors
	// reject the round (it is not used).
	AddRound(round []Sample) error
	// Mapping returns the current estimate; Valid is false until the
	// estimator has enough samples.
	Mapping() Mapping
	// Reset forgets every sample.
	Reset()
}
