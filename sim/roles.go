package sim

import (
	"fmt"

	"github.com/gclock/gclock/topology"
)

// roles builds the scenario's graph and returns every node's sources and
// children (Jezequel A3, package topology).
func roles(t TopologySpec, n, ref int) (sources, children [][]int, err error) {
	var g *topology.Graph
	switch t.Kind {
	case "star":
		g, err = topology.Star(n)
	case "tree":
		g, err = topology.Tree(n, t.Fanout)
	case "ring":
		g, err = topology.Ring(n)
	case "hypercube":
		g, err = topology.HypercubeN(n)
	case "mesh":
		g, err = topology.FullMesh(n)
	default:
		return nil, nil, fmt.Errorf("unknown topology %q (star, tree, ring, hypercube, mesh)", t.Kind)
	}
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
