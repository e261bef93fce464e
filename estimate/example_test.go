package estimate_test

import (
	"fmt"

	"github.com/gclock/gclock/estimate"
)

// A node exchanges timestamps with its source, whose clock is 1 ms ahead
// and runs 10 ppm faster; each message takes 20 us one way. The Hull turns
// the rounds into guaranteed bounds on the source's clock, and MinRTT
// (Liao's estimator) into a point estimate; neither reads a clock.
func Example() {
	source := func(local int64) int64 { return local + 1_000_000 + local/100_000 } // +1 ms, +10 ppm
	hull, err := estimate.NewHull(estimate.HullConfig{Window: 64})
	if err != nil {
		fmt.Println(err)
		return
	}
	minrtt, err := estimate.NewMinRTT(estimate.MinRTTConfig{Smoothing: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for round := range int64(5) {
		var samples []estimate.Sample
		for ping := range int64(4) {
			send := round*1_000_000_000 + ping*1_000_000 // local clock, ns
			samples = append(samples, estimate.Sample{
				LocSend: send,
				SrcRecv: source(send + 20_000),
				SrcSend: source(send + 30_000), // the reply leaves 10 us later
				LocRecv: send + 50_000,
			})
		}
		for _, e := range []estimate.Estimator{hull, minrtt} {
			if err := e.AddRound(samples); err != nil {
				fmt.Println(err)
				return
			}
		}
	}
	x := int64(4_010_000_000) // just after the last round
	lo, hi, ok := hull.Bounds(x)
	fmt.Println("bounds hold the source's clock:", ok && lo <= source(x) && source(x) <= hi)
	fmt.Printf("bounds %d us wide\n", (hi-lo)/1000) // the round trip less the source's 10 us
	est, _, _ := minrtt.Mapping().At(x)
	fmt.Printf("MinRTT off by %d ns\n", est-source(x))
	// Output:
	// bounds hold the source's clock: true
	// bounds 40 us wide
	// MinRTT off by 0 ns
}
