package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/transport"
)

// Transport endpoints of the lab run in this process: their sockets are
// opened inside a host namespace (netlab.Lab.InHost) and then used from ordinary
// goroutines, so that a datagram from host 0 to host 1 crosses the veth
// pairs and the lab's switch, which applies the link model (loss,
// duplication, reordering, delay) to every Ethernet frame.

// EndpointPair is a client endpoint in host 0 and a server endpoint in host
// 1, both running until Close.
type EndpointPair struct {
	Client, Server *transport.Endpoint
	ServerAddr     netip.AddrPort
	cancel         context.CancelFunc
	done           chan error
}

// listenIn opens a UDP socket on host's address (an ephemeral port) inside
// host's namespace.
func (l *Lab) listenIn(host int) (*transport.UDPConn, error) {
	var c *transport.UDPConn
	err := l.InHost(host, func() error {
		var err error
		c, err = transport.ListenUDP(netip.AddrPortFrom(netlab.HostAddr(host), 0).String(), transport.UDPOptions{})
		return err
	})
	return c, err
}

// StartEndpoints starts a server endpoint with handler srv in host 1 and a
// client endpoint in host 0, both with the timeouts of base (Conn, ID and
// Handler are set here).
func (l *Lab) StartEndpoints(ctx context.Context, base transport.Config, srv transport.Handler) (*EndpointPair, error) {
	cc, err := l.listenIn(0)
	if err != nil {
		return nil, fmt.Errorf("lab: client socket in %s: %w", l.HostNS(0), err)
	}
	sc, err := l.listenIn(1)
	if err != nil {
		cc.Close()
		return nil, fmt.Errorf("lab: server socket in %s: %w", l.HostNS(1), err)
	}
	ccfg, scfg := base, base
	ccfg.ID, ccfg.Conn, ccfg.Handler = 1, cc, nil
	scfg.ID, scfg.Conn, scfg.Handler = 2, sc, srv
	client, err := transport.New(ccfg)
	if err != nil {
		cc.Close()
		sc.Close()
		return nil, fmt.Errorf("lab: client endpoint: %w", err)
	}
	server, err := transport.New(scfg)
	if err != nil {
		cc.Close()
		sc.Close()
		return nil, fmt.Errorf("lab: server endpoint: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &EndpointPair{Client: client, Server: server, ServerAddr: sc.LocalAddr(), cancel: cancel, done: make(chan error, 2)}
	go func() { p.done <- client.Run(ctx) }()
	go func() { p.done <- server.Run(ctx) }()
	return p, nil
}

// Close stops both endpoints (closing their sockets) and waits for them.
func (p *EndpointPair) Close() error {
	p.cancel()
	var errs []error
	for range 2 {
		if err := <-p.done; err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
