package netlab

import (
	"container/heap"
	"time"
)

// The switch's release queues: frames wait on a heap for their link delay,
// then (with a port model) for their egress port's queue, then are sent.

type release struct {
	at  int64 // CLOCK_REALTIME ns
	rx  int64 // the frame's kernel arrival stamp, CLOCK_REALTIME ns
	seq uint64
	out int
	buf *[]byte
	n   int
	dir [2]int
	// queued: at is the delivery time; otherwise (with a port model) at is
	// when the frame joins its egress port's queue.
	queued bool
	wire   int // netmodel.WireBytes of the frame
}

type releaseHeap []release

func (h releaseHeap) Len() int { return len(h) }
func (h releaseHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h releaseHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *releaseHeap) Push(x any)   { *h = append(*h, x.(release)) }
func (h *releaseHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// readMargin is how much later than its kernel receive stamp the switch may
// read a frame without breaking its ports' FIFO order: a frame joins its
// port's queue up to the link's floor minus readMargin before it is ready,
// when every frame that could be ready before it has been read unless one
// waited longer than that in the socket.
const readMargin = int64(20 * time.Microsecond)

// dispatch handles a due entry of the release queue: a frame whose link
// delay is over joins its egress port's queue (and comes back at its
// delivery time); a frame that was queued is sent.
func (s *Switch) dispatch(r release) {
	if r.queued {
		s.send(r)
		return
	}
	s.statMu.Lock()
	depart, wait := s.egress[r.out].Enqueue(r.at, r.wire)
	if r.n-vnetHdrLen <= smallFrame {
		st := s.dirStats(r.dir)
		if len(st.queueWait) < latenessCap {
			st.queueWait = append(st.queueWait, int32(min(wait, 1<<31-1)))
		}
	}
	s.statMu.Unlock()
	r.at, r.queued = depart, true
	s.push(r)
}

// push queues an entry on the heap it belongs to: a frame that is to join
// its port's queue on pend (with a lookahead) or q, a release of bulk data
// on bulk, any other release on q.
func (s *Switch) push(r release) {
	switch {
	case !r.queued && s.lookahead > 0:
		heap.Push(&s.pend, r)
	case r.queued && r.n-vnetHdrLen > smallFrame:
		heap.Push(&s.bulk, r)
	default:
		heap.Push(&s.q, r)
	}
}

// popDue pops the earliest entry of q and bulk that is due at now.
func (s *Switch) popDue(now int64) (release, bool) {
	fromQ := len(s.q) > 0 && s.q[0].at <= now
	if len(s.bulk) > 0 && s.bulk[0].at <= now && (!fromQ || s.bulk[0].at < s.q[0].at) {
		return heap.Pop(&s.bulk).(release), true
	}
	if fromQ {
		return heap.Pop(&s.q).(release), true
	}
	return release{}, false
}
