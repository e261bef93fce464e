package topology

import (
	"fmt"
)

// Kinds of graph by name, as a configuration's topology.kind writes them.
const (
	KindStar      = "star"      // Star
	KindTree      = "tree"      // Tree, with a fanout
	KindRing      = "ring"      // Ring
	KindHypercube = "hypercube" // HypercubeN: a power-of-two number of nodes
	KindMesh      = "mesh"      // FullMesh
	KindExplicit  = "explicit"  // FromEdges
)

// Named builds the graph of n nodes that a configuration names by kind:
// fanout is a tree's, edges (between node numbers) an explicit graph's.
// It is the one switch from a name to a graph, used by the daemon and the
// simulator alike.
func Named(kind string, n, fanout int, edges [][2]int) (*Graph, error) {
	switch kind {
	case KindStar:
		return Star(n)
	case KindTree:
		return Tree(n, fanout)
	case KindRing:
		return Ring(n)
	case KindHypercube:
		return HypercubeN(n)
	case KindMesh:
		return FullMesh(n)
	case KindExplicit:
		return FromEdges(n, edges)
	}
	return nil, fmt.Errorf("unknown topology %q (star, tree, ring, hypercube, mesh, explicit): %w", kind, ErrInvalid)
}

// UnreachableError is FromEdges' refusal of a graph in which Node cannot be
// reached from node 0.
type UnreachableError struct{ Node int }

// Error names the node.
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("edges: node %d is not connected to node 0: %v", e.Node, ErrInvalid)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *UnreachableError) Unwrap() error { return ErrInvalid }
