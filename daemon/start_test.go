package daemon

import (
	"context"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/gclock/gclock/internal/memnet"
)

// TestRunMetricsFailureLeavesNothing: when the metrics listener cannot be
// had (its address taken), Run returns the error with no goroutine of its
// own left running and its socket closed, so that a retry can bind it.
// Before, the endpoint, the real-time driver and the status sampler were
// started first and left to stop on their own after Run returned.
func TestRunMetricsFailureLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := memnet.New(1)
		cfg := memCluster(t, 3)[1]
		cfg.Metrics.Listen = "127.0.0.1:9100"
		m := &fakeMetrics{}
		stopOther, err := m.serve(cfg.Metrics.Listen, http.NotFoundHandler()) // someone else's
		if err != nil {
			t.Fatal(err)
		}
		defer stopOther()
		before := runtime.NumGoroutine()
		err = run(context.Background(), cfg, nil, fakeSys(mn, m))
		after := runtime.NumGoroutine()
		if err == nil || !strings.Contains(err.Error(), "metrics.listen") {
			t.Fatalf("run = %v, want the metrics.listen error", err)
		}
		if after > before {
			t.Errorf("%d goroutines after run returned, %d before: it left some running", after, before)
		}
		c, err := mn.Listen(netip.MustParseAddrPort(cfg.ListenAddr()))
		if err != nil {
			t.Fatalf("the daemon's address is still taken after run returned: %v", err)
		}
		c.Close()
	})
}
