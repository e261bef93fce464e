package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gclock/gclock/daemon/internal/clockbound"
	"golang.org/x/sys/unix"
)

// cbClient is a ClockBound client written from clock-bound's
// docs/PROTOCOL.md (shared memory protocol version 2), not from gclock's
// writer: it maps the file read-only and reads it as ClockBound's own
// reader does.
type cbClient struct{ mem []byte }

// cbSegment is the decoded segment.
type cbSegment struct {
	Magic             [8]byte
	SegSize           uint32
	Version, Gen      uint16
	AsOf, VoidAfter   int64 // ns, CLOCK_MONOTONIC_COARSE
	Bound             int64 // ns
	Disruption        uint64
	MaxDriftPPB       uint32
	Status            int32
	DisruptionSupport uint8
}

var errCBBusy = errors.New("segment being written (generation odd or moving)")

func openCBClient(t *testing.T, path string) *cbClient {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 80, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return &cbClient{mem: mem}
}

// generation is the u16 at offset 14, read atomically with the version.
func (c *cbClient) generation() uint16 {
	return uint16(atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.mem[12]))) >> 16)
}

// read takes a consistent copy: generation even and unchanged across the
// copy, else retry (at most tries times). during runs between the first
// generation read and the copy (a test's writer). It returns the copy and
// the attempts made.
func (c *cbClient) read(tries int, during func(attempt int)) (cbSegment, int, error) {
	for a := 1; a <= tries; a++ {
		g1 := c.generation()
		if g1%2 == 1 {
			continue
		}
		if during != nil {
			during(a)
		}
		var buf [80]byte
		copy(buf[:], c.mem)
		if g2 := c.generation(); g2 != g1 {
			continue
		}
		le := binary.LittleEndian
		s := cbSegment{SegSize: le.Uint32(buf[8:]), Version: le.Uint16(buf[12:]), Gen: le.Uint16(buf[14:]),
			AsOf:      int64(le.Uint64(buf[16:]))*1e9 + int64(le.Uint64(buf[24:])),
			VoidAfter: int64(le.Uint64(buf[32:]))*1e9 + int64(le.Uint64(buf[40:])),
			Bound:     int64(le.Uint64(buf[48:])), Disruption: le.Uint64(buf[56:]),
			MaxDriftPPB: le.Uint32(buf[64:]), Status: int32(le.Uint32(buf[68:])), DisruptionSupport: buf[72]}
		copy(s.Magic[:], buf[:8])
		return s, a, nil
	}
	return cbSegment{}, tries, errCBBusy
}

// boundAt is ClockBound's client computation: the bound at CLOCK_MONOTONIC_COARSE
// instant now, or an error once void or not synchronised.
func (s cbSegment) boundAt(now int64) (int64, error) {
	switch {
	case s.Magic != [8]byte{0x41, 0x4D, 0x5A, 0x4E, 0x43, 0x42, 0x02, 0x00} || s.Version != 2 || s.SegSize < 80:
		return 0, fmt.Errorf("not a ClockBound v2 segment: %x v%d size %d", s.Magic, s.Version, s.SegSize)
	case now > s.VoidAfter:
		return 0, fmt.Errorf("void: now %d after void-after %d", now, s.VoidAfter)
	case s.Status != 1:
		return 0, fmt.Errorf("clock status %d, not synchronized", s.Status)
	}
	return s.Bound + int64(math.Ceil(float64(max(now-s.AsOf, 0))*float64(s.MaxDriftPPB)/1e9)), nil
}

func coarseNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts)
	return ts.Nano()
}

// TestClockBoundSegment: the writer's segment read by the protocol's
// client: layout, generations (odd while written, even after, never 0
// after the roll-over), a torn read retried, the void-after expiry.
func TestClockBoundSegment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shm0")
	w, err := clockbound.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if fi, _ := os.Stat(path); fi.Size() != 80 || fi.Mode().Perm() != 0o644 {
		t.Fatalf("segment file: size %d mode %v, want 80 and 0644", fi.Size(), fi.Mode().Perm())
	}
	c := openCBClient(t, path)
	s, _, err := c.read(10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.boundAt(coarseNow()); err == nil {
		t.Errorf("a fresh segment gave a bound: %+v", s)
	}
	now := coarseNow()
	b1 := clockbound.Bound{AsOf: now, VoidAfter: now + int64(150*time.Millisecond), BoundNs: 12345, MaxDriftPPB: 600_000, Status: clockbound.StatusSynchronized}
	w.Write(b1)
	s, _, err = c.read(10, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := cbSegment{Magic: [8]byte{0x41, 0x4D, 0x5A, 0x4E, 0x43, 0x42, 0x02, 0x00}, SegSize: 80, Version: 2, Gen: 2,
		AsOf: b1.AsOf, VoidAfter: b1.VoidAfter, Bound: 12345, MaxDriftPPB: 600_000, Status: 1}
	if s != want {
		t.Errorf("segment\n%+v, want\n%+v", s, want)
	}
	bound, err := s.boundAt(now + int64(100*time.Millisecond))
	if err != nil || bound != 12345+60_000 {
		t.Errorf("bound 100 ms later: %d, %v; want 12345 + 100 ms x 600 ppm = 72345", bound, err)
	}

	// Torn: the writer updates between the client's first generation read
	// and its copy; the client retries and takes the new update.
	b2 := b1
	b2.BoundNs = 999
	s, attempts, err := c.read(10, func(a int) {
		if a == 1 {
			w.Write(b2)
		}
	})
	if err != nil || attempts != 2 || s.Bound != 999 || s.Gen != 4 {
		t.Errorf("torn read: %+v after %d attempts, %v; want bound 999, generation 4, 2 attempts", s, attempts, err)
	}
	// A writer stopped mid-update (odd generation): no copy is taken.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var old [2]byte
	f.ReadAt(old[:], 14)
	f.WriteAt([]byte{5, 0}, 14)
	if s, _, err := c.read(100, nil); !errors.Is(err, errCBBusy) {
		t.Errorf("odd generation: read %+v, %v; want busy", s, err)
	}
	f.WriteAt(old[:], 14)
	f.Close()

	// Void-after: a bound unused after it.
	s, _, _ = c.read(10, nil)
	for coarseNow() <= s.VoidAfter {
		time.Sleep(10 * time.Millisecond)
	}
	if b, err := s.boundAt(coarseNow()); err == nil {
		t.Errorf("a bound past its void-after: %d", b)
	}

	// Generations: even after each update, 0 never again.
	for i := range 70_000 {
		w.Write(b1)
		g := c.generation()
		if g%2 == 1 || g == 0 {
			t.Fatalf("update %d: generation %d after the write", i, g)
		}
	}
}

// TestClockBoundSample: the bound covers |CLOCK_REALTIME - true| for any
// CLOCK_REALTIME, not only one that agrees with gclock's UTC.
func TestClockBoundSample(t *testing.T) {
	tests := []struct {
		name                string
		r1, e, l, r2, bound int64
	}{
		{"agrees", 1000, 990, 1010, 1000, 10},
		{"read takes 4 ns", 998, 990, 1010, 1002, 12},
		{"realtime 100 ahead", 1100, 990, 1010, 1100, 110},
		{"realtime 100 behind", 900, 990, 1010, 900, 110},
		{"unsynced", 1000, math.MinInt64, math.MaxInt64, 1000, math.MaxInt64},
	}
	for _, tt := range tests {
		if b := clockBoundSample(tt.r1, tt.e, tt.l, tt.r2); b != tt.bound {
			t.Errorf("%s: bound %d, want %d", tt.name, b, tt.bound)
		}
	}
}

// TestClockBoundConfig: the key, its validation, errors naming the field.
func TestClockBoundConfig(t *testing.T) {
	base := rtCluster(t, RealTimeReference)[0]
	tests := []struct {
		name  string
		set   func(*Config)
		field string
	}{
		{"on", func(c *Config) { c.ClockBound.ShmPath = "/run/gclock/clockbound" }, ""},
		{"relative", func(c *Config) { c.ClockBound.ShmPath = "clockbound" }, "clockbound.shm_path"},
		{"without UTC", func(c *Config) { c.ClockBound.ShmPath = "/run/x"; c.RealTime.Mode = RealTimeNone }, "clockbound.shm_path"},
		{"without page", func(c *Config) { c.ClockBound.ShmPath = "/run/x"; c.GlobalTime.ShmPath = "" }, "clockbound.shm_path"},
		{"every", func(c *Config) { c.ClockBound.ShmPath = "/run/x"; c.ClockBound.Every = Duration(time.Millisecond) }, "clockbound.every"},
		{"void before the next update", func(c *Config) { c.ClockBound.ShmPath = "/run/x"; c.ClockBound.VoidAfter = c.ClockBound.Every }, "clockbound.void_after"},
	}
	for _, tt := range tests {
		c := base
		tt.set(&c)
		err := c.Validate()
		var fe *FieldError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
			t.Errorf("%s: %v, want an error naming %s", tt.name, err, tt.field)
		}
	}
	if _, err := Parse([]byte("clockbound: {shm_path: /run/gclock/cb, nosuchkey: 1}\n")); err == nil {
		t.Error("an unknown key under clockbound: accepted")
	}
}

// TestClockBoundDaemon: a reference serving UTC writes the segment; the
// protocol's client reads a synchronised bound that covers CLOCK_REALTIME
// against the served interval, and status unknown once the daemon stops.
func TestClockBoundDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a daemon for a few seconds")
	}
	cfg := rtCluster(t, RealTimeReference)[0]
	cfg.Peers = cfg.Peers[:1]
	cfg.Reference.Order = []uint32{1}
	cfg.ClockBound = ClockBoundConfig{ShmPath: filepath.Join(t.TempDir(), "shm0"), Every: Duration(50 * time.Millisecond), VoidAfter: Duration(time.Second)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		<-done
	}()
	var s cbSegment
	var bound int64
	deadline := time.Now().Add(20 * time.Second)
	for {
		time.Sleep(50 * time.Millisecond)
		if _, err := os.Stat(cfg.ClockBound.ShmPath); err != nil {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			continue
		}
		c := openCBClient(t, cfg.ClockBound.ShmPath)
		var err error
		if s, _, err = c.read(100, nil); err == nil {
			bound, err = s.boundAt(coarseNow())
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no synchronised bound in 20 s: %v (%+v)", err, s)
		}
	}
	// upstream none on the reference: served UTC is CLOCK_REALTIME itself,
	// so the bound is the served half-width and the read's span.
	if bound <= 0 || bound > int64(5*time.Millisecond) {
		t.Errorf("bound %d ns, want (0, 5 ms] for a reference serving its own CLOCK_REALTIME", bound)
	}
	if want := uint32((cfg.RealTime.MaxSlewPPM + clockBoundOscPPM) * 1000); s.MaxDriftPPB != want {
		t.Errorf("max drift %d ppb, want %d", s.MaxDriftPPB, want)
	}
	if d := s.VoidAfter - s.AsOf; d != int64(time.Second) {
		t.Errorf("void-after - as-of = %v, want clockbound.void_after 1s", time.Duration(d))
	}
	if age := coarseNow() - s.AsOf; age < 0 || age > int64(time.Second) {
		t.Errorf("as-of %v from now on CLOCK_MONOTONIC_COARSE", time.Duration(age))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	c := openCBClient(t, cfg.ClockBound.ShmPath)
	if s, _, err := c.read(10, nil); err != nil || s.Status != 0 {
		t.Errorf("after the daemon stopped: status %d, %v; want 0 (unknown)", s.Status, err)
	}
}
