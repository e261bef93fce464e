package tracegen

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/gclock/gclock/trace/format"
)

func gen(t *testing.T, cfg Config) ([][]byte, Truth) {
	t.Helper()
	bufs := make([]*bytes.Buffer, cfg.Procs)
	truth, err := Generate(cfg, func(p int) (io.Writer, error) {
		bufs[p] = &bytes.Buffer{}
		return bufs[p], nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, cfg.Procs)
	for i := range bufs {
		out[i] = bufs[i].Bytes()
	}
	return out, truth
}

func small() Config {
	c := DefaultConfig()
	c.Procs, c.Duration = 4, 200*time.Millisecond
	return c
}

func TestDeterministic(t *testing.T) {
	a, ta := gen(t, small())
	b, tb := gen(t, small())
	for i := range a {
		if !bytes.Equal(a[i], b[i]) || len(ta[uint32(i)]) != len(tb[uint32(i)]) {
			t.Fatalf("process %d differs between two runs with one seed", i)
		}
	}
	c := small()
	c.Seed = 2
	d, _ := gen(t, c)
	if bytes.Equal(a[1], d[1]) {
		t.Fatal("seed ignored")
	}
}

func TestFilesMatchTruth(t *testing.T) {
	cfg := small()
	files, truth := gen(t, cfg)
	for p, f := range files {
		s, err := format.Summarize(bytes.NewReader(f), "p", false)
		if err != nil {
			t.Fatal(err)
		}
		if s.Events != int64(len(truth[uint32(p)])) || s.Events == 0 {
			t.Fatalf("process %d: %d events, %d truths", p, s.Events, len(truth[uint32(p)]))
		}
		wantSessions := cfg.Sessions
		if p == 0 || p == cfg.Procs-1 { // reference; synced host
			wantSessions = 0
		}
		if len(s.Sessions) != wantSessions {
			t.Errorf("process %d: %d sessions, want %d", p, len(s.Sessions), wantSessions)
		}
		for _, ss := range s.Sessions {
			if len(ss.Samples) != cfg.SyncMessages {
				t.Errorf("process %d: session with %d exchanges", p, len(ss.Samples))
			}
		}
		if p == cfg.Procs-1 && (s.Meta.Flags&format.FlagSyncedHost == 0 || s.Meta.Host != uint32(p-1)) {
			t.Errorf("synced host meta %+v", s.Meta)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"one process", func(c *Config) { c.Procs = 1 }},
		{"one session", func(c *Config) { c.Sessions = 1 }},
		{"no duration", func(c *Config) { c.Duration = 0 }},
		{"no latency", func(c *Config) { c.LatencyMin = 0 }},
		{"probability", func(c *Config) { c.SendProb = 2 }},
		{"too short", func(c *Config) { c.Duration = time.Millisecond }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := small()
			tc.mod(&c)
			if _, err := Generate(c, func(int) (io.Writer, error) { return io.Discard, nil }, nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
