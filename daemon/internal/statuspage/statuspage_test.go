package statuspage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		want string
	}{
		{0, "0.000000000 s"},
		{1, "0.000000001 s"},
		{-1_500_000_000, "-1.500000000 s"},
		{1_795_604_128_812_345_678, "1795604128.812345678 s"},
		{math.MinInt64, "-9223372036.854775808 s"},
	} {
		if got := seconds(tc.ns); got != tc.want {
			t.Errorf("seconds(%d) = %q, want %q", tc.ns, got, tc.want)
		}
	}
}

func TestHistory(t *testing.T) {
	h := NewHistory(nil, 0)
	if j := h.Snapshot(); j.Status != "starting" || len(j.T) != 0 {
		t.Fatalf("empty history: %+v", j)
	}
	t0 := time.Unix(1_795_600_000, 0)
	// Unsynced first: no values; then synced with an offset near 1.8e18 ns
	// (a UTC scale), which must stay exact.
	h.Add(t0, Sample{Node: 2, Reference: 1, Status: "unsynced"})
	const base = int64(1_795_600_000_123_456_789)
	for i := 1; i < Capacity+10; i++ {
		h.Add(t0.Add(time.Duration(i)*time.Second), Sample{Node: 2, Reference: 1, Status: "synced",
			OffsetNs: base + int64(i)*7, WidthNs: 2000 + int64(i), DriftPPM: 0.5,
			Periods: []Period{{"self", 1}, {"source 1", float64(i % 3)}}})
	}
	j := h.Snapshot()
	if len(j.T) != Capacity || len(j.OffsetChange) != Capacity || len(j.PeriodHist["self"]) != Capacity {
		t.Fatalf("%d times, %d offsets, %d periods; want %d", len(j.T), len(j.OffsetChange), len(j.PeriodHist["self"]), Capacity)
	}
	if want := t0.Add(10 * time.Second).UnixMilli(); j.T[0] != want {
		t.Errorf("oldest kept %d, want %d (the first 10 dropped)", j.T[0], want)
	}
	last := int64(Capacity + 9)
	if j.OffsetNs != base+last*7 || j.OffsetText != "1795600000.123461052 s" {
		t.Errorf("offset %d %q, want %d exactly", j.OffsetNs, j.OffsetText, base+last*7)
	}
	if j.OffsetOriginNs != base+10*7 || *j.OffsetChange[0] != 0 || math.Abs(*j.OffsetChange[Capacity-1]-float64((Capacity-1)*7)/1e3) > 1e-9 {
		t.Errorf("offset change: origin %d, first %v, last %v", j.OffsetOriginNs, *j.OffsetChange[0], *j.OffsetChange[Capacity-1])
	}
	if j.WidthNs != 2000+last || j.Periods["source 1"] != float64(last%3) {
		t.Errorf("latest values %+v", j)
	}
	// Unsynced samples are null in the series.
	h2 := NewHistory(nil, 0)
	h2.Add(t0, Sample{Status: "unsynced", Periods: []Period{{"self", 1}}})
	h2.Add(t0.Add(time.Second), Sample{Status: "synced", OffsetNs: 5000, WidthNs: 10})
	j2 := h2.Snapshot()
	if j2.OffsetChange[0] != nil || j2.Width[0] != nil || *j2.OffsetChange[1] != 0 || *j2.Width[1] != 0.01 {
		t.Errorf("unsynced then synced: offsets %v, widths %v", j2.OffsetChange, j2.Width)
	}
	if j2.PeriodHist["self"][1] != nil || *j2.PeriodHist["self"][0] != 1 {
		t.Errorf("a period missing from a sample must be null: %v", j2.PeriodHist["self"])
	}
}

func TestHandler(t *testing.T) {
	h := NewHistory(nil, 0)
	h.Add(time.Now(), Sample{Node: 3, Reference: 1, Status: "synced", WidthNs: 42})
	h.SetPeers([]PeerPage{{Node: 1, URL: "http://10.1.0.1:9190"}, {Node: 3, URL: "http://10.1.0.3:9190"}})
	srv := httptest.NewServer(Handler(h))
	defer srv.Close()
	get := func(path string) (*http.Response, string) {
		t.Helper()
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, body := get("/status")
	if res.StatusCode != 200 || !strings.Contains(body, `src="status/uPlot.iife.min.js"`) || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("/status: %d %s\n%s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	// Every resource the page loads is relative: served here, no CDN.
	for _, ref := range []string{"http://", "https://", "//"} {
		if strings.Contains(body, `src="`+ref) || strings.Contains(body, `href="`+ref) {
			t.Errorf("/status loads a resource from elsewhere (%s)", ref)
		}
	}
	for _, f := range []string{"uPlot.iife.min.js", "uPlot.min.css", "status.js", "uPlot.LICENSE"} {
		if res, body := get("/status/" + f); res.StatusCode != 200 || len(body) < 100 {
			t.Errorf("/status/%s: %d, %d bytes", f, res.StatusCode, len(body))
		}
	}
	res, body = get("/status.json")
	var j JSON
	if err := json.Unmarshal([]byte(body), &j); err != nil || j.Node != 3 || j.WidthNs != 42 || len(j.Peers) != 2 || j.Peers[1].URL != "http://10.1.0.3:9190" {
		t.Errorf("/status.json: %v %+v\n%s", err, j, body)
	}
	// No wildcard CORS (issue 17): only the cluster's other pages may read
	// /status.json from their origin; any other origin gets no grant.
	if v := res.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("/status.json without an Origin: Access-Control-Allow-Origin %q, want none", v)
	}
	for _, tt := range []struct{ origin, want string }{
		{"http://10.1.0.1:9190", "http://10.1.0.1:9190"}, // a peer's page
		{"http://10.1.0.3:9190", "http://10.1.0.3:9190"},
		{"http://evil.example", ""},
		{"http://10.1.0.1:9191", ""}, // another port of a peer's host
		{"https://10.1.0.1:9190", ""},
		{"null", ""},
		{"*", ""},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/status.json", nil)
		req.Header.Set("Origin", tt.origin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if v := res.Header.Get("Access-Control-Allow-Origin"); v != tt.want || !strings.Contains(res.Header.Get("Vary"), "Origin") {
			t.Errorf("Origin %q: Access-Control-Allow-Origin %q (Vary %q), want %q and Vary: Origin", tt.origin, v, res.Header.Get("Vary"), tt.want)
		}
	}
	if res, _ := get("/status/nothing.js"); res.StatusCode != 404 {
		t.Errorf("/status/nothing.js: %d, want 404", res.StatusCode)
	}
}

// TestBundledUPlot: the committed library is the npm release it says it is.
func TestBundledUPlot(t *testing.T) {
	b, err := os.ReadFile("assets/uPlot.iife.min.js")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	const want = "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("assets/uPlot.iife.min.js sha256 %s, want %s (uplot 1.6.32 from npm; see assets/uPlot.VERSION)", got, want)
	}
	v, _ := os.ReadFile("assets/uPlot.VERSION")
	if !strings.Contains(string(v), want) {
		t.Errorf("assets/uPlot.VERSION does not record the hash %s", want)
	}
}
