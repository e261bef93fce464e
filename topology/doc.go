// Package topology describes who synchronizes from whom in a cluster.
//
// A Graph is the undirected network: build one with Star, Tree, Ring,
// Hypercube (or HypercubeN), FullMesh, or FromEdges for any connected graph.
// Constructors validate their input and name the offending node or edge.
//
// Roles turns a graph and a reference node into one Role per node, following
// Jezequel's algorithm A3 (INRIA RR-1177, section 5.2): a breadth-first
// spanning tree from the reference gives each node its depth; a node follows
// (has as Sources) every neighbour one level closer to the reference, and
// inside each connected group of equal-depth neighbours it also follows the
// neighbours one step closer to that group's sub-reference (its lowest id),
// recursively. Children is the inverse relation: a node starts the exchanges
// with its children (Liao: the source initiates).
//
//	g, err := topology.Ring(5)
//	roles, err := topology.Roles(g, 0)
//	// roles[3].Sources == []int{2, 4}: node 4 is one hop closer to 0, and
//	// node 2 is the sub-reference of the same-depth pair {2, 3}.
//
// The engine's Config.Sources and Config.Children are filled from a Role.
// Roles is linear in the edges for trees, stars, even rings and hypercubes;
// a 10,000-node tree takes about 2 ms.
package topology
