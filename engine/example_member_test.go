package engine_test

import (
	"fmt"
	"slices"
	"time"

	"github.com/gclock/gclock/engine"
)

// Three members, driven as the daemon drives them: Tick at Ready's
// NextTick (and at least every second), Step for every message, Ready after
// each call, whose messages (engine and status messages alike) the driver
// carries. Node 1, first of the order, is the reference; after a minute it
// is cut off. The others hear nothing from it for FailoverAfter, node 2 (next
// in the order) stands for the next term, node 3 votes for it, and node 2
// takes over: global time continues from its estimate, and node 3 follows
// it. Node 1, without the majority that renews its lease, no longer
// promises time.
func ExampleMember() {
	const delay = 100_000 // ns, one way
	order := []engine.NodeID{1, 2, 3}
	offset := map[engine.NodeID]int64{1: 0, 2: -2_000_000, 3: 5_000_000} // local = truth + offset
	members := map[engine.NodeID]*engine.Member{}
	for _, id := range order {
		cfg := engine.DefaultConfig()
		cfg.ID = id
		m, err := engine.NewMember(engine.MemberConfig{
			Engine:        cfg,
			Order:         order,
			FailoverAfter: 2 * time.Second,
			// A star around the reference, without the nodes presumed gone.
			Roles: func(ref engine.NodeID, gone []engine.NodeID) (sources, children []engine.NodeID, err error) {
				if id != ref {
					return []engine.NodeID{ref}, nil, nil
				}
				for _, o := range order {
					if o != ref && !slices.Contains(gone, o) {
						children = append(children, o)
					}
				}
				return nil, children, nil
			},
		}, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		members[id] = m
	}

	var queue []arrival
	cut := false                      // node 1 cut off
	tick := map[engine.NodeID]int64{} // each member's next Tick, truth
	collect := func(id engine.NodeID, now int64) {
		r := members[id].Ready()
		for _, msg := range r.Messages {
			if !cut || (msg.From != 1 && msg.To != 1) {
				queue = append(queue, arrival{now + delay, msg})
			}
		}
		tick[id] = now + int64(time.Second)
		if r.NextTick != 0 {
			tick[id] = max(now, min(tick[id], r.NextTick-offset[id]))
		}
	}
	for _, id := range order {
		members[id].Tick(offset[id])
		collect(id, 0)
	}
	const end = int64(120e9)
	for now := int64(0); now < end; {
		cut = now >= 60e9
		first := order[0]
		for _, id := range order[1:] {
			if tick[id] < tick[first] {
				first = id
			}
		}
		slices.SortStableFunc(queue, func(a, b arrival) int { return int(a.at - b.at) })
		if len(queue) > 0 && queue[0].at <= tick[first] {
			d := queue[0]
			queue = queue[1:]
			now = d.at
			members[d.msg.To].Step(d.msg, now+offset[d.msg.To])
			collect(d.msg.To, now)
			continue
		}
		now = tick[first]
		members[first].Tick(now + offset[first])
		collect(first, now)
	}

	for _, id := range order {
		m := members[id]
		t := m.Read(end + offset[id])
		fmt.Printf("node %d: term %d, reference %d, %v\n", id, m.Term(), m.Reference(), t.Status)
	}
	t := members[3].Read(end + offset[3])
	fmt.Println("node 3 within 100 us of the truth:", t.Est-end < 100_000 && end-t.Est < 100_000)
	// Output:
	// node 1: term 0, reference 1, stale
	// node 2: term 1, reference 2, synced
	// node 3: term 1, reference 2, synced
	// node 3 within 100 us of the truth: true
}
