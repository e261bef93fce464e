package daemoncmd

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gclock/gclock/daemon"
)

// AutoID returns the id of the one peer whose address is an address of
// this host (local), so that one config file serves every host: a
// Kubernetes DaemonSet or a fleet whose hosts are listed by address. lookup
// resolves a peer given by host name. It fails when no peer or more than
// one is on this host, naming them.
func AutoID(peers []daemon.Peer, local []netip.Addr, lookup func(host string) ([]netip.Addr, error)) (uint32, error) {
	var found []daemon.Peer
	for _, p := range peers {
		host, _, err := net.SplitHostPort(p.Address)
		if err != nil {
			return 0, fmt.Errorf("peer %d: address %q is not host:port", p.ID, p.Address)
		}
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(host); err == nil {
			addrs = []netip.Addr{a}
		} else if lookup != nil {
			if addrs, err = lookup(host); err != nil {
				return 0, fmt.Errorf("peer %d: cannot resolve %q: %v", p.ID, host, err)
			}
		}
		for _, a := range addrs {
			if slices.Contains(local, a.Unmap()) {
				found = append(found, p)
				break
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0].ID, nil
	case 0:
		var s []string
		for _, a := range local {
			s = append(s, a.String())
		}
		return 0, fmt.Errorf("no peer's address is one of this host's (%s): list this host among the peers, or give -id", strings.Join(s, ", "))
	default:
		var s []string
		for _, p := range found {
			s = append(s, fmt.Sprintf("%d (%s)", p.ID, p.Address))
		}
		return 0, fmt.Errorf("several peers are on this host: %s: give -id", strings.Join(s, ", "))
	}
}

// hostAddrs returns the addresses of this host's interfaces.
func hostAddrs() ([]netip.Addr, error) {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing this host's addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range ifAddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// lookupHost resolves a host name with a time limit.
func lookupHost(host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs, err
}
