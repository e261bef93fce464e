package lab

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gclock/gclock/bench/workload"
	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/netmodel"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// countingServer is a page server that counts handler calls per request
// address and deliveries per flagged message (by round number).
type countingServer struct {
	page     transport.PageServer
	mu       sync.Mutex
	requests map[uint64]int
	messages map[uint32]int
	badMsgs  int
}

func (s *countingServer) HandleRequest(in *transport.Incoming, reply *wire.Packet) error {
	s.mu.Lock()
	s.requests[in.Packet.Page.Addr]++
	s.mu.Unlock()
	return s.page.HandleRequest(in, reply)
}

func (s *countingServer) HandleMessage(in *transport.Incoming) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := in.Packet.Msg
	if m.Type != engine.MsgErrReport || m.Err != float64(m.Round)+0.5 {
		s.badMsgs++
		return
	}
	s.messages[m.Round]++
}

// TestTransportThroughSwitch runs requests and flagged one-way messages
// between endpoints in two host namespaces, through the switch with loss,
// duplication and reordering on both directions (Mocha section 2): every
// request is handled once and answered with its own page, every flagged
// message is delivered exactly once, and the duplicates the switch made are
// recognised by the endpoints' counters.
func TestTransportThroughSwitch(t *testing.T) {
	needLab(t)
	tests := []struct {
		name     string
		model    netmodel.Model
		ackEvery bool
	}{
		{"loss 15% dup 10% reorder 10%", netmodel.Model{Delay: 200 * time.Microsecond, Jitter: 100 * time.Microsecond, Loss: 0.15, Dup: 0.10, Reorder: 0.10}, false},
		{"same, ack per message", netmodel.Model{Delay: 200 * time.Microsecond, Jitter: 100 * time.Microsecond, Loss: 0.15, Dup: 0.10, Reorder: 0.10}, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			l, err := Up(ctx, netlab.Config{Hosts: 2, Link: netmodel.Link{Forward: tt.model, Reverse: tt.model}, Seed: uint64(7 + i)})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := l.Down(); err != nil {
					t.Error(err)
				}
			}()
			// Pages of 1 KB fit one frame, so the per-frame model is the
			// per-datagram one; MinRTO 5 ms keeps the test short.
			srv := &countingServer{page: transport.PageServer{PageSize: 1024}, requests: map[uint64]int{}, messages: map[uint32]int{}}
			cfg := transport.DefaultConfig()
			cfg.InitialRTO, cfg.MinRTO, cfg.MaxRTO, cfg.MaxAttempts = 20*time.Millisecond, 5*time.Millisecond, 100*time.Millisecond, 20
			cfg.AckEvery = tt.ackEvery
			p, err := l.StartEndpoints(ctx, cfg, srv)
			if err != nil {
				t.Fatal(err)
			}
			const reqs, msgs = 300, 150
			var wg sync.WaitGroup
			var mu sync.Mutex
			var res workload.PageResult
			wg.Go(func() {
				r, err := workload.RunPageClient(ctx, p.Client, p.ServerAddr, workload.PageClientConfig{Requests: reqs, Concurrency: 8, PageSize: 1024})
				if err != nil {
					t.Errorf("page client: %v", err)
				}
				mu.Lock()
				res = r
				mu.Unlock()
			})
			sem := make(chan struct{}, 8)
			for r := range msgs {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					m := engine.Message{Type: engine.MsgErrReport, From: 1, To: 2, Round: uint32(r), Err: float64(r) + 0.5}
					if _, err := p.Client.Send(ctx, p.ServerAddr, &wire.Packet{Op: wire.OpErrReport | wire.ReliableFlag, Msg: m}); err != nil {
						t.Errorf("flagged message %d: %v", r, err)
					}
				})
			}
			wg.Wait()
			// Let straggling duplicates arrive before counting.
			time.Sleep(20 * time.Millisecond)
			c, s := p.Client.Stats(), p.Server.Stats()
			if err := p.Close(); err != nil {
				t.Error(err)
			}
			var frames, dropped, duplicated, reordered int64
			for _, d := range l.Switch().Stats() {
				frames, dropped, duplicated, reordered = frames+d.Frames, dropped+d.Dropped, duplicated+d.Duplicated, reordered+d.Reordered
			}
			t.Logf("switch: %d frames, %d dropped, %d duplicated, %d reordered", frames, dropped, duplicated, reordered)
			t.Logf("client %+v", c)
			t.Logf("server %+v", s)

			if res.Requests != reqs || res.Failed != 0 {
				t.Errorf("page client: %d completed with the right page, %d failed; want %d and 0", res.Requests, res.Failed, reqs)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.requests) != reqs {
				t.Errorf("handler saw %d distinct requests, want %d", len(srv.requests), reqs)
			}
			for a, n := range srv.requests {
				if n != 1 || a >= reqs {
					t.Errorf("request for page %d handled %d times, want once", a, n)
				}
			}
			if srv.badMsgs != 0 {
				t.Errorf("%d one-way messages arrived corrupted", srv.badMsgs)
			}
			for r := range msgs {
				if n := srv.messages[uint32(r)]; n != 1 {
					t.Errorf("flagged message %d delivered %d times, want exactly once", r, n)
				}
			}
			// The switch really did its damage, and the endpoints saw it.
			if dropped == 0 || duplicated == 0 || reordered == 0 {
				t.Errorf("switch dropped %d, duplicated %d, reordered %d frames: want all > 0", dropped, duplicated, reordered)
			}
			if c.Retransmits == 0 {
				t.Error("frames were lost but the client never retransmitted")
			}
			if s.DupRequests == 0 || s.DupMessages == 0 {
				t.Errorf("server recognised %d duplicate requests and %d duplicate messages; want both > 0", s.DupRequests, s.DupMessages)
			}
			if c.Stale == 0 {
				t.Error("client counted no late or duplicate reply/ACK although the switch duplicated frames")
			}
			if c.DecodeErrors+s.DecodeErrors != 0 {
				t.Errorf("decode errors: client %d, server %d", c.DecodeErrors, s.DecodeErrors)
			}
			if tt.ackEvery != (s.SentAcks > reqs) {
				t.Errorf("ack per message %v but server sent %d ACKs for %d requests", tt.ackEvery, s.SentAcks, reqs)
			}
		})
	}
}
