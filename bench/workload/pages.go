package workload

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// PageClientConfig is the client side of the page-transfer workload.
type PageClientConfig struct {
	// Requests is the number of page requests; the workload is a fixed
	// amount of work, so the elapsed time compares the modes (as the
	// paper's benchmark times do).
	Requests int
	// Concurrency is the number of requests in flight (1 = Mocha's blocking
	// getpage: one outstanding page fault per process).
	Concurrency int
	// PageSize is the expected page size, to check every reply.
	PageSize int
}

// PageResult is what one run of the workload measured.
type PageResult struct {
	Requests  int           // completed requests
	Failed    int           // requests that gave up (timeout) or got a wrong page
	Elapsed   time.Duration // wall time of the whole workload
	ReqPerSec float64
	P50, P99  time.Duration // request latency percentiles (successful requests)
	Max       time.Duration
	Retried   int // requests that needed more than one transmission
}

// RunPageClient runs the workload from ep against server and checks every
// page. It returns an error only for a bad configuration or a cancelled
// context; failed requests are counted.
func RunPageClient(ctx context.Context, ep *transport.Endpoint, server netip.AddrPort, cfg PageClientConfig) (PageResult, error) {
	var r PageResult
	switch {
	case cfg.Requests < 1:
		return r, fmt.Errorf("workload: page client: Requests %d must be >= 1", cfg.Requests)
	case cfg.Concurrency < 1:
		return r, fmt.Errorf("workload: page client: Concurrency %d must be >= 1", cfg.Concurrency)
	case cfg.PageSize < 0 || cfg.PageSize > wire.MaxPageData:
		return r, fmt.Errorf("workload: page client: PageSize %d outside [0, %d]", cfg.PageSize, wire.MaxPageData)
	}
	lat := make([]time.Duration, cfg.Requests)
	ok := make([]bool, cfg.Requests)
	retried := make([]bool, cfg.Requests)
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for g := range cfg.Concurrency {
		wg.Go(func() {
			for i := g; i < cfg.Requests; i += cfg.Concurrency {
				if ctx.Err() != nil {
					return
				}
				addr := uint64(i)
				t0 := time.Now()
				rep, tm, err := ep.Request(ctx, server, &wire.Packet{Op: wire.OpGetPage, Page: wire.Page{Addr: addr}})
				lat[i] = time.Since(t0)
				retried[i] = tm.Attempts > 1
				if err == nil {
					err = transport.CheckPage(rep.Page.Data, addr, cfg.PageSize)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				ok[i] = true
			}
		})
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	if err := ctx.Err(); err != nil {
		return r, fmt.Errorf("workload: page client: %w", err)
	}
	var good []time.Duration
	for i := range lat {
		if ok[i] {
			good = append(good, lat[i])
		} else {
			r.Failed++
		}
		if retried[i] {
			r.Retried++
		}
	}
	r.Requests = len(good)
	if r.Elapsed > 0 {
		r.ReqPerSec = float64(r.Requests) / r.Elapsed.Seconds()
	}
	if len(good) > 0 {
		slices.Sort(good)
		r.P50, r.P99, r.Max = percentile(good, 0.50), percentile(good, 0.99), good[len(good)-1]
	}
	if r.Failed > 0 && firstErr != nil && errors.Is(firstErr, context.Canceled) {
		return r, firstErr
	}
	return r, nil
}

// percentile returns the q-quantile (nearest rank) of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
