package lab

import (
	"context"

	"github.com/gclock/gclock/lab/netlab"
)

// Lab is a running lab (a netlab.Lab: hosts, links, the switch) with the
// experiments that run on it as methods: RunGclock, runPeers, RunSpoof,
// runMeasure, StartEndpoints.
type Lab struct {
	*netlab.Lab
}

// Up builds the lab (netlab.Up); the caller must call Down.
func Up(ctx context.Context, cfg netlab.Config) (*Lab, error) {
	n, err := netlab.Up(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Lab{n}, nil
}
