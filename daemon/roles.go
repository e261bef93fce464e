package daemon

import (
	"fmt"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/topology"
)

// Graph builds the configured topology over the peers, in graph order:
// position 0 is ref, then the other peers by increasing id. It returns the
// graph and the node id at each position.
func (c *Config) Graph(ref uint32) (*topology.Graph, []uint32, error) {
	ids := c.order(ref)
	n := len(ids)
	var g *topology.Graph
	var err error
	switch c.Topology.Kind {
	case TopoStar:
		g, err = topology.Star(n)
	case TopoTree:
		g, err = topology.Tree(n, c.Topology.Fanout)
	case TopoRing:
		g, err = topology.Ring(n)
	case TopoHypercube:
		g, err = topology.HypercubeN(n)
	case TopoMesh:
		g, err = topology.FullMesh(n)
	case TopoExplicit:
		pos := make(map[uint32]int, n)
		for i, id := range ids {
			pos[id] = i
		}
		adj := map[uint32][]uint32{}
		for _, e := range c.Topology.Edges {
			adj[e[0]] = append(adj[e[0]], e[1])
			adj[e[1]] = append(adj[e[1]], e[0])
		}
		seen := map[uint32]bool{ref: true}
		queue := []uint32{ref}
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			for _, w := range adj[v] {
				if !seen[w] {
					seen[w] = true
					queue = append(queue, w)
				}
			}
		}
		for _, id := range ids {
			if !seen[id] {
				return nil, nil, fmt.Errorf("topology.edges: node %d cannot be reached from the reference %d: %w", id, ref, ErrConfig)
			}
		}
		edges := make([][2]int, 0, len(c.Topology.Edges))
		for i, e := range c.Topology.Edges {
			a, okA := pos[e[0]]
			b, okB := pos[e[1]]
			if !okA || !okB {
				return nil, nil, fmt.Errorf("topology.edges[%d]: %v names a node that is not a peer: %w", i, e, ErrConfig)
			}
			edges = append(edges, [2]int{a, b})
		}
		g, err = topology.FromEdges(n, edges)
	default:
		return nil, nil, fmt.Errorf("topology.kind: unknown %q: %w", c.Topology.Kind, ErrConfig)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("topology %s over %d peers: %w", c.Topology.Kind, n, err)
	}
	return g, ids, nil
}

// Roles returns this node's sources and children when ref is the reference
// (Jezequel A3 over the configured topology, package topology).
func (c *Config) Roles(ref uint32) (sources, children []engine.NodeID, err error) {
	g, ids, err := c.Graph(ref)
	if err != nil {
		return nil, nil, err
	}
	roles, err := topology.Roles(g, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("topology roles: %w", err)
	}
	for i, id := range ids {
		if id != c.Node.ID {
			continue
		}
		for _, s := range roles[i].Sources {
			sources = append(sources, engine.NodeID(ids[s]))
		}
		for _, ch := range roles[i].Children {
			children = append(children, engine.NodeID(ids[ch]))
		}
		return sources, children, nil
	}
	return nil, nil, fmt.Errorf("node.id %d is not among the peers: %w", c.Node.ID, ErrConfig)
}
