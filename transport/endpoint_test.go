package transport

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/wire"
)

// fakeClock stamps with the bubble's time, so user stamps are exact under
// synctest.
func fakeClock() func() int64 {
	t0 := time.Now()
	return func() int64 { return int64(time.Since(t0)) + 1 }
}

// recorder is a handler that serves pages and records one-way messages.
type recorder struct {
	PageServer
	mu       sync.Mutex
	requests map[string]int // (sender, seq) -> handler calls
	messages map[uint32]int // Msg.Round -> deliveries
}

func newRecorder() *recorder {
	r := &recorder{requests: map[string]int{}, messages: map[uint32]int{}}
	r.PageSize = 512
	return r
}

func (r *recorder) HandleRequest(in *Incoming, reply *wire.Packet) error {
	r.mu.Lock()
	r.requests[fmt.Sprint(in.Packet.Sender, "/", in.Packet.Seq)]++
	r.mu.Unlock()
	return r.PageServer.HandleRequest(in, reply)
}

func (r *recorder) HandleMessage(in *Incoming) {
	r.mu.Lock()
	r.messages[in.Packet.Msg.Round]++
	r.mu.Unlock()
}

type pair struct {
	net            *memnet.Network
	client, server *Endpoint
	srv            *recorder
	srvAddr, cAddr netip.AddrPort
}

// newPair starts a client and a server endpoint on a memnet.Network; both stop
// when ctx ends.
func newPair(t *testing.T, ctx context.Context, n *memnet.Network, ackEvery bool, tweak func(*Config)) *pair {
	t.Helper()
	p := &pair{net: n, srv: newRecorder()}
	cc, sc := listenMem(n, 1), listenMem(n, 2)
	p.cAddr, p.srvAddr = cc.Addr(), sc.Addr()
	mk := func(id uint32, c PacketConn, h Handler) *Endpoint {
		cfg := Config{ID: id, Conn: c, Handler: h, Clock: clockFunc(fakeClock()), AckEvery: ackEvery,
			InitialRTO: 50 * time.Millisecond, MinRTO: 5 * time.Millisecond, MaxRTO: 400 * time.Millisecond,
			MaxAttempts: 16, RecentTTL: 30 * time.Second, InitialSeq: 1000 * id}
		if tweak != nil {
			tweak(&cfg)
		}
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		go e.Run(ctx)
		return e
	}
	p.client = mk(1, cc, nil)
	p.server = mk(2, sc, p.srv)
	return p
}

// getPages runs n page requests from k goroutines and checks every page.
func (p *pair) getPages(t *testing.T, ctx context.Context, n, k int) (errs int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range k {
		wg.Go(func() {
			for i := g; i < n; i += k {
				addr := uint64(i)
				rep, _, err := p.client.Request(ctx, p.srvAddr, &wire.Packet{Op: wire.OpGetPage, Page: wire.Page{Addr: addr}})
				if err == nil {
					err = CheckPage(rep.Page.Data, addr, p.srv.PageSize)
				}
				if err != nil {
					mu.Lock()
					errs++
					mu.Unlock()
					t.Errorf("request %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	return errs
}

func TestRequestReplyMessageCounts(t *testing.T) {
	// Mocha Fig. 4: a page request costs GETP+GETPGRANT with ACK omission,
	// and GETP, ACK, GETPGRANT, ACK with an ACK per message.
	tests := []struct {
		name     string
		ackEvery bool
		perReq   uint64
		acks     uint64
	}{
		{"ack omission", false, 2, 0},
		{"ack per message", true, 4, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				n := memnet.New(1)
				n.SetLink(memnet.Link{Delay: 100 * time.Microsecond})
				p := newPair(t, ctx, n, tt.ackEvery, nil)
				const reqs = 50
				p.getPages(t, ctx, reqs, 1)
				synctest.Wait()
				time.Sleep(time.Second) // let the last ACK land
				c, s := p.client.Stats(), p.server.Stats()
				if got := c.Sent + s.Sent; got != tt.perReq*reqs {
					t.Errorf("datagrams sent %d, want %d", got, tt.perReq*reqs)
				}
				if got := c.SentAcks + s.SentAcks; got != tt.acks*reqs {
					t.Errorf("acks %d, want %d", got, tt.acks*reqs)
				}
				if c.Retransmits+s.Retransmits != 0 {
					t.Errorf("retransmits on a clean network: %+v %+v", c, s)
				}
				// Under AckEvery the request's ACK and the reply leave the
				// server together and may arrive in either order; an ACK
				// that comes after the reply finds nobody waiting.
				if !tt.ackEvery && c.Stale+s.Stale != 0 {
					t.Errorf("stale answers on a clean network: %+v %+v", c, s)
				}
				if p.srv.Served() != reqs {
					t.Errorf("served %d", p.srv.Served())
				}
			})
		})
	}
}

func TestLossDuplicationReordering(t *testing.T) {
	// Mocha section 2: loss, duplication and reordering must not break
	// correctness. Every request gets its own page, the handler runs once
	// per request, and every flagged message is delivered exactly once.
	tests := []struct {
		name      string
		loss, dup float64
		jitter    time.Duration
		ackEvery  bool
	}{
		{"loss 5%", 0.05, 0, 0, false},
		{"loss 30%", 0.30, 0, 0, false},
		{"duplicates 50%", 0, 0.5, 0, false},
		{"reorder", 0, 0, 3 * time.Millisecond, false},
		{"all", 0.2, 0.3, 3 * time.Millisecond, false},
		{"all, ack per message", 0.2, 0.3, 3 * time.Millisecond, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				n := memnet.New(uint64(i + 10))
				n.SetLink(memnet.Link{Loss: tt.loss, Dup: tt.dup, Delay: time.Millisecond, Jitter: tt.jitter})
				p := newPair(t, ctx, n, tt.ackEvery, nil)
				const reqs, msgs = 200, 100
				var wg sync.WaitGroup
				wg.Go(func() { p.getPages(t, ctx, reqs, 8) })
				for r := range msgs {
					wg.Go(func() {
						m := engine.Message{Type: engine.MsgErrReport, From: 1, To: 2, Round: uint32(r), Err: 1.5}
						if _, err := p.client.Send(ctx, p.srvAddr, &wire.Packet{Op: wire.OpErrReport | wire.ReliableFlag, Msg: m}); err != nil {
							t.Errorf("flagged message %d: %v", r, err)
						}
					})
				}
				wg.Wait()
				p.srv.mu.Lock()
				defer p.srv.mu.Unlock()
				if len(p.srv.requests) != reqs {
					t.Errorf("handler saw %d distinct requests, want %d", len(p.srv.requests), reqs)
				}
				for k, c := range p.srv.requests {
					if c != 1 {
						t.Errorf("request %s handled %d times", k, c)
					}
				}
				for r := range msgs {
					if c := p.srv.messages[uint32(r)]; c != 1 {
						t.Errorf("flagged message %d delivered %d times, want exactly once", r, c)
					}
				}
				c, s := p.client.Stats(), p.server.Stats()
				if tt.loss > 0 && c.Retransmits == 0 {
					t.Error("lossy network but no retransmission")
				}
				if tt.dup > 0 && s.DupRequests+s.DupMessages+c.Stale == 0 {
					t.Error("duplicating network but no duplicate recognised")
				}
				t.Logf("net sent %d lost %d duplicated %d; client %+v; server %+v", n.Stats().Sent, n.Stats().Lost, n.Stats().Duplicated, c, s)
			})
		})
	}
}

func TestLostReplyIsResentFromCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		n := memnet.New(2)
		dropped := false
		n.SetLink(memnet.Link{Delay: time.Millisecond, Drop: func(b []byte) bool {
			if !dropped && wire.Op(b[3]).Kind() == wire.OpPageGrant {
				dropped = true
				return true
			}
			return false
		}})
		p := newPair(t, ctx, n, false, nil)
		start := time.Now()
		rep, tm, err := p.client.Request(ctx, p.srvAddr, &wire.Packet{Op: wire.OpGetPage, Page: wire.Page{Addr: 9}})
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckPage(rep.Page.Data, 9, p.srv.PageSize); err != nil {
			t.Fatal(err)
		}
		// InitialRTO 50 ms, then a 2 ms round trip.
		if el := time.Since(start); el != 52*time.Millisecond || tm.Attempts != 2 {
			t.Errorf("elapsed %v after %d attempts, want 52ms after 2", el, tm.Attempts)
		}
		if s := p.server.Stats(); s.DupRequests != 1 || p.srv.Served() != 1 {
			t.Errorf("server: %d duplicates, %d served; want 1 and 1", s.DupRequests, p.srv.Served())
		}
	})
}

func TestLateReplyDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		n := memnet.New(3)
		n.SetLink(memnet.Link{Delay: 40 * time.Millisecond}) // 80 ms round trip > 50 ms initial RTO
		p := newPair(t, ctx, n, false, nil)
		rep, tm, err := p.client.Request(ctx, p.srvAddr, &wire.Packet{Op: wire.OpGetPage, Page: wire.Page{Addr: 1}})
		if err != nil || CheckPage(rep.Page.Data, 1, p.srv.PageSize) != nil {
			t.Fatalf("reply %v, %v", rep, err)
		}
		if tm.Attempts != 2 {
			t.Fatalf("attempts %d, want 2", tm.Attempts)
		}
		time.Sleep(time.Second)
		if c := p.client.Stats(); c.Stale != 1 {
			t.Errorf("stale replies %d, want 1 (the reply to the retransmission)", c.Stale)
		}
		if _, _, ok := func() (time.Duration, time.Duration, bool) {
			s, v, _, ok := p.client.RTT(p.srvAddr)
			return s, v, ok
		}(); ok {
			t.Error("an RTT was measured from a retransmitted request (Karn's rule)")
		}
	})
}

func TestTimeoutBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		n := memnet.New(4)
		p := newPair(t, ctx, n, false, func(c *Config) { c.MaxAttempts = 4 })
		nowhere := netip.MustParseAddrPort("10.0.0.9:9")
		start := time.Now()
		_, tm, err := p.client.Request(ctx, nowhere, &wire.Packet{Op: wire.OpGetPage})
		if !errors.Is(err, ErrTimeout) || tm.Attempts != 4 {
			t.Fatalf("err %v after %d attempts, want ErrTimeout after 4", err, tm.Attempts)
		}
		// 50 + 100 + 200 + 400 (capped at MaxRTO 400) ms.
		if el := time.Since(start); el != 750*time.Millisecond {
			t.Errorf("gave up after %v, want 750ms", el)
		}
		_, err = p.client.Send(ctx, nowhere, &wire.Packet{Op: wire.OpErrReport | wire.ReliableFlag, Msg: engine.Message{Type: engine.MsgErrReport, From: 1}})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("flagged send to nowhere: %v", err)
		}
		if s := p.client.Stats(); s.Timeouts != 2 || s.Retransmits != 6 {
			t.Errorf("stats %+v, want 2 timeouts and 6 retransmits", s)
		}
	})
}

func TestRTOFollowsMeasuredRTT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		n := memnet.New(5)
		n.SetLink(memnet.Link{Delay: 10 * time.Millisecond})
		p := newPair(t, ctx, n, false, nil)
		p.getPages(t, ctx, 20, 1)
		srtt, rttvar, rto, ok := p.client.RTT(p.srvAddr)
		if !ok || srtt != 20*time.Millisecond {
			t.Fatalf("srtt %v (ok %v), want 20ms", srtt, ok)
		}
		if want := srtt + 4*rttvar; rto != want {
			t.Errorf("rto %v, want srtt+4*rttvar = %v", rto, want)
		}
		// A constant RTT: the variation decays from 10 ms by 3/4 per sample.
		if rttvar > 100*time.Microsecond {
			t.Errorf("rttvar %v after 20 equal samples", rttvar)
		}
	})
}

func TestCloseFailsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		n := memnet.New(6)
		p := newPair(t, ctx, n, false, func(c *Config) { c.InitialRTO = time.Second; c.MaxRTO = time.Second })
		errc := make(chan error)
		go func() {
			_, _, err := p.client.Request(context.Background(), netip.MustParseAddrPort("10.0.0.9:9"), &wire.Packet{Op: wire.OpGetPage})
			errc <- err
		}()
		time.Sleep(10 * time.Millisecond)
		cancel()
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Fatalf("err %v, want ErrClosed", err)
		}
		if _, _, err := p.client.Request(context.Background(), p.srvAddr, &wire.Packet{Op: wire.OpGetPage}); !errors.Is(err, ErrClosed) {
			t.Fatalf("request after close: %v", err)
		}
	})
}

func TestBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		n := memnet.New(7)
		p := newPair(t, ctx, n, false, nil)
		raw := listenMem(n, 3)
		for _, b := range [][]byte{nil, []byte("hello"), []byte("GC\x01\x13\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff")} {
			raw.WriteTo(b, p.srvAddr)
		}
		synctest.Wait()
		if s := p.server.Stats(); s.DecodeErrors != 3 || s.Received != 0 {
			t.Errorf("server stats %+v, want 3 decode errors", s)
		}
		if _, _, err := p.client.Request(ctx, p.srvAddr, &wire.Packet{Op: wire.OpTimeDiff}); !errors.Is(err, ErrNotRequest) {
			t.Errorf("Request of a one-way op: %v", err)
		}
		if _, err := p.client.Send(ctx, p.srvAddr, &wire.Packet{Op: wire.OpGetPage}); !errors.Is(err, ErrNotRequest) {
			t.Errorf("Send of a request: %v", err)
		}
		if _, _, err := p.client.Request(ctx, netip.AddrPort{}, &wire.Packet{Op: wire.OpGetPage}); !errors.Is(err, ErrNotRequest) {
			t.Errorf("Request to an invalid address: %v", err)
		}
		if _, _, err := p.client.Request(ctx, p.srvAddr, nil); !errors.Is(err, ErrNotRequest) {
			t.Errorf("Request of nil: %v", err)
		}
		if _, err := p.client.Send(ctx, p.srvAddr, nil); !errors.Is(err, ErrNotRequest) {
			t.Errorf("Send of nil: %v", err)
		}
		// A request the handler refuses gets no reply: the requester times out.
		_, _, err := p.client.Request(ctx, p.srvAddr, &wire.Packet{Op: wire.OpStatusQuery})
		if !errors.Is(err, ErrTimeout) {
			t.Errorf("refused request: %v", err)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	n := memnet.New(8)
	port := uint16(0)
	base := func() Config { port++; c := DefaultConfig(); c.Conn = listenMem(n, port); return c }
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"ok", func(*Config) {}, ""},
		{"no conn", func(c *Config) { c.Conn = nil }, "Conn"},
		{"min rto", func(c *Config) { c.MinRTO = -1 }, "MinRTO"},
		{"max below min", func(c *Config) { c.MaxRTO = time.Millisecond }, "MaxRTO"},
		{"attempts", func(c *Config) { c.MaxAttempts = 0 }, "MaxAttempts"},
		{"ttl", func(c *Config) { c.RecentTTL = time.Second }, "RecentTTL"},
		{"size", func(c *Config) { c.RecentSize = -1 }, "RecentSize"},
	}
	for _, tt := range tests {
		c := base()
		tt.edit(&c)
		err := c.Validate()
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil || !contains(err.Error(), tt.field) {
			t.Errorf("%s: error %v does not name %s", tt.name, err, tt.field)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

type clockFunc func() int64

func (f clockFunc) Now() int64 { return f() }
