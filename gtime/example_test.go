package gtime_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/gtime"
)

// A program reads global time from the page its host's daemon publishes
// (gtime.DefaultPath): Now is one CLOCK_MONOTONIC_RAW read and some
// arithmetic, with the bounds that hold the true time and the status. Here
// the example publishes the page itself, as the daemon would: global time
// 1 ms ahead of the local clock, +2 ppm, +-500 ns.
func Example() {
	dir, err := os.MkdirTemp("", "gtime-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "gclock")

	w, err := gtime.NewWriter(path) // the daemon's side
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	now := gtime.RawNow()
	err = w.Publish(gtime.Update{
		Local:   now,
		Mapping: estimate.Mapping{X0: now, Y0: now + 1_000_000, Skew: 2e-6, W0: 500, Valid: true},
		Status:  gtime.StatusSynced, StaleAfter: 16 * time.Second, MaxDrift: 100e-6, MaxSlewRate: 500e-6,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	r, err := gtime.Open(path) // the program's side
	if err != nil {
		fmt.Println(err) // no page: no daemon on this host
		return
	}
	defer r.Close()
	t, err := r.Now()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.Status, t.Earliest <= t.Est && t.Est <= t.Latest)

	// At evaluates the page at a given local time: 1 s after the update,
	// the 2 ppm have added 2 us to the offset.
	t, err = r.At(now + 1_000_000_000)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("offset %d ns, width %d ns\n", t.Est-(now+1_000_000_000), t.Width())
	// Output:
	// synced true
	// offset 1002000 ns, width 1000 ns
}
