package statuspage_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/daemon/statuspage"
)

// browser starts headless Chromium (Debian's chromium; ci/deps.sh installs
// it) and returns a context to drive it, and the log of what the page did:
// every URL requested and every script error.
func browser(t *testing.T) (context.Context, *pageLog) {
	t.Helper()
	var exe string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Skip("no chromium in PATH (ci/deps.sh installs Debian's chromium): the status page is not loaded in a browser")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1280, 1000))
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	pl := &pageLog{}
	err := chromedp.Listen(bctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			pl.add(&pl.errors, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledType("error") {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value))
				}
				pl.add(&pl.errors, "console.error "+strings.Join(args, " "))
			}
		case *network.EventRequestWillBeSent:
			pl.add(&pl.urls, e.Request.URL)
		}
	})
	if err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("%s: network.enable: %v", exe, err)
	}
	return bctx, pl
}

type pageLog struct {
	mu           sync.Mutex
	urls, errors []string
}

func (p *pageLog) add(to *[]string, s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	*to = append(*to, s)
}

func (p *pageLog) get() (urls, errors []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.urls...), append([]string(nil), p.errors...)
}

// seriesPixels counts, in each chart's canvas, the pixels of the first
// series' colour (#1f77b4): the line is drawn, not only the axes.
const seriesPixels = `(() => {
  const out = {};
  for (const id of ["offset", "drift", "width", "periods"]) {
    const c = document.querySelector("#chart-" + id + " canvas");
    if (!c) { out[id] = -1; continue; }
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4)
      if (Math.abs(d[i] - 31) < 40 && Math.abs(d[i + 1] - 119) < 40 && Math.abs(d[i + 2] - 180) < 40 && d[i + 3] > 100) n++;
    out[id] = n;
  }
  return out;
})()`

// pageState is what the test reads of the page.
type pageState struct {
	Updates int            `json:"updates"`
	Summary string         `json:"summary"`
	Cells   []string       `json:"cells"`
	Pixels  map[string]int `json:"pixels"`
}

func readPage(ctx context.Context) (pageState, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[pageState](`({
	  updates: Number(document.body.dataset.updates),
	  summary: document.getElementById("summary").textContent,
	  cells: Array.from(document.querySelectorAll("#values tbody td")).map(td => td.textContent),
	  pixels: `+seriesPixels+`,
	})`))
}

// waitFor polls the page until ok says so or the time runs out.
func waitFor(t *testing.T, ctx context.Context, d time.Duration, what string, ok func(pageState) bool) pageState {
	t.Helper()
	end := time.Now().Add(d)
	for {
		s, err := readPage(ctx)
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		if ok(s) {
			return s
		}
		if time.Now().After(end) {
			t.Fatalf("after %v: %s: page %+v", d, what, s)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkPage loads url in Chromium and checks that the page loads from
// origin only, without script errors, that the four charts draw their
// first series, and that the values update.
func checkPage(t *testing.T, origin, url string, ready func(pageState) bool) {
	ctx, pl := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("loading %s: %v", url, err)
	}
	drawn := func(s pageState) bool {
		for _, id := range []string{"offset", "drift", "width", "periods"} {
			if s.Pixels[id] < 30 {
				return false
			}
		}
		return ready(s)
	}
	first := waitFor(t, ctx, 20*time.Second, "the four charts drawn", drawn)
	// The values update: later polls, a newer sample, other values.
	second := waitFor(t, ctx, 10*time.Second, "three more updates", func(s pageState) bool { return s.Updates >= first.Updates+3 })
	if second.Summary == first.Summary {
		t.Errorf("the summary did not change over %d updates: %q", second.Updates-first.Updates, second.Summary)
	}
	if strings.Join(second.Cells, "|") == strings.Join(first.Cells, "|") {
		t.Errorf("the values did not change over %d updates: %q", second.Updates-first.Updates, second.Cells)
	}
	if !drawn(second) {
		t.Errorf("charts no longer drawn: %+v", second.Pixels)
	}
	urls, errs := readLog(pl)
	for _, e := range errs {
		t.Errorf("page error: %s", e)
	}
	for _, u := range urls {
		if !strings.HasPrefix(u, origin) {
			t.Errorf("the page requested %s: not from the daemon (%s)", u, origin)
		}
	}
	t.Logf("first %+v\nlater %+v\n%d requests", first, second, len(urls))
	if os.Getenv("GCLOCK_SCREENSHOT") != "" {
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			p := filepath.Join(os.Getenv("GCLOCK_SCREENSHOT"), strings.ReplaceAll(t.Name(), "/", "_")+".png")
			os.WriteFile(p, png, 0o644)
			t.Logf("screenshot %s", p)
		}
	}
}

func readLog(pl *pageLog) ([]string, []string) { return pl.get() }

// TestPageInBrowser: the page over a made-up node whose values change at
// every sample, polled four times a second.
func TestPageInBrowser(t *testing.T) {
	var i int
	var mu sync.Mutex
	src := func() statuspage.Sample {
		mu.Lock()
		defer mu.Unlock()
		i++
		x := float64(i)
		p := 2.0
		if i%10 >= 5 {
			p = 4
		}
		return statuspage.Sample{Node: 2, Reference: 1, Status: "synced",
			OffsetNs: 1_795_600_000_000_000_000 + int64(i)*1500 + int64(300*math.Sin(x)),
			WidthNs:  4000 + int64(1000*math.Cos(x/3)), DriftPPM: 12.5 + math.Sin(x/5),
			LastOffsetNs: int64(100 * math.Sin(x)), RMSOffsetNs: 80,
			Periods: []statuspage.Period{{Name: "self", Seconds: 1}, {Name: "source 1", Seconds: p}}}
	}
	h := statuspage.NewHistory(src, 150*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	srv := httptest.NewServer(statuspage.Handler(h))
	defer srv.Close()
	checkPage(t, srv.URL, srv.URL+"/status?every=250", func(s pageState) bool {
		return len(s.Cells) > 1 && s.Cells[1] == "synced"
	})
}

// TestDaemonPageInBrowser: a real daemon's page (node 2 of two on
// loopback), until it says synced.
func TestDaemonPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two daemons")
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("no chromium in PATH (ci/deps.sh installs Debian's chromium)")
	}
	udp := freePorts(t, "udp4", 2)
	tcp := freePorts(t, "tcp4", 1)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	for id := 1; id <= 2; id++ {
		c := daemon.DefaultConfig()
		c.Node.ID = uint32(id)
		c.Peers = []daemon.Peer{{ID: 1, Address: fmt.Sprintf("127.0.0.1:%d", udp[0])}, {ID: 2, Address: fmt.Sprintf("127.0.0.1:%d", udp[1])}}
		c.Reference.Order = []uint32{1}
		c.Sync.InitialGlobalPeriod = daemon.Duration(200 * time.Millisecond)
		c.Sync.MinGlobalPeriod = daemon.Duration(100 * time.Millisecond)
		c.GlobalTime.ShmPath = filepath.Join(dir, "page"+strconv.Itoa(id))
		if id == 2 {
			c.Metrics.Listen = "127.0.0.1:" + strconv.Itoa(tcp[0])
		}
		go func() { errs <- daemon.Run(ctx, c, slog.New(slog.DiscardHandler)) }()
	}
	defer func() {
		cancel()
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("daemon: %v", err)
			}
		}
	}()
	origin := "http://127.0.0.1:" + strconv.Itoa(tcp[0])
	checkPage(t, origin, origin+"/status?every=500", func(s pageState) bool {
		return len(s.Cells) > 2 && s.Cells[0] == "node 2" && s.Cells[1] == "synced" && s.Cells[2] == "node 1"
	})
}

func freePorts(t *testing.T, network string, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		var port int
		if strings.HasPrefix(network, "udp") {
			c, err := net.ListenPacket(network, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port = c.LocalAddr().(*net.UDPAddr).Port
			defer c.Close()
		} else {
			l, err := net.Listen(network, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port = l.Addr().(*net.TCPAddr).Port
			defer l.Close()
		}
		ports = append(ports, port)
	}
	return ports
}
