package measure

import (
	"context"
	"encoding/binary"
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
type comm struct {
	rank  int
	peers []netip.AddrPort
	ep    *transport.Endpoint
	pages transport.PageServer

	mu  sync.Mutex
	box map[boxKey]chan inbound
	// onPut, when set, sees every OpPut first; true means consumed.
	onPut func(in *transport.Incoming) bool

	pending sync.WaitGroup
	errMu   sync.Mutex
	err     error
}

func newComm(rank int, peers []netip.AddrPort) *comm {
	return &comm{rank: rank, peers: peers, box: map[boxKey]chan inbound{}, pages: transport.PageServer{PageSize: transport.PageSize}}
}

// HandleRequest serves pages (the page transfer's server is rank 0).
func (c *comm) HandleRequest(in *transport.Incoming, reply *wire.Packet) error {
	return c.pages.HandleRequest(in, reply)
}

// HandleMessage files an OpPut in its mailbox.
func (c *comm) HandleMessage(in *transport.Incoming) {
	if in.Packet.Op.Kind() != wire.OpPut {
		return
	}
	if c.onPut != nil && c.onPut(in) {
		return
	}
	from := int(in.Packet.Sender) - 1
	m := inbound{data: append([]byte(nil), in.Packet.Page.Data...), recvUser: in.RecvUser, kernel: in.RecvKernel}
	select {
	case c.slot(boxKey{in.Packet.Page.Addr, from}) <- m:
	default: // a second message with the same tag and sender: a bug of the sender; dropped
	}
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
