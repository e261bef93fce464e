package trace_test

import (
	"bytes"
	"fmt"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/trace"
	"github.com/gclock/gclock/trace/format"
)

// fakeProber answers every exchange as a reference 1 ms ahead would.
type fakeProber struct{ clk clock.Clock }

func (p fakeProber) Probe() (estimate.Sample, error) {
	send := p.clk.Now()
	recv := p.clk.Now()
	return estimate.Sample{LocSend: send, SrcRecv: send + 1_000_000, SrcSend: recv + 1_000_000, LocRecv: recv}, nil
}

// A process records a region and a message on its local clock; the start
// and end sync sessions (with the reference, through a Prober) are what
// `gclock merge` later uses to put it on global time. A test clock stands
// in for clock.Raw{}.
func Example_recorder() {
	var t int64
	clk := clock.Func(func() int64 { t += 1000; return t })
	var file bytes.Buffer
	rec, err := trace.New(&file, trace.Config{Proc: 3, Name: "rank3", Clock: clk, ClockName: "test",
		Prober: fakeProber{clk}, SyncMaxMessages: 4}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	tr := rec.Track(0)
	compute := rec.Name("compute")
	tr.Enter(compute)
	tr.Send(1, 42, 4096)
	tr.Leave(compute)
	if err := rec.Close(); err != nil {
		fmt.Println(err)
		return
	}

	s, err := format.Summarize(&file, "rank3.gct", false)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %d events, %d sync sessions of %d exchanges\n", s.Meta.Name, s.Events, len(s.Sessions), len(s.Sessions[0].Samples))
	// Output:
	// rank3: 3 events, 2 sync sessions of 4 exchanges
}
