//go:build linux

package workload

import (
	"context"
	"testing"
)

// BenchmarkProbeRTT reports the loopback probe round trip (minus the
// responder's hold time) with user-space and with kernel stamps.
func BenchmarkProbeRTT(b *testing.B) {
	var r RTTResult
	for b.Loop() {
		var err error
		r, err = MeasureRTT(context.Background(), RTTConfig{Probes: 500})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.User.Min)/1e3, "user-min-us")
	b.ReportMetric(float64(r.User.P50)/1e3, "user-p50-us")
	b.ReportMetric(float64(r.User.P99)/1e3, "user-p99-us")
	b.ReportMetric(float64(r.Kernel.Min)/1e3, "kernel-min-us")
	b.ReportMetric(float64(r.Kernel.P50)/1e3, "kernel-p50-us")
	b.ReportMetric(float64(r.Kernel.P99)/1e3, "kernel-p99-us")
}
