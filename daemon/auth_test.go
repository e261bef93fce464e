package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
	"github.com/gclock/gclock/wire/keyfile"
)

// clusterKey writes a key file (mode 0600) for cfgs, sets their auth
// section and returns the keyring a tool holding the key would use.
func clusterKey(t *testing.T, cfgs []Config) *wire.Keyring {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.key")
	line, err := keyfile.NewLine(7)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("# test key\n"+line), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range cfgs {
		cfgs[i].Auth = AuthConfig{KeyFile: path, KeyID: 7}
	}
	kr, err := cfgs[0].Auth.keyring()
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// TestKeyFileRefused: the daemon refuses a key file others can read, a
// missing key id, and config mistakes, with the file and the reason.
func TestKeyFileRefused(t *testing.T) {
	dir := t.TempDir()
	line, _ := keyfile.NewLine(1)
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(line), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // WriteFile's mode passes through the umask
			t.Fatal(err)
		}
		return p
	}
	// The modes, owners and file kinds keyfile.Read refuses are its own
	// test's (wire/keyfile TestReadRefused); here, that the daemon's
	// keyring passes the refusal on, and its own checks.
	ok := write("ok.key", 0o600)
	bad := write("k644.key", 0o644)
	if _, err := (&AuthConfig{KeyFile: bad, KeyID: 1}).keyring(); !errors.Is(err, keyfile.ErrPerm) || !strings.Contains(err.Error(), bad) {
		t.Errorf("mode 0644: %v, want keyfile.ErrPerm naming the file", err)
	}
	if _, err := (&AuthConfig{KeyFile: ok, KeyID: 1}).keyring(); err != nil {
		t.Errorf("mode 0600 refused: %v", err)
	}
	if _, err := (&AuthConfig{KeyFile: ok, KeyID: 1, Accept: []uint32{2}}).keyring(); err == nil || !strings.Contains(err.Error(), "key id 2 is not in") {
		t.Errorf("accept of a missing key: %v", err)
	}
	for _, tt := range []struct {
		yaml, field string
	}{
		{"auth: {key_file: rel.key, key_id: 1}", "auth.key_file"},
		{"auth: {key_id: 1}", "auth.key_file"},
		{"auth: {key_file: /k, key_id: 1, accept: [2, 2]}", "auth.accept[1]"},
	} {
		_, err := Parse([]byte(tt.yaml))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || fe.Line != 1 {
			t.Errorf("%s: %v, want a FieldError on %s line 1", tt.yaml, err, tt.field)
		}
	}
}

// TestRunAuthenticated runs a two-node cluster with a key and checks that
// it syncs; that a status query without the key or with another key is
// dropped as bad_tag, one with the key but a peer's id from another
// address as unknown_sender (counted in gclock_packets_dropped_total),
// while the key holder is answered, with no more bytes than it sent.
//
// The daemons run on internal/memnet in a testing/synctest bubble; node 2's
// metrics are called as a handler (fakeMetrics), with no socket.
func TestRunAuthenticated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := memnet.New(1)
		mn.SetLink(memLink)
		var metrics fakeMetrics
		sys := fakeSys(mn, &metrics)
		cfgs := memCluster(t, 2)
		kr := clusterKey(t, cfgs)
		cfgs[1].Metrics.Listen = "10.0.0.2:9100"
		ctx, cancel := context.WithCancel(context.Background())
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		errs := make(chan error, len(cfgs))
		for _, c := range cfgs {
			go func() { errs <- run(ctx, c, logger.With("node", c.Node.ID), sys) }()
		}
		stopped := false
		defer func() { // a bubble must end with no goroutine left
			if !stopped {
				cancel()
				for range cfgs {
					<-errs
				}
			}
		}()
		read := func(r *gtime.Reader) (gtime.Time, error) { return r.At(fakeRaw()) }
		r := openPage(t, cfgs[1].GlobalTime.ShmPath, 2, time.Now().Add(10*time.Second))
		waitPageSyncedBy(t, read, r, 2, time.Now().Add(20*time.Second))
		scrape := func(t *testing.T) map[string]float64 {
			return dropsOf(t, metrics.get(t, cfgs[1].Metrics.Listen, "/metrics"))
		}

		addr := netip.MustParseAddrPort(cfgs[1].Peers[1].Address)
		other, _ := wire.NewKeyring(7, []wire.Key{{ID: 7, Secret: make([]byte, 32)}})
		cases := []struct {
			name   string
			id     uint32
			kr     *wire.Keyring
			answer bool
			reason string
		}{
			{"no key", 99, nil, false, transport.DropBadTag},
			{"another key", 99, other, false, transport.DropBadTag},
			{"cluster key, a peer's id from another address", 1, kr, false, transport.DropUnknownSender},
			{"cluster key", 99, kr, true, ""},
		}
		for i, tc := range cases {
			before := scrape(t)
			conn, err := mn.Listen(netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), uint16(i+1)))
			if err != nil {
				t.Fatal(err)
			}
			client := keyClient(t, ctx, conn, tc.id, tc.kr)
			_, err = queryStatus(ctx, client, tc.id, addr, 100*time.Millisecond)
			if (err == nil) != tc.answer {
				t.Errorf("%s: answered %v (%v)", tc.name, err == nil, err)
			}
			after := scrape(t)
			// The link loses nothing and fake time lets every copy
			// arrive before the scrape: each datagram the client sent
			// (the query and its retransmissions) is one drop.
			if sent := float64(client.Stats().Sent); tc.reason != "" && (sent == 0 || after[tc.reason]-before[tc.reason] != sent) {
				t.Errorf("%s: %s counted %v times for %v datagrams sent: %v -> %v", tc.name, tc.reason, after[tc.reason]-before[tc.reason], sent, before, after)
			}
			if cs := client.Stats(); tc.answer && cs.SentBytes/cs.Sent < uint64(wire.HeaderLen+wire.AuthLen+45) {
				t.Errorf("%s: query of %d bytes: the reply (45-byte body) would amplify it", tc.name, cs.SentBytes/cs.Sent)
			}
		}
		cancel()
		stopped = true
		for range cfgs {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

// keyClient is statusClient with any sender id.
func keyClient(t *testing.T, ctx context.Context, conn transport.PacketConn, id uint32, kr *wire.Keyring) *transport.Endpoint {
	t.Helper()
	c := transport.DefaultConfig()
	c.ID, c.Conn, c.Handler, c.Keyring = id, conn, noHandler{}, kr
	ep, err := transport.New(c)
	if err != nil {
		t.Fatal(err)
	}
	go ep.Run(ctx)
	return ep
}

// dropsOf is gclock_packets_dropped_total by reason in a daemon's metrics.
func dropsOf(t *testing.T, body string) map[string]float64 {
	t.Helper()
	drops := map[string]float64{}
	for line := range strings.SplitSeq(body, "\n") {
		rest, ok := strings.CutPrefix(line, "gclock_packets_dropped_total{")
		if !ok {
			continue
		}
		i := strings.Index(rest, `reason="`)
		j := strings.Index(rest, "} ")
		if i < 0 || j < 0 {
			t.Fatalf("unexpected line %q", line)
		}
		reason := rest[i+len(`reason="`):]
		reason = reason[:strings.IndexByte(reason, '"')]
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[j+1:]), 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		drops[reason] = v
	}
	if len(drops) != len(dropReasons) {
		t.Fatalf("drop reasons %v, want all of %v", drops, dropReasons)
	}
	return drops
}
