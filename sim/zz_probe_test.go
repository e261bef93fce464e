package sim

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
)

func TestZZProbe(t *testing.T) {
	base, err := Shipped("link-matrix-drift-step")
	if err != nil {
		t.Fatal(err)
	}
	if m := os.Getenv("ZZ_MODEL"); m != "" {
		base.Links.Model = m
	}
	seed, _ := strconv.Atoi(os.Getenv("ZZ_SEED"))
	if seed == 0 {
		seed = 1
	}
	base.Seed = uint64(seed)
	res, err := Run(context.Background(), base, Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("p50 %d p99 %d max %d\n", res.Others.ErrorP50Ns, res.Others.ErrorP99Ns, res.Others.ErrorMaxNs)
	for i, n := range res.Trace.Nodes {
		for _, p := range res.Trace.Points[i] {
			if p.T >= 34.5 && p.T <= 39 {
				fmt.Printf("n%d %.2f %d\n", n, p.T, p.Err)
			}
		}
		for _, e := range res.Trace.Events[i] {
			if e.T >= 30 && e.T <= 45 {
				fmt.Printf("n%d ev %.3f %v\n", n, e.T, e.Kind)
			}
		}
	}
}
