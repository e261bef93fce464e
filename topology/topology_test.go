package topology

import (
	"errors"
	"math/bits"
	"slices"
	"strings"
	"testing"
)

// checkRoles verifies the invariants every Roles result must satisfy, for any
// graph: depths are BFS distances, sources are neighbours with a smaller
// Rank (so the relation is acyclic), every node but the reference has a
// source, every neighbour one level up is a source, and Children is exactly
// the inverse of Sources.
func checkRoles(t *testing.T, g *Graph, ref int, roles []Role) {
	t.Helper()
	n := g.N()
	if len(roles) != n {
		t.Fatalf("got %d roles for %d nodes", len(roles), n)
	}
	depth := bfs(g, ref)
	childSet := make(map[[2]int]bool)
	for i, r := range roles {
		if r.Node != i {
			t.Fatalf("roles[%d].Node = %d", i, r.Node)
		}
		if r.Depth != depth[i] {
			t.Fatalf("node %d: depth %d, BFS says %d", i, r.Depth, depth[i])
		}
		if len(r.Rank) == 0 || r.Rank[0] != r.Depth {
			t.Fatalf("node %d: rank %v does not start with depth %d", i, r.Rank, r.Depth)
		}
		if i == ref {
			if len(r.Sources) != 0 || r.Parent != -1 {
				t.Fatalf("reference %d has sources %v parent %d", i, r.Sources, r.Parent)
			}
		} else {
			if len(r.Sources) == 0 {
				t.Fatalf("node %d has no source", i)
			}
			if !g.Adjacent(i, r.Parent) || depth[r.Parent] != r.Depth-1 {
				t.Fatalf("node %d: parent %d is not a neighbour one level up", i, r.Parent)
			}
		}
		if !slices.IsSorted(r.Sources) || !slices.IsSorted(r.Children) {
			t.Fatalf("node %d: unsorted sources %v or children %v", i, r.Sources, r.Children)
		}
		for _, s := range r.Sources {
			if !g.Adjacent(i, s) {
				t.Fatalf("node %d: source %d is not a neighbour", i, s)
			}
			if slices.Compare(roles[s].Rank, r.Rank) >= 0 {
				t.Fatalf("node %d (rank %v): source %d has rank %v, not smaller", i, r.Rank, s, roles[s].Rank)
			}
			childSet[[2]int{s, i}] = true
		}
		for _, j := range g.Neighbors(i) {
			if depth[j] == r.Depth-1 && !slices.Contains(r.Sources, j) {
				t.Fatalf("node %d: neighbour %d one level up is not a source", i, j)
			}
		}
	}
	count := 0
	for i, r := range roles {
		for _, c := range r.Children {
			if !childSet[[2]int{i, c}] {
				t.Fatalf("node %d lists child %d that does not list it as a source", i, c)
			}
			count++
		}
	}
	if count != len(childSet) {
		t.Fatalf("children count %d, sources count %d", count, len(childSet))
	}
}

func bfs(g *Graph, ref int) []int {
	d := make([]int, g.N())
	for i := range d {
		d[i] = -1
	}
	d[ref] = 0
	q := []int{ref}
	for len(q) > 0 {
		i := q[0]
		q = q[1:]
		for _, j := range g.Neighbors(i) {
			if d[j] < 0 {
				d[j] = d[i] + 1
				q = append(q, j)
			}
		}
	}
	return d
}

// mustGraph returns a function taking a constructor's two results, so that
// mustGraph(t)(Ring(5)) fails the test on an error.
func mustGraph(t testing.TB) func(*Graph, error) *Graph {
	return func(g *Graph, err error) *Graph {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
}

// TestJezequel53ClassicalTopologies checks the roles of section 5.3's
// topologies (and Liao's star) node by node on small instances.
func TestJezequel53ClassicalTopologies(t *testing.T) {
	star5 := func() (*Graph, error) { return Star(5) }
	tree7 := func() (*Graph, error) { return Tree(7, 2) }
	ring6 := func() (*Graph, error) { return Ring(6) }
	ring5 := func() (*Graph, error) { return Ring(5) }
	cube3 := func() (*Graph, error) { return Hypercube(3) }
	mesh4 := func() (*Graph, error) { return FullMesh(4) }
	tests := []struct {
		name    string
		build   func() (*Graph, error)
		ref     int
		sources [][]int // per node
		depth   []int
	}{
		{"star of 5 around 0", star5, 0,
			[][]int{{}, {0}, {0}, {0}, {0}}, []int{0, 1, 1, 1, 1}},
		{"star of 5 from a leaf", star5, 2,
			// Leaves 1, 3, 4 are at depth 2 with no same-depth edge.
			[][]int{{2}, {0}, {}, {0}, {0}}, []int{1, 2, 0, 2, 2}},
		{"binary tree of 7", tree7, 0,
			[][]int{{}, {0}, {0}, {1}, {1}, {2}, {2}}, []int{0, 1, 1, 2, 2, 2, 2}},
		{"even ring of 6: no same-depth edge", ring6, 0,
			[][]int{{}, {0}, {1}, {2, 4}, {5}, {0}}, []int{0, 1, 2, 3, 2, 1}},
		{"odd ring of 5: the two farthest nodes are neighbours", ring5, 0,
			// Nodes 2 and 3 are both at depth 2 and adjacent: 2 is the
			// sub-reference, so 3 follows 4 (one level up) and 2.
			[][]int{{}, {0}, {1}, {2, 4}, {0}}, []int{0, 1, 2, 2, 1}},
		{"hypercube of dimension 3", cube3, 0,
			[][]int{{}, {0}, {0}, {1, 2}, {0}, {1, 4}, {2, 4}, {3, 5, 6}}, []int{0, 1, 1, 2, 1, 2, 2, 3}},
		{"full mesh of 4 is a chain of sub-references", mesh4, 0,
			[][]int{{}, {0}, {0, 1}, {0, 1, 2}}, []int{0, 1, 1, 1}},
		{"full mesh of 4 from node 2", mesh4, 2,
			[][]int{{2}, {0, 2}, {}, {0, 1, 2}}, []int{1, 1, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGraph(t)(tt.build())
			roles, err := Roles(g, tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			checkRoles(t, g, tt.ref, roles)
			for i, want := range tt.sources {
				if !slices.Equal(roles[i].Sources, want) && !(len(want) == 0 && len(roles[i].Sources) == 0) {
					t.Errorf("node %d: sources %v, want %v", i, roles[i].Sources, want)
				}
				if roles[i].Depth != tt.depth[i] {
					t.Errorf("node %d: depth %d, want %d", i, roles[i].Depth, tt.depth[i])
				}
			}
		})
	}
}

// TestJezequel53OddRingFarthestPair: for every odd ring, exactly the two
// nodes at distance (n-1)/2 are same-depth neighbours, and only the higher
// one gets a same-depth source.
func TestJezequel53OddRingFarthestPair(t *testing.T) {
	for _, n := range []int{3, 5, 7, 9, 101} {
		g := mustGraph(t)(Ring(n))
		roles, err := Roles(g, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkRoles(t, g, 0, roles)
		a, b := (n-1)/2, (n+1)/2
		if roles[a].Depth != roles[b].Depth || roles[a].Depth != (n-1)/2 {
			t.Fatalf("ring %d: farthest nodes %d,%d depths %d,%d", n, a, b, roles[a].Depth, roles[b].Depth)
		}
		if !slices.Contains(roles[b].Sources, a) || slices.Contains(roles[a].Sources, b) {
			t.Fatalf("ring %d: node %d sources %v, node %d sources %v", n, b, roles[b].Sources, a, roles[a].Sources)
		}
		for i, r := range roles {
			extra := 0
			for _, s := range r.Sources {
				if roles[s].Depth == r.Depth {
					extra++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[i == b]; extra != want {
				t.Fatalf("ring %d node %d: %d same-depth sources, want %d", n, i, extra, want)
			}
		}
	}
}

// TestJezequel53HypercubeNoSameDepthEdges: in a hypercube a node at distance
// p has no neighbour at distance p, so every node follows exactly its
// popcount(i xor ref) neighbours one level up and no recursion happens.
func TestJezequel53HypercubeNoSameDepthEdges(t *testing.T) {
	for dim := 0; dim <= 10; dim++ {
		g := mustGraph(t)(Hypercube(dim))
		ref := (1 << dim) / 3
		roles, err := Roles(g, ref)
		if err != nil {
			t.Fatal(err)
		}
		checkRoles(t, g, ref, roles)
		for i, r := range roles {
			p := bits.OnesCount(uint(i ^ ref))
			if r.Depth != p || len(r.Sources) != p || len(r.Rank) != 1 {
				t.Fatalf("dim %d node %d: depth %d sources %v rank %v, want %d sources and no recursion",
					dim, i, r.Depth, r.Sources, r.Rank, p)
			}
		}
	}
}

func TestFullMeshChain(t *testing.T) {
	g := mustGraph(t)(FullMesh(30))
	roles, err := Roles(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkRoles(t, g, 0, roles)
	for k, r := range roles {
		want := make([]int, k)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(r.Sources, want) && k > 0 {
			t.Fatalf("node %d: sources %v, want %v", k, r.Sources, want)
		}
	}
}

func TestConstructorsShape(t *testing.T) {
	tests := []struct {
		name  string
		build func() (*Graph, error)
		n     int
		edges int
	}{
		{"star 1", func() (*Graph, error) { return Star(1) }, 1, 0},
		{"star 10", func() (*Graph, error) { return Star(10) }, 10, 9},
		{"tree 10 fanout 3", func() (*Graph, error) { return Tree(10, 3) }, 10, 9},
		{"tree 10 fanout 1 is a line", func() (*Graph, error) { return Tree(10, 1) }, 10, 9},
		{"ring 1", func() (*Graph, error) { return Ring(1) }, 1, 0},
		{"ring 2", func() (*Graph, error) { return Ring(2) }, 2, 1},
		{"ring 3", func() (*Graph, error) { return Ring(3) }, 3, 3},
		{"ring 8", func() (*Graph, error) { return Ring(8) }, 8, 8},
		{"hypercube 0", func() (*Graph, error) { return Hypercube(0) }, 1, 0},
		{"hypercube 4", func() (*Graph, error) { return Hypercube(4) }, 16, 32},
		{"hypercube n=32", func() (*Graph, error) { return HypercubeN(32) }, 32, 80},
		{"full mesh 6", func() (*Graph, error) { return FullMesh(6) }, 6, 15},
		{"edges with duplicates", func() (*Graph, error) { return FromEdges(3, [][2]int{{0, 1}, {1, 0}, {1, 2}}) }, 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGraph(t)(tt.build())
			if g.N() != tt.n || len(g.Edges()) != tt.edges {
				t.Fatalf("n=%d edges=%d, want n=%d edges=%d", g.N(), len(g.Edges()), tt.n, tt.edges)
			}
			for i := range g.N() {
				roles, err := Roles(g, i)
				if err != nil {
					t.Fatal(err)
				}
				checkRoles(t, g, i, roles)
			}
		})
	}
}

func TestInvalidInput(t *testing.T) {
	g3 := mustGraph(t)(Ring(3))
	tests := []struct {
		name string
		run  func() error
		want string // must appear in the message
	}{
		{"star 0", func() error { _, err := Star(0); return err }, "node count 0"},
		{"tree negative", func() error { _, err := Tree(-1, 2); return err }, "node count -1"},
		{"tree fanout 0", func() error { _, err := Tree(5, 0); return err }, "fanout 0"},
		{"ring huge", func() error { _, err := Ring(MaxNodes + 1); return err }, "node count"},
		{"hypercube negative", func() error { _, err := Hypercube(-1); return err }, "dimension -1"},
		{"hypercube too big", func() error { _, err := Hypercube(40); return err }, "dimension 40"},
		{"hypercube n=12", func() error { _, err := HypercubeN(12); return err }, "12 is not a power of two"},
		{"edges endpoint", func() error { _, err := FromEdges(3, [][2]int{{0, 1}, {1, 3}}); return err }, "edge 1 (1-3): node 3"},
		{"edges negative", func() error { _, err := FromEdges(3, [][2]int{{-2, 1}}); return err }, "node -2"},
		{"edges self loop", func() error { _, err := FromEdges(3, [][2]int{{0, 1}, {2, 2}}); return err }, "self loop on node 2"},
		{"edges disconnected", func() error { _, err := FromEdges(4, [][2]int{{0, 1}, {2, 3}}); return err }, "node 2 is not connected"},
		{"roles ref out of range", func() error { _, err := Roles(g3, 3); return err }, "reference 3"},
		{"roles nil graph", func() error { _, err := Roles(nil, 0); return err }, "empty graph"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q: want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
}

// TestRolesDisconnectedGraph: a Graph assembled by hand (not through
// FromEdges) that is disconnected is rejected, naming the node.
func TestRolesDisconnectedGraph(t *testing.T) {
	g := &Graph{adj: [][]int{{1}, {0}, {}}}
	_, err := Roles(g, 0)
	if err == nil || !strings.Contains(err.Error(), "node 2 is not connected") {
		t.Fatalf("got %v", err)
	}
}

// TestLargeTree10k: the 10,000-node tree of the simulator's largest runs,
// plus a grid with many same-depth edges, satisfy every invariant.
func TestLargeTree10k(t *testing.T) {
	g := mustGraph(t)(Tree(10000, 4))
	roles, err := Roles(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkRoles(t, g, 0, roles)
	var edges [][2]int
	const w = 60
	for i := range w * w {
		if i%w+1 < w {
			edges = append(edges, [2]int{i, i + 1})
		}
		if i+w < w*w {
			edges = append(edges, [2]int{i, i + w})
		}
		if i%w+1 < w && i+w < w*w { // diagonals create same-depth edges
			edges = append(edges, [2]int{i + 1, i + w})
		}
	}
	grid := mustGraph(t)(FromEdges(w*w, edges))
	for _, ref := range []int{0, w*w/2 + 7} {
		roles, err := Roles(grid, ref)
		if err != nil {
			t.Fatal(err)
		}
		checkRoles(t, grid, ref, roles)
	}
}

func BenchmarkRolesTree10k(b *testing.B) {
	g := mustGraph(b)(Tree(10000, 4))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Roles(g, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRolesHypercube8192(b *testing.B) {
	g := mustGraph(b)(Hypercube(13))
	for b.Loop() {
		if _, err := Roles(g, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRolesFullMesh200(b *testing.B) {
	g := mustGraph(b)(FullMesh(200))
	for b.Loop() {
		if _, err := Roles(g, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzFromEdges decodes bytes as an edge list (pairs of bytes modulo n) and
// checks that FromEdges and Roles never panic and that any graph accepted
// yields roles satisfying every invariant.
func FuzzFromEdges(f *testing.F) {
	f.Add(uint8(5), uint8(0), []byte{0, 1, 1, 2, 2, 3, 3, 4, 4, 0})
	f.Add(uint8(4), uint8(2), []byte{0, 1, 0, 2, 0, 3, 1, 2, 1, 3, 2, 3})
	f.Add(uint8(3), uint8(1), []byte{0, 0})
	f.Add(uint8(0), uint8(0), []byte{})
	f.Fuzz(func(t *testing.T, n, ref uint8, data []byte) {
		nn := int(n % 40)
		var edges [][2]int
		for k := 0; k+1 < len(data); k += 2 {
			// Allow out-of-range endpoints sometimes to exercise validation.
			edges = append(edges, [2]int{int(data[k]) % (nn + 2), int(data[k+1]) % (nn + 2)})
		}
		g, err := FromEdges(nn, edges)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		r := int(ref) % nn
		roles, err := Roles(g, r)
		if err != nil {
			t.Fatalf("connected graph rejected: %v", err)
		}
		checkRoles(t, g, r, roles)
	})
}
