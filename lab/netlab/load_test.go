package netlab

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gclock/gclock/netmodel"
)

// loadgenEnv makes the test binary run `gclock lab loadgen ARGS` instead of
// the tests, so StartCross and StartFlood need no gclock binary.
const loadgenEnv = "GCLAB_TEST_LOADGEN"

func TestMain(m *testing.M) {
	if os.Getenv(loadgenEnv) == "1" {
		os.Exit(runTestLoadGen(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func runTestLoadGen(args []string) int {
	if len(args) < 2 || args[0] != "lab" || args[1] != "loadgen" {
		os.Stderr.WriteString("test loadgen: want lab loadgen ...\n")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := LoadGenMain(ctx, args[2:], os.Stderr); err != nil {
		os.Stderr.WriteString("test loadgen: " + err.Error() + "\n")
		return 1
	}
	return 0
}

// TestLabLoad runs the lab's loads briefly: the cross traffic keeps every
// switch port busy its share of the time (on 100 Mbit/s ports, so that the
// flows need little CPU and reach their share on a loaded machine too) and
// small frames queue behind it; the flood and the busy loops outside start,
// run and stop with the lab.
func TestLabLoad(t *testing.T) {
	needLab(t)
	cfg := DefaultConfig()
	cfg.Hosts, cfg.RunDir, cfg.SchedFIFO, cfg.Concurrent = 3, t.TempDir(), true, true
	cfg.Link = netmodel.Link{Forward: netmodel.Model{Delay: 50 * time.Microsecond}, Reverse: netmodel.Model{Delay: 50 * time.Microsecond}}
	cfg.PortRate = 100e6
	l, err := Up(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	defer l.Down()
	// Causality with the port model: no probe arrives before the link's
	// 50 us and its own serialisation on an idle 100 Mbit/s port (a
	// frame of at least 60 bytes: 84 byte times, 6.72 us).
	vc := ValidateConfig{A: 0, B: 1, Probes: 300, Interval: time.Millisecond, Port: 47006}
	rs, err := l.Validate(context.Background(), vc)
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	floor := int64(50e3) + netmodel.SerialisationNs(netmodel.WireBytes(netmodel.MinFrame), cfg.PortRate)
	for _, r := range rs {
		if r.MinNs < floor {
			t.Errorf("h%d>h%d: min one-way delay %d ns, below the link's 50 us and the port's serialisation (%d ns)", r.From, r.To, r.MinNs, floor)
		}
	}
	cmd, env := []string{os.Args[0]}, []string{loadgenEnv + "=1"}
	const share = 0.3
	stopCross, err := l.StartCross(cmd, env, share, 20*time.Second)
	if err != nil {
		t.Fatalf("StartCross: %v", err)
	}
	stopFlood, err := l.StartFlood(context.Background(), cmd, env, 2000, 20*time.Second)
	if err != nil {
		t.Fatalf("StartFlood: %v", err)
	}
	stopOutside, err := l.StartLoadOutside(1)
	if err != nil {
		t.Fatalf("StartLoadOutside: %v", err)
	}
	time.Sleep(2 * time.Second) // connections up, flows at their rate
	l.Switch().ResetStats()
	time.Sleep(4 * time.Second)
	ports := l.Switch().PortStats()
	dirs := l.Switch().Stats()
	stopOutside()
	stopFlood()
	stopCross()
	if len(ports) != cfg.Hosts {
		t.Fatalf("%d ports' stats, want %d", len(ports), cfg.Hosts)
	}
	for _, p := range ports {
		t.Logf("port %d: utilisation %.3f (%d frames)", p.Port, p.Util, p.Frames)
		// The flow into the port at its share on the wire, plus the ACKs of
		// the host's own flow (about 2% more).
		if p.Util < 0.75*share || p.Util > 1.2*share {
			t.Errorf("port %d: utilisation %.3f, want %.2f (%d frames, %d wire bytes in %v)", p.Port, p.Util, share, p.Frames, p.WireBytes, time.Duration(p.ElapsedNs))
		}
		if p.RateBps != cfg.PortRate {
			t.Errorf("port %d: rate %d, want %d", p.Port, p.RateBps, cfg.PortRate)
		}
	}
	// ACKs and other small frames sometimes meet the bulk data of the port
	// they leave by and wait behind it.
	var waited int64
	for _, d := range dirs {
		waited = max(waited, d.SmallQueueMaxNs)
	}
	if waited == 0 {
		t.Errorf("no small frame waited behind the cross traffic: %+v", dirs)
	}
	b, err := os.ReadFile(filepath.Join(cfg.RunDir, "flood.log"))
	if err != nil {
		t.Fatalf("flood log: %v", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 || f[0] != "flood:" {
		t.Fatalf("flood log %q: want flood: N frames", b)
	}
	if n, err := strconv.Atoi(f[1]); err != nil || n < 2000 {
		t.Errorf("flood wrote %q frames in 6 s at 2000/s, want at least 2000", f[1])
	}
}
