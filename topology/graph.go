package topology

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// MaxNodes is the largest graph the constructors build. It keeps node ids in
// an int32 inside Roles and bounds memory: a full mesh of this size would
// already hold a billion edges, so only sparse graphs can reach it.
const MaxNodes = 1 << 24

// ErrInvalid is wrapped by every error about a bad graph or bad arguments.
var ErrInvalid = errors.New("invalid topology")

// Graph is an undirected, connected graph over the nodes 0..N()-1. Each
// node's neighbour list is sorted and free of duplicates and self loops.
// A Graph is immutable once built.
type Graph struct {
	adj [][]int
}

// N returns the number of nodes.
func (g *Graph) N() int { return len(g.adj) }

// Neighbors returns node i's neighbours in increasing order. The slice is
// shared with the graph: do not modify it.
func (g *Graph) Neighbors(i int) []int { return g.adj[i] }

// Degree returns the number of neighbours of node i.
func (g *Graph) Degree(i int) int { return len(g.adj[i]) }

// Edges returns every edge once, as {low, high}, sorted.
func (g *Graph) Edges() [][2]int {
	var out [][2]int
	for i, ns := range g.adj {
		for _, j := range ns {
			if i < j {
				out = append(out, [2]int{i, j})
			}
		}
	}
	return out
}

// Adjacent reports whether i and j are neighbours.
func (g *Graph) Adjacent(i, j int) bool {
	if i < 0 || i >= len(g.adj) || j < 0 || j >= len(g.adj) {
		return false
	}
	_, ok := slices.BinarySearch(g.adj[i], j)
	return ok
}

func checkN(what string, n int) error {
	if n < 1 || n > MaxNodes {
		return fmt.Errorf("%s: node count %d outside [1, %d]: %w", what, n, MaxNodes, ErrInvalid)
	}
	return nil
}

// Star returns n nodes where node 0 is the centre and every other node is a
// leaf attached to it (Liao: node 0 talks to everybody).
func Star(n int) (*Graph, error) {
	if err := checkN("star", n); err != nil {
		return nil, err
	}
	b := newBuilder(n)
	for i := 1; i < n; i++ {
		b.add(0, i)
	}
	return b.graph(), nil
}

// Tree returns a complete fanout-ary tree of n nodes in breadth-first
// numbering: the parent of node i > 0 is (i-1)/fanout.
func Tree(n, fanout int) (*Graph, error) {
	if err := checkN("tree", n); err != nil {
		return nil, err
	}
	if fanout < 1 {
		return nil, fmt.Errorf("tree: fanout %d, need >= 1: %w", fanout, ErrInvalid)
	}
	b := newBuilder(n)
	for i := 1; i < n; i++ {
		b.add((i-1)/fanout, i)
	}
	return b.graph(), nil
}

// Ring returns n nodes where node i neighbours i-1 and i+1 modulo n. A ring
// of two nodes is a single edge; a ring of one node has no edge.
func Ring(n int) (*Graph, error) {
	if err := checkN("ring", n); err != nil {
		return nil, err
	}
	b := newBuilder(n)
	for i := 0; i+1 < n; i++ {
		b.add(i, i+1)
	}
	if n > 2 {
		b.add(n-1, 0)
	}
	return b.graph(), nil
}

// Hypercube returns the hypercube of dimension dim: 2^dim nodes, where two
// nodes are neighbours when their ids differ in exactly one bit.
func Hypercube(dim int) (*Graph, error) {
	if dim < 0 || dim > bits.Len(MaxNodes)-1 {
		return nil, fmt.Errorf("hypercube: dimension %d outside [0, %d]: %w", dim, bits.Len(MaxNodes)-1, ErrInvalid)
	}
	n := 1 << dim
	b := newBuilder(n)
	for i := range n {
		for d := range dim {
			if j := i ^ (1 << d); i < j {
				b.add(i, j)
			}
		}
	}
	return b.graph(), nil
}

// HypercubeN returns the hypercube with n nodes; n must be a power of two.
func HypercubeN(n int) (*Graph, error) {
	if err := checkN("hypercube", n); err != nil {
		return nil, err
	}
	if n&(n-1) != 0 {
		return nil, fmt.Errorf("hypercube: node count %d is not a power of two: %w", n, ErrInvalid)
	}
	return Hypercube(bits.Len(uint(n)) - 1)
}

// FullMesh returns n nodes that all neighbour each other. Its Roles form a
// chain (Jezequel 5.3: each site becomes the next sub-reference), so node k
// follows all nodes below k: use it for small n only.
func FullMesh(n int) (*Graph, error) {
	if err := checkN("full mesh", n); err != nil {
		return nil, err
	}
	b := newBuilder(n)
	for i := range n {
		for j := i + 1; j < n; j++ {
			b.add(i, j)
		}
	}
	return b.graph(), nil
}

// FromEdges builds a graph of n nodes from an edge list. Edges are
// undirected; a repeated edge (in either direction) is accepted once. It
// fails, naming the culprit, on an endpoint out of range, a self loop, or a
// node that cannot be reached from node 0.
func FromEdges(n int, edges [][2]int) (*Graph, error) {
	if err := checkN("edges", n); err != nil {
		return nil, err
	}
	b := newBuilder(n)
	for k, e := range edges {
		for _, v := range e {
			if v < 0 || v >= n {
				return nil, fmt.Errorf("edges: edge %d (%d-%d): node %d outside [0, %d): %w", k, e[0], e[1], v, n, ErrInvalid)
			}
		}
		if e[0] == e[1] {
			return nil, fmt.Errorf("edges: edge %d: self loop on node %d: %w", k, e[0], ErrInvalid)
		}
		b.add(e[0], e[1])
	}
	g := b.graph()
	if u := g.unreachable(0); u >= 0 {
		return nil, &UnreachableError{Node: u}
	}
	return g, nil
}

// unreachable returns the lowest node not reachable from start, or -1.
func (g *Graph) unreachable(start int) int {
	seen := make([]bool, len(g.adj))
	queue := []int{start}
	seen[start] = true
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, j := range g.adj[i] {
			if !seen[j] {
				seen[j] = true
				queue = append(queue, j)
			}
		}
	}
	for i, s := range seen {
		if !s {
			return i
		}
	}
	return -1
}

type builder struct{ adj [][]int }

func newBuilder(n int) *builder { return &builder{adj: make([][]int, n)} }

func (b *builder) add(i, j int) {
	b.adj[i] = append(b.adj[i], j)
	b.adj[j] = append(b.adj[j], i)
}

func (b *builder) graph() *Graph {
	for i, ns := range b.adj {
		slices.Sort(ns)
		b.adj[i] = slices.Compact(ns)
	}
	return &Graph{adj: b.adj}
}
