package topology

import (
	"errors"
	"testing"
)

func TestNamed(t *testing.T) {
	for _, tt := range []struct {
		kind      string
		n, fanout int
		edges     [][2]int
		edgeCount int // -1: refused
	}{
		{KindStar, 5, 0, nil, 4},
		{KindTree, 7, 2, nil, 6},
		{KindRing, 5, 0, nil, 5},
		{KindHypercube, 8, 0, nil, 12},
		{KindHypercube, 6, 0, nil, -1},
		{KindMesh, 4, 0, nil, 6},
		{KindExplicit, 3, 0, [][2]int{{0, 1}, {1, 2}}, 2},
		{KindExplicit, 3, 0, [][2]int{{0, 1}}, -1},
		{"torus", 4, 0, nil, -1},
	} {
		g, err := Named(tt.kind, tt.n, tt.fanout, tt.edges)
		switch {
		case tt.edgeCount < 0 && !errors.Is(err, ErrInvalid):
			t.Errorf("Named(%s, %d) = %v, want an error wrapping ErrInvalid", tt.kind, tt.n, err)
		case tt.edgeCount >= 0 && err != nil:
			t.Errorf("Named(%s, %d): %v", tt.kind, tt.n, err)
		case tt.edgeCount >= 0 && len(g.Edges()) != tt.edgeCount:
			t.Errorf("Named(%s, %d) has %d edges, want %d", tt.kind, tt.n, len(g.Edges()), tt.edgeCount)
		}
	}
	_, err := Named(KindExplicit, 4, 0, [][2]int{{0, 1}, {2, 3}})
	if ue, ok := errors.AsType[*UnreachableError](err); !ok || ue.Node != 2 {
		t.Errorf("disconnected: %v, want an *UnreachableError naming node 2", err)
	}
}
