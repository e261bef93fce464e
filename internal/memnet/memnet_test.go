package memnet

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"
)

func addr(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port)
}

func listen(t *testing.T, n *Network, port uint16) *Conn {
	t.Helper()
	c, err := n.Listen(addr(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDelay: a datagram arrives, from the sender's address, exactly Delay
// later on the bubble's clock, with Jitter adding at most Jitter.
func TestDelay(t *testing.T) {
	for _, jitter := range []time.Duration{0, 30 * time.Microsecond} {
		synctest.Test(t, func(t *testing.T) {
			n := New(1)
			n.SetLink(Link{Delay: 50 * time.Microsecond, Jitter: jitter})
			a, b := listen(t, n, 1), listen(t, n, 2)
			for range 20 {
				start := time.Now()
				if err := a.WriteTo([]byte("hello"), b.Addr()); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 16)
				k, from, err := b.ReadFrom(buf)
				took := time.Since(start)
				if err != nil || string(buf[:k]) != "hello" || from != a.Addr() {
					t.Fatalf("ReadFrom = %q from %v, %v", buf[:k], from, err)
				}
				if took < 50*time.Microsecond || took > 50*time.Microsecond+max(jitter-1, 0) {
					t.Errorf("jitter %v: delivered after %v, want in [50us, 50us+jitter)", jitter, took)
				}
			}
		})
	}
}

// TestLossAndDup: the fractions lost and duplicated follow Loss and Dup
// (seeded, so the counts are exact), and Drop decides first.
func TestLossAndDup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(3)
		n.SetLink(Link{Loss: 0.2, Dup: 0.3, Delay: time.Millisecond,
			Drop: func(b []byte) bool { return b[0] == 'x' }})
		a, b := listen(t, n, 1), listen(t, n, 2)
		const sent = 2000
		for range sent {
			a.WriteTo([]byte("d"), b.Addr())
		}
		a.WriteTo([]byte("x"), b.Addr())
		synctest.Wait()
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		s := n.Stats()
		if s.Sent != sent+1 {
			t.Errorf("Sent %d, want %d", s.Sent, sent+1)
		}
		lost := float64(s.Lost-1) / sent
		dup := float64(s.Duplicated) / float64(sent-(s.Lost-1))
		if lost < 0.17 || lost > 0.23 || dup < 0.27 || dup > 0.33 {
			t.Errorf("lost %.3f duplicated %.3f, want about 0.2 and 0.3 (%+v)", lost, dup, s)
		}
		if got, want := len(b.in), sent-(s.Lost-1)+s.Duplicated; got != want {
			t.Errorf("%d datagrams queued, want %d", got, want)
		}
		for len(b.in) > 0 {
			if d := <-b.in; d.b[0] != 'd' {
				t.Fatalf("dropped datagram %q delivered", d.b)
			}
		}
	})
}

// TestCloseAndRebind: Close unblocks a reader with net.ErrClosed, makes
// writes fail, frees the address for another Listen, and datagrams in
// flight to the closed connection are not delivered to it.
func TestCloseAndRebind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(1)
		n.SetLink(Link{Delay: time.Millisecond})
		a, b := listen(t, n, 1), listen(t, n, 2)
		if _, err := n.Listen(b.Addr()); err == nil {
			t.Fatal("second Listen on a bound address succeeded")
		}
		errc := make(chan error, 1)
		go func() {
			_, _, err := b.ReadFrom(make([]byte, 8))
			errc <- err
		}()
		a.WriteTo([]byte("late"), b.Addr())
		synctest.Wait()
		b.Close()
		if err := <-errc; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("ReadFrom after Close: %v, want net.ErrClosed", err)
		}
		if err := b.WriteTo([]byte("x"), a.Addr()); !errors.Is(err, net.ErrClosed) {
			t.Errorf("WriteTo after Close: %v, want net.ErrClosed", err)
		}
		b2 := listen(t, n, 2)
		time.Sleep(2 * time.Millisecond) // "late" lands: on the closed conn, not b2
		a.WriteTo([]byte("new"), b2.Addr())
		buf := make([]byte, 8)
		k, _, err := b2.ReadFrom(buf)
		if err != nil || string(buf[:k]) != "new" {
			t.Errorf("rebound conn read %q, %v, want \"new\"", buf[:k], err)
		}
	})
}

// TestNobodyListens: like UDP, a write to an unbound address succeeds and
// the datagram is gone; Deliver there is a no-op.
func TestNobodyListens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(1)
		a := listen(t, n, 1)
		if err := a.WriteTo([]byte("x"), addr(9)); err != nil {
			t.Errorf("WriteTo an unbound address: %v", err)
		}
		n.Deliver([]byte("x"), a.Addr(), addr(9))
		if s := n.Stats(); s.Sent != 1 || s.Lost != 0 {
			t.Errorf("stats %+v, want one sent, none counted lost", s)
		}
	})
}

// TestDeliverSpoofs: Deliver hands the datagram over at once with the
// claimed source address.
func TestDeliverSpoofs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(1)
		n.SetLink(Link{Delay: time.Second})
		b := listen(t, n, 2)
		n.Deliver([]byte("forged"), addr(7), b.Addr())
		buf := make([]byte, 8)
		start := time.Now()
		k, from, err := b.ReadFrom(buf)
		if err != nil || string(buf[:k]) != "forged" || from != addr(7) || time.Since(start) != 0 {
			t.Errorf("read %q from %v after %v (%v), want \"forged\" from %v at once", buf[:k], from, time.Since(start), err, addr(7))
		}
	})
}
