package daemon

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/transport"
)

// memLink is the in-memory network's link for daemon tests: about a
// loopback's one-way delay, with jitter so that no two exchanges are alike.
var memLink = memnet.Link{Delay: 5 * time.Microsecond, Jitter: 2 * time.Microsecond}

// fakeRaw is the raw clock inside a testing/synctest bubble: the bubble's
// fake time, which starts at 2000-01-01 UTC and moves only when every
// goroutine in the bubble is blocked.
func fakeRaw() int64 { return time.Now().UnixNano() }

// fakeSys runs a daemon on the in-memory network with the bubble's fake
// time as its raw clock: no kernel, so no kernel timestamps. Call it inside
// synctest.Test, on a network made there.
func fakeSys(n *memnet.Network) sys {
	return sys{
		raw: fakeRaw,
		listen: func(a netip.AddrPort, _ transport.UDPOptions) (transport.PacketConn, error) {
			c, err := n.Listen(a)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
	}
}

// memCluster configures n daemons for the in-memory network, node i+1 at
// 10.0.0.1:i+1, without kernel timestamps.
func memCluster(t *testing.T, n int) []Config {
	var addrs []string
	for i := range n {
		addrs = append(addrs, fmt.Sprintf("10.0.0.1:%d", i+1))
	}
	cfgs := clusterAt(t, addrs)
	for i := range cfgs {
		cfgs[i].Transport.KernelTimestamps = false
	}
	return cfgs
}
