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
// Readings are int64 nanoseconds. Never convert an absolute reading to
// float64: subtract a nearby origin first.
package clock

// Clock is a local clock read in int64 nanoseconds. Successive calls never
// return a smaller value.
type Clock interface {
	Now() int64
}

// Func adapts a function to the Clock interface.
type Func func() int64

// Now calls f.
func (f Func) Now() int64 { return f() }
