package measure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// Message phases: the byte of a tag that says what a message is for.
const (
	phaseBarrierStart = 1 // the barrier before a barrier-started execution
	phaseBarrierOp    = 2 // the barrier operation itself
	phaseReduce       = 3
	phaseBcast        = 4
	phaseAllreduce    = 5 // recursive doubling
	phasePageDone     = 6 // a page client tells the server it is done
	phaseSetup        = 7 // hello, go
	phaseLatency      = 8
	phaseFinal        = 9  // the barrier before the nodes exit
	phaseBarrierEnd   = 10 // the barrier that ends a barrier-started execution
)

// tag names one message: the execution (exec is 2k for the scheduled and
// 2k+1 for the barrier-started execution of iteration k), the repetition
// of the operation inside it, the phase and the step within the phase.
func tag(exec, rep, phase, step int) uint64 {
	return uint64(uint32(exec))<<32 | uint64(uint16(rep))<<16 | uint64(uint8(phase))<<8 | uint64(uint8(step))
}

type boxKey struct {
	tag  uint64
	from int
}

// inbound is one received message.
type inbound struct {
	data             []byte
	recvUser, kernel int64 // CLOCK_MONOTONIC_RAW (the endpoint's clock)
}

// comm is a node's messaging: OpPut messages over gclock's UDP layer
// (flagged, so each is acknowledged and delivered exactly once), sent
// without waiting for the acknowledgement and received into mailboxes
// keyed by tag and sender; OpGetPage requests answered by a page server.
//
// What a sender can make a node hold is bounded (issue 17: 12.8k forged
// messages grew an unbounded node from 23 to 140 MB): the messages
// received and not yet asked for are at most maxQueued and maxQueuedBytes
// per sender and maxQueuedTotal in all; past that the sender's oldest is
// evicted (a message a node waits for then times out, naming it).
type comm struct {
	rank  int
	peers []netip.AddrPort
	ep    *transport.Endpoint
	pages transport.PageServer
	// serve says whether this node answers OpGetPage: the page
	// transfer's server (rank 0), with the cluster key only.
	serve bool

	mu  sync.Mutex
	box map[boxKey]chan inbound
	q   []senderQueue // by rank: messages received, not yet asked for
	tot int           // bytes queued, all senders
	// evicted counts the messages dropped to stay within the bounds.
	evicted uint64
	// onPut, when set, sees every OpPut first; true means consumed.
	onPut func(in *transport.Incoming) bool

	pending sync.WaitGroup
	errMu   sync.Mutex
	err     error
}

// senderQueue is what one sender has queued at a node.
type senderQueue struct {
	fifo  []boxKey // in arrival order; may hold keys already taken (skipped, compacted)
	n     int      // messages queued
	bytes int      // their payload bytes
}

// Bounds of what one sender, and all, can have queued at a node. A sender
// ahead of a node by a whole execution has at most Repeat*log2(n)
// messages queued there (a few KB each at most); a cluster of 1024 nodes
// of senders at their bound would still be capped by maxQueuedTotal.
const (
	maxQueued      = 4096
	maxQueuedBytes = 4 << 20
	maxQueuedTotal = 64 << 20
)

func newComm(rank int, peers []netip.AddrPort) *comm {
	return &comm{rank: rank, peers: peers, box: map[boxKey]chan inbound{}, q: make([]senderQueue, len(peers)),
		pages: transport.PageServer{PageSize: transport.PageSize}}
}

// errNoPages refuses an OpGetPage on a node that does not serve pages.
var errNoPages = errors.New("measure: this node serves no pages (only rank 0 of op page, with the cluster key)")

// HandleRequest serves pages when this node is the page transfer's server
// (rank 0) and the cluster key authenticates every request: a page is 8 KB
// for a 22-byte request, which an unauthenticated sender (a forged source
// address) could use to flood a peer.
func (c *comm) HandleRequest(in *transport.Incoming, reply *wire.Packet) error {
	if !c.serve {
		return errNoPages
	}
	return c.pages.HandleRequest(in, reply)
}

// HandleMessage files an OpPut in its mailbox, within the bounds.
func (c *comm) HandleMessage(in *transport.Incoming) {
	if in.Packet.Op.Kind() != wire.OpPut {
		return
	}
	from := int(in.Packet.Sender) - 1
	if from < 0 || from >= len(c.peers) {
		return // the transport admits peers only; a guard all the same
	}
	if c.onPut != nil && c.onPut(in) {
		return
	}
	size := len(in.Packet.Page.Data)
	k := boxKey{in.Packet.Page.Addr, from}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.box[k]) > 0 {
		return // a second message with the same tag and sender: a bug of the sender (or a forger); dropped
	}
	q := &c.q[from]
	for q.n >= maxQueued || q.bytes+size > maxQueuedBytes || c.tot+size > maxQueuedTotal {
		if !c.evictOldest(from) {
			c.evicted++ // nothing of this sender to evict: drop the new one
			return
		}
	}
	m := inbound{data: append([]byte(nil), in.Packet.Page.Data...), recvUser: in.RecvUser, kernel: in.RecvKernel}
	ch := c.box[k]
	if ch == nil {
		ch = make(chan inbound, 1)
		c.box[k] = ch
	}
	ch <- m // len(ch) was 0, and only HandleMessage fills it (under mu)
	q.fifo = append(q.fifo, k)
	q.n++
	q.bytes += size
	c.tot += size
	if len(q.fifo) > 2*q.n+64 { // drop the keys already taken
		kept := q.fifo[:0]
		for _, k := range q.fifo {
			if len(c.box[k]) > 0 {
				kept = append(kept, k)
			}
		}
		q.fifo = kept
	}
}

// evictOldest drops the oldest message of sender from still queued; false
// if there is none. Called with mu held.
func (c *comm) evictOldest(from int) bool {
	q := &c.q[from]
	for len(q.fifo) > 0 {
		k := q.fifo[0]
		q.fifo = q.fifo[1:]
		ch := c.box[k]
		if ch == nil {
			continue
		}
		select {
		case m := <-ch:
			delete(c.box, k)
			c.dequeued(from, len(m.data))
			c.evicted++
			return true
		default: // taken already
		}
	}
	return false
}

// dequeued accounts for a queued message taken or evicted. Called with mu
// held.
func (c *comm) dequeued(from, size int) {
	q := &c.q[from]
	q.n--
	q.bytes -= size
	c.tot -= size
}

// queued returns the messages and bytes queued, for tests.
func (c *comm) queued() (msgs, bytes int, evicted uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range c.q {
		msgs += q.n
	}
	return msgs, c.tot, c.evicted
}

func (c *comm) slot(k boxKey) chan inbound {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.box[k]
	if ch == nil {
		ch = make(chan inbound, 1)
		c.box[k] = ch
	}
	return ch
}

// recv waits for the message with tag t from rank from.
func (c *comm) recv(ctx context.Context, t uint64, from int) (inbound, error) {
	k := boxKey{t, from}
	ch := c.slot(k)
	select {
	case m := <-ch:
		c.mu.Lock()
		delete(c.box, k)
		c.dequeued(from, len(m.data))
		c.mu.Unlock()
		return m, nil
	case <-ctx.Done():
		return inbound{}, fmt.Errorf("waiting for message %#x from rank %d: %w", t, from, ctx.Err())
	}
}

// send sends data to rank to, flagged, without waiting for the ACK; flush
// waits for every ACK and returns the first failure.
func (c *comm) send(ctx context.Context, to int, t uint64, data []byte) {
	c.pending.Add(1)
	go func() {
		defer c.pending.Done()
		p := &wire.Packet{Op: wire.OpPut | wire.ReliableFlag, Page: wire.Page{Addr: t, Data: data}}
		if _, err := c.ep.Send(ctx, c.peers[to], p); err != nil {
			c.fail(fmt.Errorf("send to rank %d: %w", to, err))
		}
	}()
}

func (c *comm) fail(err error) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

func (c *comm) flush() error {
	c.pending.Wait()
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

func (c *comm) n() int { return len(c.peers) }

// barrier is a dissemination barrier (MPICH's MPI_Barrier): in round k
// every node signals rank+2^k and waits for rank-2^k; ceil(log2 n) rounds.
func (c *comm) barrier(ctx context.Context, exec, rep, phase int) error {
	n := c.n()
	for k, d := 0, 1; d < n; k, d = k+1, d*2 {
		t := tag(exec, rep, phase, k)
		c.send(ctx, (c.rank+d)%n, t, nil)
		if _, err := c.recv(ctx, t, (c.rank-d+n)%n); err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
	}
	return nil
}

// contribution is what rank contributes to a reduction in execution exec:
// v[j] = (rank+1)(j+1) + exec, so that the sum is known in closed form.
func contribution(rank, exec, count int) []int64 {
	v := make([]int64, count)
	for j := range v {
		v[j] = int64(rank+1)*int64(j+1) + int64(exec)
	}
	return v
}

// checkSum verifies a reduced vector: sum_r v[j] = (j+1)n(n+1)/2 + n*exec.
func checkSum(v []int64, n, exec int) error {
	for j, x := range v {
		if want := int64(j+1)*int64(n*(n+1)/2) + int64(n)*int64(exec); x != want {
			return fmt.Errorf("reduction result element %d = %d, want %d", j, x, want)
		}
	}
	return nil
}

func encodeVec(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func addVec(dst []int64, b []byte) error {
	if len(b) != 8*len(dst) {
		return fmt.Errorf("reduction message of %d bytes, want %d", len(b), 8*len(dst))
	}
	for i := range dst {
		dst[i] += int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return nil
}

// reduce sums v into rank 0 along a binomial tree (MPICH's MPI_Reduce for
// short messages). On return rank 0's v holds the sum.
func (c *comm) reduce(ctx context.Context, exec, rep int, v []int64) error {
	n := c.n()
	for mask, step := 1, 0; mask < n; mask, step = mask<<1, step+1 {
		t := tag(exec, rep, phaseReduce, step)
		if c.rank&mask != 0 {
			c.send(ctx, c.rank-mask, t, encodeVec(v))
			return nil
		}
		if c.rank+mask < n {
			m, err := c.recv(ctx, t, c.rank+mask)
			if err != nil {
				return fmt.Errorf("reduce: %w", err)
			}
			if err := addVec(v, m.data); err != nil {
				return fmt.Errorf("reduce: from rank %d: %w", c.rank+mask, err)
			}
		}
	}
	return nil
}

// bcast sends rank 0's v to every node along a binomial tree.
func (c *comm) bcast(ctx context.Context, exec, rep int, v []int64) error {
	n := c.n()
	mask := 1
	for mask < n {
		if c.rank&mask != 0 {
			m, err := c.recv(ctx, tag(exec, rep, phaseBcast, 0), c.rank-mask)
			if err != nil {
				return fmt.Errorf("bcast: %w", err)
			}
			if len(m.data) != 8*len(v) {
				return fmt.Errorf("bcast: message of %d bytes, want %d", len(m.data), 8*len(v))
			}
			for i := range v {
				v[i] = int64(binary.LittleEndian.Uint64(m.data[8*i:]))
			}
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if c.rank+mask < n {
			c.send(ctx, c.rank+mask, tag(exec, rep, phaseBcast, 0), encodeVec(v))
		}
	}
	return nil
}

// allreduce sums v on every node: recursive doubling when the number of
// nodes is a power of two, else a reduce and a broadcast.
func (c *comm) allreduce(ctx context.Context, exec, rep int, v []int64) error {
	n := c.n()
	if n&(n-1) != 0 {
		if err := c.reduce(ctx, exec, rep, v); err != nil {
			return err
		}
		return c.bcast(ctx, exec, rep, v)
	}
	for mask, step := 1, 0; mask < n; mask, step = mask<<1, step+1 {
		p := c.rank ^ mask
		t := tag(exec, rep, phaseAllreduce, step)
		c.send(ctx, p, t, encodeVec(v))
		m, err := c.recv(ctx, t, p)
		if err != nil {
			return fmt.Errorf("allreduce: %w", err)
		}
		if err := addVec(v, m.data); err != nil {
			return fmt.Errorf("allreduce: from rank %d: %w", p, err)
		}
	}
	return nil
}

// pageTransfer: every rank but 0 fetches pages from rank 0 (Mocha's GETP,
// request/reply without ACKs) and tells it when done; rank 0 serves and
// waits for every client.
func (c *comm) pageTransfer(ctx context.Context, exec, rep, pages int) error {
	n := c.n()
	t := tag(exec, rep, phasePageDone, 0)
	if c.rank == 0 {
		for r := 1; r < n; r++ {
			if _, err := c.recv(ctx, t, r); err != nil {
				return fmt.Errorf("page transfer: %w", err)
			}
		}
		return nil
	}
	for p := range pages {
		addr := uint64(exec)<<24 | uint64(uint16(rep))<<8 | uint64(uint8(p))
		reply, _, err := c.ep.Request(ctx, c.peers[0], &wire.Packet{Op: wire.OpGetPage, Page: wire.Page{Addr: addr}})
		if err != nil {
			return fmt.Errorf("page transfer: %w", err)
		}
		if err := transport.CheckPage(reply.Page.Data, addr, transport.PageSize); err != nil {
			return fmt.Errorf("page transfer: %w", err)
		}
	}
	c.send(ctx, 0, t, nil)
	return nil
}
