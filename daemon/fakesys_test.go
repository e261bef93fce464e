package daemon

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/transport"
)

// memLink is the in-memory network's link for daemon tests: about a
// loopback's one-way delay, with jitter so that no two exchanges are alike.
var memLink = memnet.Link{Delay: 5 * time.Microsecond, Jitter: 2 * time.Microsecond}

// fakeRaw is the raw clock inside a testing/synctest bubble: the bubble's
// fake time, which starts at 2000-01-01 UTC and moves only when every
// goroutine in the bubble is blocked.
func fakeRaw() int64 { return time.Now().UnixNano() }

// fakeSys runs a daemon on the in-memory network with the bubble's fake
// time as its raw clock: no kernel, so no kernel timestamps. Its metrics
// are served to m (nil: nowhere), which the test calls with no socket (a
// real one in a bubble would stop fake time). Call it inside synctest.Test,
// on a network made there.
func fakeSys(n *memnet.Network, m *fakeMetrics) sys {
	return sys{
		raw: fakeRaw,
		listen: func(a netip.AddrPort, _ transport.UDPOptions) (transport.PacketConn, error) {
			c, err := n.Listen(a)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		serve: m.serve,
		// A synchronised CLOCK_REALTIME (the machine's kernel may not be).
		upstream: func() (realtime.Upstream, error) { return realtime.Upstream{Known: true, Synced: true}, nil },
	}
}

// fakeMetrics holds the metrics handlers of daemons run on fakeSys, by
// their metrics.listen.
type fakeMetrics struct {
	mu sync.Mutex
	h  map[string]http.Handler
}

func (m *fakeMetrics) serve(addr string, h http.Handler) (func(), error) {
	if m == nil {
		return func() {}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		m.h = map[string]http.Handler{}
	}
	if m.h[addr] != nil {
		return nil, fmt.Errorf("%s: address in use", addr)
	}
	m.h[addr] = h
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.h, addr)
	}, nil
}

// get calls the handler served at addr with GET path and returns the body;
// it fails the test if no daemon serves addr or the status is not 200.
func (m *fakeMetrics) get(t *testing.T, addr, path string) string {
	t.Helper()
	m.mu.Lock()
	h := m.h[addr]
	m.mu.Unlock()
	if h == nil {
		t.Fatalf("no daemon serves metrics at %s", addr)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://gclock"+path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s%s: %d %s", addr, path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// memCluster configures n daemons for the in-memory network, node i+1 at
// 10.0.0.1:i+1, without kernel timestamps and without a key
// (auth.insecure).
func memCluster(t *testing.T, n int) []Config {
	var addrs []string
	for i := range n {
		addrs = append(addrs, fmt.Sprintf("10.0.0.1:%d", i+1))
	}
	cfgs := clusterAt(t, addrs)
	for i := range cfgs {
		cfgs[i].Transport.KernelTimestamps = false
		// The in-memory network reaches no one else: no key, said so
		// (tests that want one set auth.key_file).
		cfgs[i].Auth.Insecure = true
	}
	return cfgs
}
