package sim

import (
	"fmt"

	"github.com/gclock/gclock/topology"
)

// roles builds the scenario's graph and returns every node's sources and
// children (Jezequel A3, package topology).
func roles(t TopologySpec, n, ref int) (sources, children [][]int, err error) {
	g, err := topology.Named(t.Kind, n, t.Fanout, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("building the graph: %w", err)
	}
	rs, err := topology.Roles(g, ref)
	if err != nil {
		return nil, nil, fmt.Errorf("roles from reference %d: %w", ref, err)
	}
	sources = make([][]int, n)
	children = make([][]int, n)
	for i, r := range rs {
		sources[i], children[i] = r.Sources, r.Children
	}
	return sources, children, nil
}
