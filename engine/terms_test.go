package engine

import (
	"math"
	"testing"
	"time"
)

// The attacks of issue 29 on the election, each one message (or one a
// period) sealed by node 3, a member of the cluster with its own link
// key: before terms needed evidence, every one of them steered the
// cluster.

// inject delivers msg to every other node of the net now, as if node
// msg.From had sent it.
func (n *memberNet) inject(msg Message) {
	for _, id := range n.cluster {
		if id == msg.From || n.down[id] {
			continue
		}
		m := msg
		m.To = id
		n.ms[id].Step(m, n.local(id))
		n.collect(id)
	}
}

// One status query with the last term of the counter: every node adopted
// it, the next candidate term wrapped to 0, and after the reference died
// nobody could take over ("no majority for the takeover" for good).
func TestTermAttackLastTerm(t *testing.T) {
	const after = 400 * time.Millisecond
	order := []NodeID{1, 2, 3}
	n := newMemberNet(t, order, after)
	n.run(n.now+int64(3*time.Second), nil)
	n.inject(Message{Type: MsgStatusQuery, From: 3, Seq: 77, Term: math.MaxUint32})
	for _, id := range order {
		if tm := n.ms[id].Term(); tm != 0 {
			t.Fatalf("node %d adopted term %d from one status query", id, tm)
		}
	}
	if n.ms[1].TermRefused() == 0 {
		t.Error("the refused term was not counted")
	}
	n.down[1] = true
	killed := n.now
	var took int64
	n.run(n.now+int64(5*after), func() {
		if took == 0 && n.ms[2].Reference() == 2 && n.ms[3].Reference() == 2 {
			took = n.now
		}
	})
	// failover_after, then one query timeout per node walked (none before
	// node 2), then the vote.
	limit := int64(after) + 2*n.ms[2].queryTimeout()
	if took == 0 || took-killed > limit {
		t.Fatalf("no takeover by node 2 within %v of the kill (took %v)", time.Duration(limit), time.Duration(took-killed))
	}
}

// A heartbeat of the next term naming node 3 made node 3 the reference
// without a vote while node 1 was alive and leased.
func TestTermAttackSelfNamed(t *testing.T) {
	const after = 400 * time.Millisecond
	order := []NodeID{1, 2, 3}
	for _, term := range []uint32{2, math.MaxUint32 - 1} { // both name node 3
		n := newMemberNet(t, order, after)
		n.run(n.now+int64(3*time.Second), nil)
		n.inject(Message{Type: MsgStatusQuery, From: 3, Seq: 77, Term: term, Flags: FlagBeat | FlagLease, Sent: n.local(3)})
		n.run(n.now+int64(after), nil)
		for _, id := range []NodeID{1, 2} {
			if r := n.ms[id].Reference(); r != 1 {
				t.Errorf("term %d: node %d follows %d, want 1", term, id, r)
			}
		}
		if st := n.ms[2].Estimate(n.local(2)).Status; st != StatusSynced {
			t.Errorf("term %d: node 2 %v", term, st)
		}
	}
}

// One status query of term+3 (naming the current reference again) every
// 2 s rebuilt the followers' view each time: node 2 was stale 30% of the
// time. The engine messages of such a term are refused, not adopted.
func TestTermAttackRepeatedBump(t *testing.T) {
	const after = 400 * time.Millisecond
	order := []NodeID{1, 2, 3}
	n := newMemberNet(t, order, after)
	n.run(n.now+int64(3*time.Second), nil)
	var reads, notSynced int
	for range 5 {
		n.inject(Message{Type: MsgStatusQuery, From: 3, Seq: 77, Term: n.ms[2].Term() + 3})
		n.inject(Message{Type: MsgStatusReply, From: 3, Seq: 78, Term: n.ms[2].Term() + 3, Reference: 1})
		n.run(n.now+int64(2*time.Second), func() {
			reads++
			if n.ms[2].Estimate(n.local(2)).Status != StatusSynced {
				notSynced++
			}
		})
	}
	if notSynced != 0 || n.ms[2].Changes() != 0 {
		t.Errorf("node 2 not synced %d of %d reads, %d reference changes (want none)", notSynced, reads, n.ms[2].Changes())
	}
	probe := Message{Type: MsgTimeDiff, From: 1, To: 2, Round: 1, Term: n.ms[2].Term() + 3}
	if err := n.ms[2].CheckMessage(probe, n.local(2)); err == nil {
		t.Error("CheckMessage accepted an engine message of an unproven newer term")
	}
}
