//go:build linux

package workload

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// RTTConfig configures MeasureRTT.
type RTTConfig struct {
	Probes   int           // number of probe exchanges
	Interval time.Duration // pause between probes (sync probes are sparse)
}

// RTTStats summarises one kind of round trip, in ns.
type RTTStats struct {
	N             int
	Min, P50, P99 int64
}

// RTTResult compares the network round trip of probe exchanges measured
// with user-space stamps and with kernel stamps, each minus the responder's
// hold time: ((T4-T1) - (T3-T2)) with T1..T4 taken in user space after
// recvmsg / before sendmsg, or by the kernel (software stamps).
type RTTResult struct {
	User, Kernel RTTStats
	// Retried probes were excluded (ambiguous round trip).
	Retried int
	// MaxHalfWidth is the widest wall/raw sandwich seen (ns), the bound
	// on the kernel-stamp conversion error from the clock reads.
	MaxHalfWidth int64
	// Missing counts exchanges without all four kernel stamps.
	Missing int
}

// probeServer answers probes and records the responder's stamps.
type probeServer struct {
	mu    sync.Mutex
	t2    map[uint32][2]int64 // seq -> user, kernel receive
	t3    map[uint32][2]int64 // seq -> user, kernel send
	clock func() int64
}

func (s *probeServer) HandleRequest(in *transport.Incoming, reply *wire.Packet) error {
	p := in.Packet
	if p.Op.Kind() != wire.OpProbe {
		return fmt.Errorf("workload: probe server: op %v not served", p.Op)
	}
	s.mu.Lock()
	s.t2[p.Seq] = [2]int64{in.RecvUser, in.RecvKernel}
	s.mu.Unlock()
	reply.Msg = engine.Message{Type: engine.MsgProbeReply, From: engine.NodeID(reply.Sender), To: p.Msg.From,
		Round: p.Msg.Round, Seq: p.Msg.Seq, T2: in.RecvUser, T3: s.clock()}
	return nil
}

func (s *probeServer) HandleMessage(*transport.Incoming) {}

func (s *probeServer) ReplySent(_ netip.AddrPort, reply *wire.Packet, user, kernel int64) {
	s.mu.Lock()
	s.t3[reply.Seq] = [2]int64{user, kernel}
	s.mu.Unlock()
}

// MeasureRTT runs probe exchanges between two endpoints on 127.0.0.1 with
// kernel timestamps on, and returns the user-space and kernel round trips.
func MeasureRTT(ctx context.Context, cfg RTTConfig) (RTTResult, error) {
	var res RTTResult
	if cfg.Probes < 1 {
		return res, fmt.Errorf("workload: measure rtt: Probes %d must be >= 1", cfg.Probes)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opt := transport.UDPOptions{Timestamps: true}
	sconn, err := transport.ListenUDP("127.0.0.1:0", opt)
	if err != nil {
		return res, err
	}
	cconn, err := transport.ListenUDP("127.0.0.1:0", opt)
	if err != nil {
		sconn.Close()
		return res, err
	}
	srv := &probeServer{t2: map[uint32][2]int64{}, t3: map[uint32][2]int64{}, clock: rawclock.Now}
	server, err := transport.New(transport.Config{ID: 0, Conn: sconn, Handler: srv})
	if err != nil {
		sconn.Close()
		cconn.Close()
		return res, err
	}
	client, err := transport.New(transport.Config{ID: 1, Conn: cconn})
	if err != nil {
		sconn.Close()
		cconn.Close()
		return res, err
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = server.Run(ctx) })
	wg.Go(func() { _ = client.Run(ctx) })
	defer wg.Wait()
	defer cancel()
	var user, kernel []int64
	for i := range cfg.Probes {
		req := &wire.Packet{Op: wire.OpProbe, Msg: engine.Message{Type: engine.MsgProbe, From: 1, To: 0, Round: 1, Seq: uint32(i)}}
		_, tm, err := client.Request(ctx, sconn.LocalAddr(), req)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return res, err
			}
			return res, fmt.Errorf("workload: measure rtt: probe %d: %w", i, err)
		}
		if tm.Attempts > 1 {
			res.Retried++
			continue
		}
		srv.mu.Lock()
		t2, t3 := srv.t2[req.Seq], srv.t3[req.Seq]
		srv.mu.Unlock()
		for wait := 0; t3 == [2]int64{} && wait < 100; wait++ {
			// The reply can overtake ReplySent; wait for the record.
			time.Sleep(100 * time.Microsecond)
			srv.mu.Lock()
			t3 = srv.t3[req.Seq]
			srv.mu.Unlock()
		}
		if t3 == [2]int64{} || t2 == [2]int64{} {
			return res, fmt.Errorf("workload: measure rtt: probe %d: responder stamps missing", i)
		}
		user = append(user, (tm.RecvUser-tm.SendUser)-(t3[0]-t2[0]))
		if tm.SendKernel != 0 && tm.RecvKernel != 0 && t2[1] != 0 && t3[1] != 0 {
			kernel = append(kernel, (tm.RecvKernel-tm.SendKernel)-(t3[1]-t2[1]))
		} else {
			res.Missing++
		}
		if cfg.Interval > 0 {
			select {
			case <-time.After(cfg.Interval):
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
	}
	res.User, res.Kernel = summarize(user), summarize(kernel)
	res.MaxHalfWidth = max(sconn.StampStats().MaxHalfWidth, cconn.StampStats().MaxHalfWidth)
	return res, nil
}

func summarize(v []int64) RTTStats {
	if len(v) == 0 {
		return RTTStats{}
	}
	slices.Sort(v)
	at := func(q float64) int64 {
		i := int(q*float64(len(v))+0.5) - 1
		return v[min(max(i, 0), len(v)-1)]
	}
	return RTTStats{N: len(v), Min: v[0], P50: at(0.5), P99: at(0.99)}
}
