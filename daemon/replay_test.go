package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/wire"
	"github.com/gclock/gclock/wire/keyfile"
)

// Issue 17's insider cases end to end: daemons on internal/memnet in a
// testing/synctest bubble, an attacker on the same network that sees every
// datagram and, with the key, seals its own.

// capturer keeps the datagrams one node sent to another, as an attacker
// on the path would (memnet.Link.Drop sees every datagram).
type capturer struct {
	mu      sync.Mutex
	keyed   bool
	from    uint32
	to      uint32
	got     [][]byte
	stopped bool
}

// link returns memLink with the capture hook.
func (c *capturer) link() memnet.Link {
	l := memLink
	l.Drop = func(b []byte) bool {
		if c.match(b) {
			c.mu.Lock()
			if !c.stopped {
				c.got = append(c.got, append([]byte(nil), b...))
			}
			c.mu.Unlock()
		}
		return false
	}
	return l
}

// match reports whether b is from c.from and meant for c.to: the sealed
// destination with a key, the engine message's To without one.
func (c *capturer) match(b []byte) bool {
	if len(b) < wire.HeaderLen || binary.BigEndian.Uint32(b[4:]) != c.from {
		return false
	}
	pkt := b
	if c.keyed {
		if len(b) < wire.HeaderLen+wire.AuthLen {
			return false
		}
		pkt = b[:len(b)-wire.AuthLen]
		if binary.BigEndian.Uint32(b[len(b)-wire.AuthLen+4:]) != c.to {
			return false
		}
	}
	var p wire.Packet
	if p.UnmarshalBinary(pkt) != nil {
		return false
	}
	if c.keyed {
		return true // the sealed destination matched
	}
	return p.Op.Kind() <= wire.OpPeriodChange && uint32(p.Msg.To) == c.to
}

// stop ends the capture and returns what it holds.
func (c *capturer) stop() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	return c.got
}

// daemons starts and stops run() goroutines in a bubble.
type daemons struct {
	t       *testing.T
	sys     sys
	log     *slog.Logger
	errs    chan error
	running int
}

func (d *daemons) start(ctx context.Context, c Config) {
	d.running++
	go func() { d.errs <- run(ctx, c, d.log.With("node", c.Node.ID), d.sys) }()
}

// wait waits for one daemon to return.
func (d *daemons) wait() error { d.running--; return <-d.errs }

// stopAll cancels (through cancel) and waits for every daemon left: a
// bubble must end with no goroutine left.
func (d *daemons) stopAll(cancel func()) {
	cancel()
	for d.running > 0 {
		d.wait()
	}
}

// TestRunReplaysToOthersKeepNoDeadReferenceAlive: the reference (node 1)
// dies; an attacker replays to node 3, every 100 ms, the last datagrams
// node 1 sent to node 2. Node 3 must take them for no sign of node 1's
// life and follow the new reference within failover_after and a status
// query. On main (one counter for every destination, liveness from any
// message of the reference) they were fresh to node 3 and kept node 1
// "alive": failover took 84 and 100 s in the lab instead of 6.
func TestRunReplaysToOthersKeepNoDeadReferenceAlive(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		name := map[bool]string{true: "key", false: "no key"}[keyed]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cp := &capturer{keyed: keyed, from: 1, to: 2}
				mn := memnet.New(1)
				mn.SetLink(cp.link())
				cfgs := memCluster(t, 3)
				for i := range cfgs {
					cfgs[i].Reference.Order = []uint32{1, 2, 3}
					cfgs[i].Reference.FailoverAfter = Duration(400 * time.Millisecond)
					cfgs[i].Sync.ProbeTimeout = Duration(20 * time.Millisecond)
				}
				if keyed {
					clusterKey(t, cfgs)
				}
				ctx, cancel := context.WithCancel(context.Background())
				d := &daemons{t: t, sys: fakeSys(mn, nil), log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), errs: make(chan error, 4)}
				defer d.stopAll(cancel)
				ctx1, stop1 := context.WithCancel(ctx)
				d.start(ctx1, cfgs[0])
				d.start(ctx, cfgs[1])
				d.start(ctx, cfgs[2])
				deadline := time.Now().Add(30 * time.Second)
				read := func(r *gtime.Reader) (gtime.Time, error) { return r.At(fakeRaw()) }
				for i := 1; i < 3; i++ {
					waitPageSyncedBy(t, read, openPage(t, cfgs[i].GlobalTime.ShmPath, i+1, deadline), i+1, deadline)
				}
				time.Sleep(3 * time.Second)
				addr := func(i int) netip.AddrPort { return netip.MustParseAddrPort(cfgs[i].Peers[i].Address) }
				stop1()
				if err := d.wait(); err != nil {
					t.Fatalf("node 1: %v", err)
				}
				stopped := fakeRaw()
				captured := cp.stop()
				if len(captured) < 20 {
					t.Fatalf("captured %d datagrams from node 1 to node 2", len(captured))
				}
				captured = captured[max(0, len(captured)-60):]
				replayCtx, stopReplay := context.WithCancel(ctx)
				var replayer sync.WaitGroup
				replayer.Go(func() {
					for _, b := range captured {
						if replayCtx.Err() != nil {
							return
						}
						mn.Deliver(b, addr(0), addr(2))
						time.Sleep(100 * time.Millisecond)
					}
				})
				defer replayer.Wait()
				defer stopReplay()
				// Node 3's page names its reference.
				r3 := openPage(t, cfgs[2].GlobalTime.ShmPath, 3, deadline)
				for {
					in, err := r3.Info()
					if err == nil && in.Reference != 1 && in.Reference != 0 {
						break
					}
					if fakeRaw()-stopped > int64(4*time.Second) {
						t.Fatalf("node 3 still follows the dead node 1 %v after it stopped (replays of its datagrams to node 2)", time.Duration(fakeRaw()-stopped))
					}
					time.Sleep(20 * time.Millisecond)
				}
				took := fakeRaw() - stopped
				t.Logf("node 3 left node 1 %v after it stopped", time.Duration(took))
				if after := int64(cfgs[2].Reference.FailoverAfter); took > after+handoverMargin {
					t.Errorf("node 3 left node 1 %d ms after it stopped, want at most failover_after %d ms + %d ms", took/1e6, after/1e6, handoverMargin/1e6)
				}
			})
		})
	}
}

// TestRunInsiderProbe is the first insider case: a probe sealed
// with the cluster key as node 1 (the reference), auth sequence 2^63, sent
// to node 2. Node 2 must go on hearing node 1 and keep it as its
// reference. On main it dropped every later datagram of node 1 as a
// replay and took over after failover_after: two references.
func TestRunInsiderProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := memnet.New(2)
		mn.SetLink(memLink)
		var metrics fakeMetrics
		cfgs := memCluster(t, 2)
		for i := range cfgs {
			cfgs[i].Reference.Order = []uint32{1, 2}
			cfgs[i].Reference.FailoverAfter = Duration(400 * time.Millisecond)
			cfgs[i].Sync.ProbeTimeout = Duration(20 * time.Millisecond)
		}
		cfgs[1].Metrics.Listen = "10.0.0.2:9100"
		kr := clusterKey(t, cfgs)
		r2, read, stop := startSyncedPair(t, mn, &metrics, cfgs)
		defer stop()

		p := wire.Packet{Op: wire.OpProbe, Sender: 1, Seq: 12345}
		p.Msg.Type, p.Msg.From, p.Msg.To, p.Msg.Round, p.Msg.Seq = 1, 1, 2, 1, 1
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		a1, a2 := netip.MustParseAddrPort(cfgs[0].Peers[0].Address), netip.MustParseAddrPort(cfgs[1].Peers[1].Address)
		mn.Deliver(kr.Seal(b, 2, 1<<63), a1, a2)
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			in, err := r2.Info()
			if err != nil {
				t.Fatal(err)
			}
			if in.Reference != 1 {
				t.Fatalf("node 2 took reference %d after the forged probe", in.Reference)
			}
			if tm, err := read(r2); err != nil || tm.Status != gtime.StatusSynced {
				t.Fatalf("node 2 %v after the forged probe (%v)", tm.Status, err)
			}
		}
		drops := dropsOf(t, metrics.get(t, cfgs[1].Metrics.Listen, "/metrics"))
		if drops["seq_jump"] != 1 {
			t.Errorf("seq_jump drops %v, want 1 (%v)", drops["seq_jump"], drops)
		}
	})
}

// TestRunRestartReplays is the restart case: node 2 restarts
// (with its state file) while node 1 is down, and an attacker replays
// every datagram node 1 had sent it. On main they were accepted (30 of
// 30) and node 2 said synced 0.33 s later on 30-s-old data. Now node 2
// accepts none (node 1 never answers its challenge) and stays stale.
func TestRunRestartReplays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := &capturer{keyed: true, from: 1, to: 2}
		mn := memnet.New(3)
		mn.SetLink(cp.link())
		var metrics fakeMetrics
		cfgs := memCluster(t, 2)
		clusterKey(t, cfgs)
		c2 := &cfgs[1]
		c2.State = StateConfig{File: filepath.Join(t.TempDir(), "gclock", "state.json"), SaveEvery: Duration(200 * time.Millisecond)}
		c2.Metrics.Listen = "10.0.0.2:9100"
		ctx, cancel := context.WithCancel(context.Background())
		d := &daemons{t: t, sys: fakeSys(mn, &metrics), log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), errs: make(chan error, 3)}
		defer d.stopAll(cancel)
		ctx1, stop1 := context.WithCancel(ctx)
		ctx2, stop2 := context.WithCancel(ctx)
		d.start(ctx1, cfgs[0])
		d.start(ctx2, *c2)
		deadline := time.Now().Add(20 * time.Second)
		read := func(r *gtime.Reader) (gtime.Time, error) { return r.At(fakeRaw()) }
		r := openPage(t, c2.GlobalTime.ShmPath, 2, deadline)
		waitPageSyncedBy(t, read, r, 2, deadline)
		time.Sleep(5 * time.Second)
		stop2()
		if err := d.wait(); err != nil {
			t.Fatalf("node 2: %v", err)
		}
		stop1()
		if err := d.wait(); err != nil {
			t.Fatalf("node 1: %v", err)
		}
		captured := cp.stop()
		if len(captured) < 20 {
			t.Fatalf("captured %d datagrams", len(captured))
		}
		time.Sleep(time.Second)
		d.start(ctx, *c2)
		restartAt := time.Now()
		a1, a2 := netip.MustParseAddrPort(cfgs[0].Peers[0].Address), netip.MustParseAddrPort(c2.Peers[1].Address)
		var replayer sync.WaitGroup
		replayer.Go(func() {
			for _, b := range captured {
				mn.Deliver(b, a1, a2)
				time.Sleep(10 * time.Millisecond)
			}
		})
		defer replayer.Wait()
		sawStale := false
		for time.Since(restartAt) < 5*time.Second {
			tm, err := r.At(fakeRaw())
			if err != nil {
				t.Fatal(err)
			}
			if tm.Status == gtime.StatusNoDaemon { // the old page, replaced by the restarted daemon's
				if nr, err := gtime.Open(c2.GlobalTime.ShmPath); err == nil {
					r.Close()
					r = nr
				}
				time.Sleep(time.Millisecond)
				continue
			}
			// Until the restarted daemon's first publish (its restored
			// state, stale, before its socket opens), the page holds the
			// previous run's last update.
			if tm.Status == gtime.StatusSynced && sawStale {
				t.Fatalf("%v after the restart: synced on replayed rounds (node 1 is down): %+v", time.Since(restartAt), tm)
			}
			sawStale = sawStale || tm.Status == gtime.StatusStale
			time.Sleep(10 * time.Millisecond)
		}
		r.Close()
		if !sawStale {
			t.Error("the restarted node never published its restored state (stale)")
		}
		drops := dropsOf(t, metrics.get(t, c2.Metrics.Listen, "/metrics"))
		if drops["unverified"] == 0 {
			t.Errorf("no replay counted as unverified: %v", drops)
		}
	})
}

// TestRunLinkKeys: every node holds only its link keys (gclock keygen
// -links), no cluster key. The cluster syncs; a compromised node 3, with
// every key it holds, seals a probe as node 1 (the reference) to node 2:
// node 2 drops it (bad_tag). With one cluster key (main) any key holder
// could pose as any node.
func TestRunLinkKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := memnet.New(4)
		mn.SetLink(memLink)
		var metrics fakeMetrics
		cfgs := memCluster(t, 3)
		cfgs[1].Metrics.Listen = "10.0.0.2:9100"
		master := wire.Key{ID: 5, Secret: bytes.Repeat([]byte{0x5a}, wire.MinKeyLen)}
		dir := t.TempDir()
		ids := []uint32{1, 2, 3}
		var node3 *wire.Keyring
		for i := range cfgs {
			path := filepath.Join(dir, fmt.Sprintf("node%d.key", i+1))
			if err := os.WriteFile(path, []byte(keyfile.LinkLines(master, uint32(i+1), ids)), 0o600); err != nil {
				t.Fatal(err)
			}
			cfgs[i].Auth = AuthConfig{KeyFile: path, KeyID: 5}
			kr, err := cfgs[i].Auth.keyring()
			if err != nil {
				t.Fatal(err)
			}
			if i == 2 {
				node3 = kr
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		d := &daemons{t: t, sys: fakeSys(mn, &metrics), log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), errs: make(chan error, 3)}
		defer d.stopAll(cancel)
		for _, c := range cfgs {
			d.start(ctx, c)
		}
		deadline := time.Now().Add(20 * time.Second)
		read := func(r *gtime.Reader) (gtime.Time, error) { return r.At(fakeRaw()) }
		for i := 1; i < 3; i++ {
			waitPageSyncedBy(t, read, openPage(t, cfgs[i].GlobalTime.ShmPath, i+1, deadline), i+1, deadline)
		}
		before := dropsOf(t, metrics.get(t, cfgs[1].Metrics.Listen, "/metrics"))
		p := wire.Packet{Op: wire.OpProbe, Sender: 1, Seq: 12345}
		p.Msg.Type, p.Msg.From, p.Msg.To, p.Msg.Round, p.Msg.Seq = 1, 1, 2, 1, 1
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		a1, a2 := netip.MustParseAddrPort(cfgs[0].Peers[0].Address), netip.MustParseAddrPort(cfgs[1].Peers[1].Address)
		mn.Deliver(node3.Seal(b, 2, 1<<40), a1, a2)
		time.Sleep(100 * time.Millisecond)
		after := dropsOf(t, metrics.get(t, cfgs[1].Metrics.Listen, "/metrics"))
		if after["bad_tag"]-before["bad_tag"] != 1 {
			t.Errorf("node 3's forgery as node 1: bad_tag %v -> %v, want one more", before["bad_tag"], after["bad_tag"])
		}
	})
}

// startSyncedPair starts the two daemons of cfgs on mn, waits until node
// 2's page says synced and a second more, and returns node 2's page, the
// read of a page at the fake raw clock, and the stop of both daemons.
func startSyncedPair(t *testing.T, mn *memnet.Network, metrics *fakeMetrics, cfgs []Config) (*gtime.Reader, func(*gtime.Reader) (gtime.Time, error), func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemons{t: t, sys: fakeSys(mn, metrics), log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), errs: make(chan error, 2)}
	started := false
	defer func() {
		if !started { // a wait below failed the test: stop the daemons as the caller's defer would
			d.stopAll(cancel)
		}
	}()
	d.start(ctx, cfgs[0])
	d.start(ctx, cfgs[1])
	deadline := time.Now().Add(20 * time.Second)
	read := func(r *gtime.Reader) (gtime.Time, error) { return r.At(fakeRaw()) }
	r2 := openPage(t, cfgs[1].GlobalTime.ShmPath, 2, deadline)
	waitPageSyncedBy(t, read, r2, 2, deadline)
	time.Sleep(time.Second)
	started = true
	return r2, read, func() { d.stopAll(cancel) }
}
