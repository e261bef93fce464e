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
