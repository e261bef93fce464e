package daemon

import (
	"net"
	"net/netip"
	"strings"
)

// A daemon without a key trusts every datagram that carries a peer's
// source address: on loopback only local processes can send those, off
// loopback anyone on the path can (issue 17: a slow ramp of forged rounds
// moved a node 108 us in 70 s while it said synced). So a cluster with a
// peer off loopback needs auth.key_file, or says auth.insecure: true.

// validateKeyless refuses a config without a key whose peers are not all
// on loopback, unless auth.insecure is set, and a key with insecure set.
func (c *Config) validateKeyless(e *errs) {
	a := c.Auth
	if a.KeyFile != "" {
		if a.Insecure {
			e.add("auth.insecure", "true, but auth.key_file is set: drop one (insecure means no key)")
		}
		return
	}
	if a.Insecure {
		return
	}
	for i, p := range c.Peers {
		if !onLoopback(p.Address) {
			e.add("auth.key_file", "empty, and peers[%d] %q is off loopback: anyone who can send UDP from a peer's address could move "+
				"this cluster's time. Make a key once (gclock keygen -id 1 > cluster.key; chmod 600 cluster.key), copy it to every host, "+
				"and set auth: {key_file: /etc/gclock/cluster.key, key_id: 1}; or, on a private network or in a test, set auth: {insecure: true}",
				i, p.Address)
			return
		}
	}
}

// onLoopback says whether a host:port is on the loopback interface: a
// loopback IP (127.0.0.0/8, ::1) or the name localhost. Any other name is
// taken to be off loopback.
func onLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
