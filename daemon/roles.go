package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/topology"
)

// graph builds the configured topology over the peers, in graph order:
// position 0 is ref, then the other peers by increasing id. It returns the
// graph and the node id at each position.
func (c *Config) graph(ref uint32) (*topology.Graph, []uint32, error) {
	ids := c.order(ref)
	n := len(ids)
	var edges [][2]int
	if c.Topology.Kind == TopoExplicit {
		pos := make(map[uint32]int, n)
		for i, id := range ids {
			pos[id] = i
		}
		edges = make([][2]int, 0, len(c.Topology.Edges))
		for i, e := range c.Topology.Edges {
			a, okA := pos[e[0]]
			b, okB := pos[e[1]]
			if !okA || !okB {
				return nil, nil, fmt.Errorf("topology.edges[%d]: %v names a node that is not a peer: %w", i, e, ErrConfig)
			}
			edges = append(edges, [2]int{a, b})
		}
	}
	g, err := topology.Named(c.Topology.Kind, n, c.Topology.Fanout, edges)
	if ue, ok := errors.AsType[*topology.UnreachableError](err); ok {
		return nil, nil, fmt.Errorf("topology.edges: node %d cannot be reached from the reference %d: %w", ids[ue.Node], ref, ErrConfig)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("topology %s over %d peers: %w", c.Topology.Kind, n, err)
	}
	return g, ids, nil
}

// Roles returns this node's sources and children when ref is the reference
// (Jezequel A3 over the configured topology, package topology).
func (c *Config) Roles(ref uint32) (sources, children []engine.NodeID, err error) {
	g, ids, err := c.graph(ref)
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

// failoverRoles is this node's roles when ref is the reference after a
// failover (engine.MemberConfig.Roles). The nodes before it in the order
// (gone) are presumed gone: the topology is built over the others (so
// that no live node hangs below a dead one), and the gone ones are
// attached directly to the reference as leaves, where a returning one
// finds a source. If the topology cannot be built without them (an
// explicit graph they disconnect), the full topology is used (logged).
func (c *Config) failoverRoles(ref engine.NodeID, gone []engine.NodeID, log *slog.Logger) (sources, children []engine.NodeID, err error) {
	if len(gone) == 0 {
		return c.Roles(uint32(ref))
	}
	r := *c
	r.Peers = slices.DeleteFunc(slices.Clone(c.Peers), func(p Peer) bool { return slices.Contains(gone, engine.NodeID(p.ID)) })
	r.Topology.Edges = slices.DeleteFunc(slices.Clone(c.Topology.Edges), func(e [2]uint32) bool {
		return slices.Contains(gone, engine.NodeID(e[0])) || slices.Contains(gone, engine.NodeID(e[1]))
	})
	self := engine.NodeID(c.Node.ID)
	r.Node.ID = uint32(ref) // a gone node computes the same graph as the others
	if _, _, err := r.Roles(uint32(ref)); err != nil {
		if log != nil {
			log.Warn("topology without the nodes before the reference failed: using the full topology", "err", err)
		}
		return c.Roles(uint32(ref))
	}
	if slices.Contains(gone, self) {
		return []engine.NodeID{ref}, nil, nil
	}
	r.Node.ID = uint32(self)
	sources, children, err = r.Roles(uint32(ref))
	if err != nil {
		return nil, nil, err
	}
	if ref == self {
		children = append(children, gone...)
	}
	return sources, children, nil
}

// referenceOrder is reference.order as node ids (the configured reference
// alone when the order is empty).
func (c *Config) referenceOrder() []engine.NodeID {
	var order []engine.NodeID
	for _, id := range c.Reference.Order {
		order = append(order, engine.NodeID(id))
	}
	if len(order) == 0 {
		order = []engine.NodeID{engine.NodeID(c.ReferenceID())}
	}
	return order
}

// clusterIDs is every node of the cluster, this one and its peers: the
// electorate of the reference election.
func (c *Config) clusterIDs() []engine.NodeID {
	ids := []engine.NodeID{engine.NodeID(c.Node.ID)}
	for _, p := range c.Peers {
		if !slices.Contains(ids, engine.NodeID(p.ID)) {
			ids = append(ids, engine.NodeID(p.ID))
		}
	}
	for _, id := range c.referenceOrder() {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// newMember builds the node's engine.Member: the configured engine, the
// reference order and the roles of each reference.
func (c *Config) newMember(log *slog.Logger) (*engine.Member, error) {
	return engine.NewMember(engine.MemberConfig{
		Engine:  c.EngineConfig(nil, nil),
		Order:   c.referenceOrder(),
		Cluster: c.clusterIDs(),
		// The transport's reply cache remembers (sender, seq) for 30 s:
		// a restarted daemon's status queries must not reuse its
		// previous life's numbers (engine.MemberConfig.FirstSeq).
		FirstSeq:      uint32(time.Now().UnixMicro()),
		FailoverAfter: c.Reference.FailoverAfter.D(),
		Roles: func(ref engine.NodeID, gone []engine.NodeID) ([]engine.NodeID, []engine.NodeID, error) {
			return c.failoverRoles(ref, gone, log)
		},
	}, log)
}
