package topology

import (
	"fmt"
	"slices"
)

// Role is one node's place in the synchronization structure built from a
// reference (Jezequel, section 5.2, algorithm A3).
type Role struct {
	// Node is the node this role belongs to.
	Node int
	// Depth is the hop distance from the reference (0 on the reference).
	Depth int
	// Parent is the node's parent in the breadth-first spanning tree (the
	// lowest-numbered neighbour at Depth-1), -1 on the reference.
	Parent int
	// Rank is the node's position in A3's order: Rank[0] is Depth; Rank[k]
	// for k > 0 is the node's distance from the sub-reference of the k-th
	// nested same-depth sub-network it belongs to. Every source has a
	// lexicographically smaller Rank than the node it feeds, so the
	// source relation is acyclic.
	Rank []int
	// Sources are the neighbours the node synchronizes from, sorted: every
	// neighbour at Depth-1 (A3 step 1 intersects them all), plus inside each
	// same-depth sub-network the neighbours one step closer to that
	// sub-network's sub-reference (A3 step 2, recursively). Empty only on
	// the reference.
	Sources []int
	// Children are the neighbours that list this node as a source, sorted:
	// the node starts every exchange with them (Liao).
	Children []int
}

// Roles computes every node's role with ref as the reference (Jezequel A3):
// a breadth-first spanning tree from ref gives each node its depth and its
// sources one level up; the connected components of equal-depth nodes are
// synchronized recursively the same way from their lowest-numbered node.
// It runs in time proportional to the edges scanned at each nesting level:
// linear for trees, stars, even rings and hypercubes (no same-depth edges).
func Roles(g *Graph, ref int) ([]Role, error) {
	if g == nil || g.N() == 0 {
		return nil, fmt.Errorf("roles: empty graph: %w", ErrInvalid)
	}
	n := g.N()
	if ref < 0 || ref >= n {
		return nil, fmt.Errorf("roles: reference %d outside [0, %d): %w", ref, n, ErrInvalid)
	}
	r := &roleSolver{
		g:     g,
		set:   make([]int32, n),
		dist:  make([]int32, n),
		seen:  make([]int32, n),
		roles: make([]Role, n),
	}
	for i := range r.roles {
		r.roles[i] = Role{Node: i, Parent: -1}
	}
	all := make([]int32, n)
	for i := range all {
		all[i] = int32(i)
	}
	// Sets are numbered from 1 so that the zero value means "in no set".
	r.nextSet = 1
	work := []task{{nodes: all, ref: int32(ref), id: r.newSet(all), level: 0}}
	for len(work) > 0 {
		t := work[len(work)-1]
		work = work[:len(work)-1]
		sub, err := r.solve(t)
		if err != nil {
			return nil, err
		}
		work = append(work, sub...)
	}
	for i := range r.roles {
		slices.Sort(r.roles[i].Sources)
	}
	for i := range r.roles {
		for _, s := range r.roles[i].Sources {
			r.roles[s].Children = append(r.roles[s].Children, i)
		}
	}
	// Children are appended in increasing i, so they are already sorted.
	return r.roles, nil
}

type task struct {
	nodes []int32 // the sub-network's nodes
	ref   int32   // its (sub-)reference
	id    int32   // the set id its nodes carry in roleSolver.set
	level int     // nesting level: 0 is the whole graph
}

type roleSolver struct {
	g       *Graph
	set     []int32 // set[i]: id of the innermost sub-network holding i
	dist    []int32 // distance from the current sub-network's reference
	seen    []int32 // visit stamp for component searches
	stamp   int32
	nextSet int32
	roles   []Role
}

func (r *roleSolver) newSet(nodes []int32) int32 {
	id := r.nextSet
	r.nextSet++
	for _, v := range nodes {
		r.set[v] = id
	}
	return id
}

// solve runs one level of A3 on a sub-network: a BFS from its reference
// restricted to its nodes, sources one step closer, then the same-depth
// components as new tasks.
func (r *roleSolver) solve(t task) ([]task, error) {
	for _, v := range t.nodes {
		r.dist[v] = -1
	}
	r.dist[t.ref] = 0
	order := make([]int32, 0, len(t.nodes))
	order = append(order, t.ref)
	for k := 0; k < len(order); k++ {
		i := order[k]
		for _, j := range r.g.adj[i] {
			if r.set[j] == t.id && r.dist[j] < 0 {
				r.dist[j] = r.dist[i] + 1
				order = append(order, int32(j))
			}
		}
	}
	if len(order) != len(t.nodes) {
		for _, v := range t.nodes {
			if r.dist[v] < 0 {
				if t.level == 0 {
					return nil, fmt.Errorf("roles: node %d is not connected to reference %d: %w", v, t.ref, ErrInvalid)
				}
				// A same-depth component is connected by construction.
				return nil, fmt.Errorf("roles: internal error: node %d unreachable in sub-network of %d", v, t.ref)
			}
		}
	}
	for _, v := range order {
		role := &r.roles[v]
		d := int(r.dist[v])
		role.Rank = append(role.Rank, d)
		if t.level == 0 {
			role.Depth = d
		}
		for _, j := range r.g.adj[v] {
			if r.set[j] == t.id && r.dist[j] == r.dist[v]-1 {
				if t.level == 0 && role.Parent < 0 {
					role.Parent = j
				}
				role.Sources = append(role.Sources, j)
			}
		}
	}
	// Same-depth components, discovered in BFS order so the work is
	// deterministic. Membership is decided before any node is moved into a
	// new set, so relabelling cannot hide a neighbour.
	var comps [][]int32
	r.stamp++
	for _, v := range order {
		if r.seen[v] == r.stamp || !r.hasSameDepth(v, t.id) {
			continue
		}
		comp := []int32{v}
		r.seen[v] = r.stamp
		for k := 0; k < len(comp); k++ {
			i := comp[k]
			for _, j := range r.g.adj[i] {
				if r.set[j] == t.id && r.seen[j] != r.stamp && r.dist[j] == r.dist[i] {
					r.seen[j] = r.stamp
					comp = append(comp, int32(j))
				}
			}
		}
		comps = append(comps, comp)
	}
	sub := make([]task, 0, len(comps))
	for _, c := range comps {
		sub = append(sub, task{nodes: c, ref: slices.Min(c), level: t.level + 1})
	}
	for k := range sub {
		sub[k].id = r.newSet(sub[k].nodes)
	}
	return sub, nil
}

func (r *roleSolver) hasSameDepth(v int32, id int32) bool {
	for _, j := range r.g.adj[v] {
		if r.set[j] == id && r.dist[j] == r.dist[v] {
			return true
		}
	}
	return false
}
