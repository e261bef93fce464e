package engine

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gclock/gclock/estimate"
)

// starRoles is a star on ids with ref at its centre; gone nodes are leaves
// too, as a daemon's topology puts them.
func starRoles(ids []NodeID, self NodeID) func(NodeID, []NodeID) ([]NodeID, []NodeID, error) {
	return func(ref NodeID, gone []NodeID) ([]NodeID, []NodeID, error) {
		if self != ref {
			return []NodeID{ref}, nil, nil
		}
		var ch []NodeID
		for _, id := range ids {
			if id != ref {
				ch = append(ch, id)
			}
		}
		return nil, ch, nil
	}
}

// memberNet runs members over a fixed-delay network in fake time; each
// node's clock is truth plus an offset and a drift. Down nodes neither
// tick nor receive.
type memberNet struct {
	t      *testing.T
	now    int64
	delay  int64
	off    map[NodeID]int64
	drift  map[NodeID]float64
	ms     map[NodeID]*Member
	down   map[NodeID]bool
	next   map[NodeID]int64
	flight []flight
	order  []NodeID
	// cluster is every node (order first); after is failover_after.
	cluster []NodeID
	after   time.Duration
	// paused nodes neither tick nor step; what reaches them waits (a
	// SIGSTOPped process's socket buffer) and is stepped on resume.
	paused map[NodeID]bool
	// cut drops every message from [0] to [1] (one way); drop, if set,
	// drops the messages it returns true for.
	cut  map[[2]NodeID]bool
	drop func(Message) bool
	// hold delays every message by this much more (fuzzing: reordering).
	hold map[[2]NodeID]int64
	// step is the time step of run (0: 100 us).
	step int64
	past map[NodeID]int // timers asked in the past in a row
	// faulty nodes are left out of the invariants (oneTime); byz, if set,
	// runs at every step to send their forged messages.
	faulty map[NodeID]bool
	byz    func()
}

type flight struct {
	at int64
	m  Message
}

func newMemberNet(t *testing.T, order []NodeID, after time.Duration) *memberNet {
	return newMemberNetCluster(t, order, order, after)
}

// newMemberNetCluster is newMemberNet with nodes outside the order.
func newMemberNetCluster(t *testing.T, order, cluster []NodeID, after time.Duration) *memberNet {
	n := &memberNet{cluster: cluster, after: after, t: t, now: 1e15, delay: 50_000, off: map[NodeID]int64{}, drift: map[NodeID]float64{},
		ms: map[NodeID]*Member{}, down: map[NodeID]bool{}, next: map[NodeID]int64{}, order: order,
		paused: map[NodeID]bool{}, cut: map[[2]NodeID]bool{}, hold: map[[2]NodeID]int64{}, past: map[NodeID]int{}}
	for i, id := range cluster {
		n.off[id] = int64(i) * 3e6
		n.drift[id] = float64(i) * 20e-6
		n.start(id, after)
	}
	return n
}

func (n *memberNet) local(id NodeID) int64 {
	d := n.now - 1e15
	return n.now + n.off[id] + int64(n.drift[id]*float64(d))
}

func (n *memberNet) start(id NodeID, after time.Duration) {
	m, err := NewMember(MemberConfig{Engine: testConfig(id, nil, nil), Order: n.order, Cluster: n.cluster, FailoverAfter: after,
		Roles: starRoles(n.cluster, id)}, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	n.ms[id], n.down[id] = m, false
	m.Tick(n.local(id))
	n.collect(id)
}

func (n *memberNet) collect(id NodeID) {
	r := n.ms[id].Ready()
	for _, m := range r.Messages {
		if n.cut[[2]NodeID{m.From, m.To}] || n.drop != nil && n.drop(m) {
			continue
		}
		n.flight = append(n.flight, flight{n.now + n.delay + n.hold[[2]NodeID{m.From, m.To}], m})
	}
	n.next[id] = 0
	// A member that keeps asking for a timer at or before its present
	// busy-loops (the sim stops such a run too).
	if r.NextTick != 0 && r.NextTick <= n.local(id) {
		if n.past[id]++; n.past[id] > 1000 {
			n.t.Fatalf("node %d asked 1000 times in a row for a timer at or before its present", id)
		}
	} else {
		n.past[id] = 0
	}
	if r.NextTick != 0 {
		// local -> truth: close enough for a timer (1 us late at most).
		d := n.now - 1e15
		l0 := n.now + n.off[id] + int64(n.drift[id]*float64(d))
		n.next[id] = n.now + int64(float64(r.NextTick-l0)/(1+n.drift[id])) + 1000
	}
}

// run advances to until in 100 us steps, calling each step probe.
func (n *memberNet) run(until int64, probe func()) {
	step := n.step
	if step == 0 {
		step = 100_000
	}
	for n.now < until {
		n.now += step
		var keep []flight
		due := n.flight
		n.flight = nil
		for _, f := range due {
			if f.at > n.now || n.paused[f.m.To] {
				keep = append(keep, f)
				continue
			}
			if n.down[f.m.To] || n.down[f.m.From] {
				continue
			}
			n.ms[f.m.To].Step(f.m, n.local(f.m.To))
			n.collect(f.m.To)
		}
		n.flight = append(n.flight, keep...)
		for _, id := range n.cluster {
			if !n.down[id] && !n.paused[id] && n.next[id] != 0 && n.next[id] <= n.now {
				n.ms[id].Tick(n.local(id))
				n.collect(id)
			}
		}
		if n.byz != nil {
			n.byz()
		}
		if probe != nil {
			probe()
		}
	}
}

// A star of three with order 1, 2, 3: discovery at start, node 1 the
// reference; node 1 stops: node 2 takes over within failover_after plus a
// query, node 3 follows it, global time on both stays continuous (the
// truth, node 1's clock, inside the bounds with the takeover's width) and
// never goes backwards; node 1 restarts and joins node 2.
func TestMemberFailover(t *testing.T) {
	const after = 400 * time.Millisecond
	order := []NodeID{1, 2, 3}
	n := newMemberNet(t, order, after)
	n.run(n.now+int64(5*time.Second), nil)
	for _, id := range order {
		if r := n.ms[id].Reference(); r != 1 {
			t.Fatalf("node %d: reference %d before the stop, want 1", id, r)
		}
		if st := n.ms[id].Estimate(n.local(id)).Status; st != StatusSynced && id != 1 {
			t.Fatalf("node %d: %v before the stop", id, st)
		}
	}
	if term, sc, ok := n.ms[1].Scale(); !ok || term != 0 || sc != (estimate.Mapping{Valid: true}) {
		t.Errorf("the first reference's scale %+v of term %d (ok %v), want the identity in term 0", sc, term, ok)
	}
	n.down[1] = true
	stopped := n.now
	handover := int64(0)
	last := map[NodeID]int64{}
	var worstJump int64
	n.run(n.now+int64(5*time.Second), func() {
		if handover == 0 && n.ms[2].Reference() == 2 && n.ms[3].Reference() == 2 {
			handover = n.now
		}
		truth := n.local(1) // node 1's clock keeps running: the old scale
		for _, id := range []NodeID{2, 3} {
			tm := n.ms[id].Estimate(n.local(id))
			if tm.Status == StatusUnsynced {
				t.Fatalf("node %d: unsynced %v after the stop", id, time.Duration(n.now-stopped))
			}
			if p, ok := last[id]; ok {
				if tm.Est < p {
					t.Fatalf("node %d: global time went back by %d ns", id, p-tm.Est)
				}
				worstJump = max(worstJump, tm.Est-p-100_000)
			}
			last[id] = tm.Est
			// The change of scale: node 2's estimate of node 1 at takeover.
			if tm.Earliest > truth+20_000 || tm.Latest < truth-20_000 {
				t.Fatalf("node %d: old scale %d ns outside [%d, %d]", id, truth, tm.Earliest, tm.Latest)
			}
		}
	})
	if handover == 0 {
		t.Fatalf("no handover: references %d, %d", n.ms[2].Reference(), n.ms[3].Reference())
	}
	// Silence counts from the last message heard, up to a global period
	// before the stop; the walk asks nobody before node 2 (itself).
	if d := time.Duration(handover - stopped); d > after+time.Millisecond {
		t.Errorf("handover %v after the stop, want at most %v", d, after)
	}
	if fm, ok := n.ms[2].Frozen(); !ok || !fm.Valid {
		t.Error("node 2 did not freeze its line")
	}
	// The scale node 2 publishes is its frozen line: with its clock it
	// gives its own global time to the ns; the followers publish none.
	term, sc, ok := n.ms[2].Scale()
	if l := n.local(2); !ok || term != n.ms[2].Term() || term == 0 || sc.Y0+(l-sc.X0)+int64(math.Round(sc.Skew*float64(l-sc.X0))) != n.ms[2].Estimate(l).Est {
		t.Errorf("node 2's scale %+v of term %d (ok %v): not its global time %d at %d", sc, term, ok, n.ms[2].Estimate(l).Est, l)
	}
	if _, _, ok := n.ms[3].Scale(); ok {
		t.Error("follower 3 defines a scale")
	}
	if worstJump > 20_000 {
		t.Errorf("largest step of global time beyond the elapsed time: %d ns", worstJump)
	}
	for _, id := range []NodeID{2, 3} {
		if st := n.ms[id].Estimate(n.local(id)).Status; st != StatusSynced && id == 3 {
			t.Errorf("node %d: %v 5 s after the handover", id, st)
		}
	}
	// The returning node 1 must not serve its own clock while it learns
	// node 2's scale (node 2's frozen line): every read that says synced
	// holds that scale.
	n.start(1, after)
	var synced1 int
	check1 := func() {
		tm := n.ms[1].Estimate(n.local(1))
		if tm.Status != StatusSynced {
			return
		}
		synced1++
		if scale := n.ms[2].In(n.local(2)); scale < tm.Earliest || scale > tm.Latest {
			t.Fatalf("restarted node 1 at %v: synced [%d, %d], node 2's scale %d outside by %d ns", time.Duration(n.now-stopped),
				tm.Earliest, tm.Latest, scale, max(tm.Earliest-scale, scale-tm.Latest))
		}
	}
	check1()
	n.run(n.now+int64(3*time.Second), check1)
	if synced1 == 0 {
		t.Error("restarted node 1 never synced")
	}
	if r := n.ms[1].Reference(); r != 2 {
		t.Fatalf("restarted node 1: reference %d, want 2", r)
	}
	if st := n.ms[1].Estimate(n.local(1)).Status; st != StatusSynced {
		t.Errorf("restarted node 1: %v", st)
	}
}

// A member that hears from the reference never fails over; one that hears
// nothing asks at failover_after/2 and walks the order at failover_after.
func TestMemberQueryTiming(t *testing.T) {
	const after = int64(400e6)
	tests := []struct {
		name     string
		answer   bool // the reference answers status queries
		wantRef  NodeID
		wantSent []NodeID // the nodes asked, in order
	}{
		{"reference answers", true, 1, []NodeID{1}},
		// At 200 ms and again at 300 ms (query timeout 100 ms) node 1, at
		// 400 ms node 2, which answers: it will stand for the next term, so
		// node 3 keeps node 1 and asks it again every query timeout until
		// node 2's term comes (it never does here).
		{"reference silent", false, 1, []NodeID{1, 1, 2, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMember(MemberConfig{Engine: testConfig(3, nil, nil), Order: []NodeID{1, 2, 3},
				FailoverAfter: time.Duration(after), Roles: starRoles([]NodeID{1, 2, 3}, 3), NoDiscovery: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			now := int64(1e12)
			m.Tick(now)
			var sent []NodeID
			r := m.Ready()
			if r.NextTick != now+after/2 {
				t.Fatalf("first check at %d, want %d", r.NextTick-now, after/2)
			}
			for now < 1e12+after*3/2 {
				now = max(now+1, r.NextTick)
				m.Tick(now)
				r = m.Ready()
				for _, o := range r.Messages {
					if o.Type != MsgStatusQuery {
						continue
					}
					sent = append(sent, o.To)
					if o.To == 2 {
						m.Step(Message{Type: MsgStatusReply, From: 2, To: 3, Seq: o.Seq, Reference: 1}, now+1e5)
						r = m.Ready()
					}
					if tt.answer && o.To == 1 {
						m.Step(Message{Type: MsgStatusReply, From: 1, To: 3, Seq: o.Seq, Reference: 1}, now+1e5)
						r = m.Ready()
						now = 1e12 + after*3/2 // heard: done
					}
				}
			}
			if got := m.Reference(); got != tt.wantRef {
				t.Errorf("reference %d, want %d", got, tt.wantRef)
			}
			if !slices.Equal(sent, tt.wantSent) {
				t.Errorf("sent %v, want %v", sent, tt.wantSent)
			}
		})
	}
}

// The frozen map: continuous, increasing, and its inverse rounds up so
// that a timer set through it is never early.
func TestMemberFrozenMap(t *testing.T) {
	tests := []struct {
		name string
		x0   int64
		y0   int64
		skew float64
	}{
		{"identity line", 1e18, 1e18, 0},
		{"ahead and fast", 1.7e18, 1.7e18 + 3e6, 40e-6},
		{"behind and slow", 5e9, -2e9, -100e-6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &view{frozen: true, fm: estimate.Mapping{X0: tt.x0, Y0: tt.y0, Skew: tt.skew, Valid: true}}
			if got := v.in(tt.x0); got != tt.y0 {
				t.Fatalf("in(X0) = %d, want %d", got, tt.y0)
			}
			prev := v.in(tt.x0 - 1e9)
			step := int64(1)
			for dx := int64(-1e9) + 1; dx < 1e12; dx += step {
				step = step*3/2 + 1
				x := tt.x0 + dx
				y := v.in(x)
				if y <= prev {
					t.Fatalf("in not increasing at dx %d", dx)
				}
				prev = y
				if back := v.out(y); back < x || back > x+2 {
					t.Fatalf("out(in(%d)) = %d", x, back)
				}
				if v.in(v.out(y)) < y {
					t.Fatalf("a timer at out(%d) would fire early", y)
				}
			}
			if v.in(0) != 0 || v.out(0) != 0 {
				t.Fatal("0 (no stamp, no timer) must stay 0")
			}
		})
	}
}

// A member's numbers continue after SetNumbers (a restored state) and
// across a change of view: outgoing rounds are shifted up, the rounds
// echoed in replies shifted back, so the Node accepts them and the child
// never sees a lower round.
func TestMemberContinuesRounds(t *testing.T) {
	m, err := NewMember(MemberConfig{Engine: testConfig(1, nil, nil), Order: []NodeID{1},
		Roles: func(NodeID, []NodeID) ([]NodeID, []NodeID, error) { return nil, []NodeID{2}, nil }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.SetNumbers(41, 7)
	now := int64(1e12)
	m.Tick(now)
	var rounds []uint32
	for range 10 {
		r := m.Ready()
		if len(r.Messages) == 0 {
			t.Fatal("no message")
		}
		msg := r.Messages[0]
		rounds = append(rounds, msg.Round)
		if msg.Type == MsgTimeDiff {
			break
		}
		if msg.Type != MsgProbe {
			t.Fatalf("unexpected %+v", msg)
		}
		now += 20_000
		m.Step(Message{Type: MsgProbeReply, From: 2, To: 1, Round: msg.Round, Seq: msg.Seq, T2: now - 10_000, T3: now - 10_000}, now)
	}
	if r, _ := m.Numbers(); len(rounds) != 4 || rounds[0] != 42 || rounds[3] != 42 || r != 42 {
		t.Fatalf("rounds %v (max %d), want [42 42 42 42]: the replies must be matched after the shift back", rounds, r)
	}
}

// NewMember refuses what it cannot run, naming the field.
func TestNewMemberErrors(t *testing.T) {
	roles := starRoles([]NodeID{1, 2}, 1)
	tests := []struct {
		name string
		cfg  MemberConfig
	}{
		{"empty order", MemberConfig{Engine: testConfig(1, nil, nil), Roles: roles}},
		{"no roles", MemberConfig{Engine: testConfig(1, nil, nil), Order: []NodeID{1}}},
		{"no failover_after", MemberConfig{Engine: testConfig(1, nil, nil), Order: []NodeID{1, 2}, Roles: roles}},
		{"twice in the order", MemberConfig{Engine: testConfig(1, nil, nil), Order: []NodeID{1, 2, 1}, FailoverAfter: time.Second, Roles: roles}},
	}
	for _, tt := range tests {
		if _, err := NewMember(tt.cfg, nil); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}
