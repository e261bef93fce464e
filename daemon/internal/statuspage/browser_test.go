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
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/daemon/internal/statuspage"
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
// series' colour (#1f77b4) and of the second's (#d62728, key id+"2"): the
// lines are drawn, not only the axes.
const seriesPixels = `(() => {
  const out = {};
  const near = (d, i, rgb) => Math.abs(d[i] - rgb[0]) < 40 && Math.abs(d[i + 1] - rgb[1]) < 40 && Math.abs(d[i + 2] - rgb[2]) < 40 && d[i + 3] > 100;
  for (const id of ["offset", "drift", "width", "periods"]) {
    const c = document.querySelector("#chart-" + id + " canvas");
    if (!c) { out[id] = -1; out[id + "2"] = -1; continue; }
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0, n2 = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (near(d, i, [31, 119, 180])) n++;
      if (near(d, i, [214, 39, 40])) n2++;
    }
    out[id] = n; out[id + "2"] = n2;
  }
  return out;
})()`

// pageState is what the test reads of the page.
type pageState struct {
	Updates int            `json:"updates"`
	Summary string         `json:"summary"`
	Cells   []string       `json:"cells"`
	Pixels  map[string]int `json:"pixels"`
	Cluster string         `json:"cluster"` // the "all nodes" link
}

func readPage(ctx context.Context) (pageState, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[pageState](`({
	  updates: Number(document.body.dataset.updates),
	  cluster: (document.getElementById("cluster-link") || {}).href || "",
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
	checkPageIn(t, ctx, pl, []string{origin}, url, 1, ready)
}

// checkPageIn is checkPage in a running browser, for pages that draw
// series series per chart (1 or 2) and load from the origins.
func checkPageIn(t *testing.T, ctx context.Context, pl *pageLog, origins []string, url string, series int, ready func(pageState) bool) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("loading %s: %v", url, err)
	}
	drawn := func(s pageState) bool {
		for _, id := range []string{"offset", "drift", "width", "periods"} {
			if s.Pixels[id] < 30 || (series > 1 && s.Pixels[id+"2"] < 30) {
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
		if !slices.ContainsFunc(origins, func(o string) bool { return strings.HasPrefix(u, o+"/") }) {
			t.Errorf("the page requested %s: not from the daemons (%s)", u, origins)
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

// madeUp is a node whose values change at every sample.
func madeUp(node uint32) statuspage.Source {
	var i int
	var mu sync.Mutex
	return func() statuspage.Sample {
		mu.Lock()
		defer mu.Unlock()
		i++
		x := float64(i) + 2*float64(node) // each node its own curve
		p := float64(node)                // the source's period: doubles for 5 samples in 10
		if i%10 >= 5 {
			p *= 2
		}
		return statuspage.Sample{Node: node, Reference: 1, Status: "synced",
			OffsetNs: 1_795_600_000_000_000_000 + int64(i)*int64(500*node) + int64(300*math.Sin(x)),
			WidthNs:  int64(2000*node) + int64(1000*math.Cos(x/3)), DriftPPM: 5*float64(node) + math.Sin(x/5),
			LastOffsetNs: int64(100 * math.Sin(x)), RMSOffsetNs: 80,
			Periods: []statuspage.Period{{Name: "self", Seconds: 0.5 * float64(node)}, {Name: "source 1", Seconds: p}}}
	}
}

// TestPageInBrowser: the page over a made-up node whose values change at
// every sample, polled four times a second.
func TestPageInBrowser(t *testing.T) {
	h := statuspage.NewHistory(madeUp(2), 150*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	srv := httptest.NewServer(statuspage.Handler(h))
	defer srv.Close()
	checkPage(t, srv.URL, srv.URL+"/status?every=250", func(s pageState) bool {
		return len(s.Cells) > 1 && s.Cells[1] == "synced"
	})
}

// TestClusterPageInBrowser: a daemon's page links to the view of its
// cluster, which draws both nodes on each chart.
func TestClusterPageInBrowser(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var srvs []*httptest.Server
	var hs []*statuspage.History
	for _, node := range []uint32{2, 3} {
		h := statuspage.NewHistory(madeUp(node), 150*time.Millisecond)
		go h.Run(ctx)
		srv := httptest.NewServer(statuspage.Handler(h))
		defer srv.Close()
		srvs, hs = append(srvs, srv), append(hs, h)
	}
	peers := []statuspage.PeerPage{{Node: 2, URL: srvs[0].URL}, {Node: 3, URL: srvs[1].URL}}
	for _, h := range hs {
		h.SetPeers(peers)
	}
	bctx, pl := browser(t)
	origins := []string{srvs[0].URL, srvs[1].URL}
	if err := chromedp.Do(bctx, chromedp.Navigate(srvs[0].URL+"/status?every=250")); err != nil {
		t.Fatal(err)
	}
	s := waitFor(t, bctx, 20*time.Second, "the link to all nodes", func(s pageState) bool { return s.Cluster != "" })
	checkPageIn(t, bctx, pl, origins, s.Cluster+"&every=250", 2, func(s pageState) bool {
		rows := strings.Join(s.Cells, "|")
		return strings.HasPrefix(rows, "node 2|synced|") && strings.Contains(rows, "|node 3|synced|")
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
