//go:build linux

package workload

import (
	"testing"
	"time"

	"github.com/gclock/gclock/transport"
)

func TestLoopbackPagesLossy(t *testing.T) {
	for _, ackEvery := range []bool{false, true} {
		res, err := RunLoopbackPages(t.Context(), LoopbackPageConfig{
			Client:   PageClientConfig{Requests: 300, Concurrency: 2, PageSize: transport.PageSize},
			AckEvery: ackEvery, Loss: 0.05, Seed: 1,
			Endpoint: transport.Config{MinRTO: 5 * time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed != 0 || res.Requests != 300 {
			t.Errorf("ackEvery %v: %d failed, %d done", ackEvery, res.Failed, res.Requests)
		}
		if res.Relay.Dropped == 0 || res.Retransmits == 0 {
			t.Errorf("ackEvery %v: 5%% loss but relay %+v, %d retransmits", ackEvery, res.Relay, res.Retransmits)
		}
		t.Logf("ackEvery %v: %+v", ackEvery, res)
	}
}
