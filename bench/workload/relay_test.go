package workload

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRelayConfig(t *testing.T) {
	target := netip.MustParseAddrPort("127.0.0.1:9")
	tests := []struct {
		cfg  RelayConfig
		want string
	}{
		{RelayConfig{Listen: "127.0.0.1:0", Target: target, Loss: 1}, "Loss"},
		{RelayConfig{Listen: "127.0.0.1:0", Target: target, Loss: -0.1}, "Loss"},
		{RelayConfig{Listen: "127.0.0.1:0", Target: target, Dup: 1.5}, "Dup"},
		{RelayConfig{Listen: "127.0.0.1:0"}, "Target"},
		{RelayConfig{Listen: "nonsense:port", Target: target}, "Listen"},
	}
	for _, tt := range tests {
		if _, err := NewRelay(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want one naming %s", tt.cfg, err, tt.want)
		}
	}
}

// TestRelayDuplicates: with Dup set, every datagram that is not lost
// arrives once or twice, both ways, and the counts add up.
func TestRelayDuplicates(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r, err := NewRelay(RelayConfig{Listen: "127.0.0.1:0", Target: srv.LocalAddr().(*net.UDPAddr).AddrPort(), Loss: 0.2, Dup: 0.3, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	cli, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const n = 200
	got := 0
	buf := make([]byte, 64)
	for i := range n {
		if _, err := cli.WriteToUDPAddrPort([]byte{byte(i)}, r.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	srv.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	for {
		k, from, err := srv.ReadFromUDPAddrPort(buf)
		if err != nil {
			break
		}
		got++
		srv.WriteToUDPAddrPort(buf[:k], from) // echo back through the relay
	}
	back := 0
	cli.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	for {
		if _, _, err := cli.ReadFromUDPAddrPort(buf); err != nil {
			break
		}
		back++
	}
	cancel()
	wg.Wait()
	s := r.Stats()
	if got == 0 || back == 0 || s.Dropped == 0 || s.Duplicated == 0 {
		t.Fatalf("server got %d, client got %d, relay %+v", got, back, s)
	}
	if uint64(got+back) != s.Forwarded {
		t.Errorf("received %d+%d datagrams, relay forwarded %d", got, back, s.Forwarded)
	}
	if want := uint64(n + got); s.Forwarded+s.Dropped != want+s.Duplicated {
		t.Errorf("forwarded %d + dropped %d != offered %d + duplicated %d", s.Forwarded, s.Dropped, want, s.Duplicated)
	}
}
