package daemoncmd

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/gclock/gclock/daemon"
)

func TestAutoID(t *testing.T) {
	peers := []daemon.Peer{{ID: 1, Address: "192.0.2.1:3190"}, {ID: 2, Address: "[2001:db8::2]:3190"}, {ID: 3, Address: "node3.example:3190"}}
	lookup := func(host string) ([]netip.Addr, error) {
		if host == "node3.example" {
			return []netip.Addr{netip.MustParseAddr("192.0.2.3")}, nil
		}
		return nil, errors.New("no such host")
	}
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name  string
		peers []daemon.Peer
		local []netip.Addr
		want  uint32
		err   string
	}{
		{"by IPv4", peers, []netip.Addr{a("127.0.0.1"), a("192.0.2.1")}, 1, ""},
		{"by IPv6", peers, []netip.Addr{a("::1"), a("2001:db8::2")}, 2, ""},
		{"by name", peers, []netip.Addr{a("192.0.2.3")}, 3, ""},
		{"none", peers, []netip.Addr{a("127.0.0.1")}, 0, "no peer's address is one of this host's (127.0.0.1)"},
		{"several", append(peers, daemon.Peer{ID: 4, Address: "192.0.2.1:3191"}), []netip.Addr{a("192.0.2.1")}, 0, "several peers are on this host: 1 (192.0.2.1:3190), 4 (192.0.2.1:3191)"},
		{"unresolvable", []daemon.Peer{{ID: 5, Address: "gone.example:3190"}}, nil, 0, `peer 5: cannot resolve "gone.example"`},
		{"bad address", []daemon.Peer{{ID: 6, Address: "nocolon"}}, nil, 0, `peer 6: address "nocolon" is not host:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AutoID(tc.peers, tc.local, lookup)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("AutoID = %d, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("AutoID = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
