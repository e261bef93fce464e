package engine_test

import (
	"fmt"
	"slices"

	"github.com/gclock/gclock/engine"
)

// arrival is a message in flight in the examples' drivers: it arrives at
// its receiver at truth time at.
type arrival struct {
	at  int64 // truth
	msg engine.Message
}

// Two nodes, driven as the simulator and the daemon drive them: node 1 is
// the reference (its clock is global time), node 2's clock is 3 ms behind
// and 20 ppm fast. The driver carries Ready's messages (50 us one way),
// wakes each node at its NextTick and hands every message to Step with the
// receiver's local time; the engines read no clock of their own.
func Example() {
	const delay = 50_000 // ns, one way
	local := map[engine.NodeID]func(truth int64) int64{
		1: func(t int64) int64 { return t },
		2: func(t int64) int64 { return t - 3_000_000 + t/50_000 }, // -3 ms, +20 ppm
	}
	nodes := map[engine.NodeID]*engine.Node{}
	for id, cfg := range map[engine.NodeID]engine.Config{
		1: {ID: 1, Children: []engine.NodeID{2}},
		2: {ID: 2, Sources: []engine.NodeID{1}},
	} {
		c := engine.DefaultConfig()
		c.ID, c.Sources, c.Children = cfg.ID, cfg.Sources, cfg.Children
		n, err := engine.New(c, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		nodes[id] = n
	}

	var inFlight []arrival
	wake := map[engine.NodeID]int64{} // next tick, truth
	drain := func(id engine.NodeID, now int64) {
		rd := nodes[id].Ready()
		for _, m := range rd.Messages {
			inFlight = append(inFlight, arrival{now + delay, m})
		}
		wake[id] = -1
		if rd.NextTick != 0 {
			// The local deadline in truth, to within a microsecond.
			t := now
			for local[id](t) < rd.NextTick {
				t += max(1000, (rd.NextTick-local[id](t))/2)
			}
			wake[id] = t
		}
	}
	for id, n := range nodes {
		n.Tick(local[id](0))
		drain(id, 0)
	}
	for now := int64(0); now < 120e9; {
		// The earliest of the deliveries and the ticks.
		next, what := int64(-1), engine.NodeID(0)
		for id, t := range wake {
			if t >= 0 && (next < 0 || t < next) {
				next, what = t, id
			}
		}
		slices.SortStableFunc(inFlight, func(a, b arrival) int { return int(a.at - b.at) })
		if len(inFlight) > 0 && (next < 0 || inFlight[0].at <= next) {
			d := inFlight[0]
			inFlight = inFlight[1:]
			now = d.at
			nodes[d.msg.To].Step(d.msg, local[d.msg.To](now))
			drain(d.msg.To, now)
			continue
		}
		if next < 0 {
			break
		}
		now = next
		nodes[what].Tick(local[what](now))
		drain(what, now)
	}

	truth := int64(120e9)
	t := nodes[2].Read(local[2](truth))
	fmt.Println("node 2:", t.Status)
	fmt.Println("truth inside its bounds:", t.Earliest <= truth && truth <= t.Latest)
	fmt.Println("error under 10 us:", t.Est-truth < 10_000 && truth-t.Est < 10_000)
	// Output:
	// node 2: synced
	// truth inside its bounds: true
	// error under 10 us: true
}
