// Package clock holds gclock's view of a local clock: a source of int64
// nanosecond readings that only ever move forward.
//
// Two implementations live here:
//
//   - Raw reads CLOCK_MONOTONIC_RAW, the oscillator itself, never slewed by
//     NTP. This is what the daemon and the trace recorder stamp with.
//   - Emulated wraps any truth clock (the simulator's event time, or Raw in
//     the lab) with an offset, a drift, drift steps, random-walk frequency
//     wander, granularity and read jitter. Its parameters are known to the
//     evaluator only; the engine and estimators just see readings.
//
// An Emulated is built with NewEmulated from EmuParams (validated, errors
// name the field). The simulator asks it three things: Read(t), what the
// node's software sees at truth time t; Ideal(t), the continuous local time
// used as truth by the evaluator; and TruthAt(local), the truth time at which
// a node's local timer fires. Arithmetic is exact: skews are fixed point in
// units of 1e-18 and every span*skew product is computed in 128 bits, so an
// hour of a 10,000-clock simulation accumulates no rounding. Memory is O(1)
// per clock: wander is generated lazily and only the newest 64 constant-rate
// segments are kept (see Emulated.Oldest for the look-back this allows).
//
//	e, err := clock.NewEmulated(clock.EmuParams{Offset: 5e6, DriftPPM: 12.5, Granularity: 1000, Seed: 1})
//	local := e.Read(truth)           // what the node sees
//	deadline := e.TruthAt(local + 1e9) // when its 1 s timer fires, in truth time
//	lab := e.On(clock.Raw{})          // an emulated clock over the real one
//
// Readings are int64 nanoseconds. Never convert an absolute reading to
// float64: subtract a nearby origin first.
package clock
