package mpi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/trace/causality"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
	"github.com/gclock/gclock/trace/timeline"
)

const (
	ranks = 4
	sec   = int64(time.Second)
)

// bins are the programs built once for the whole test binary.
var bins struct {
	once sync.Once
	dir  string
	err  error
}

// built builds libgclockmpi.so, collbench, ring and api with mpicc (through
// the Makefile, as a user would), or skips when OpenMPI is not installed.
func built(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"mpicc", "mpirun", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH: the MPI library is not tested; run ci/deps.sh (installs openmpi-bin libopenmpi-dev)", tool)
		}
	}
	bins.once.Do(func() {
		dir, err := os.MkdirTemp("", "gclock-mpi-")
		if err != nil {
			bins.err = err
			return
		}
		bins.dir = dir
		if out, err := exec.Command("make", "-s", "O="+dir).CombinedOutput(); err != nil {
			bins.err = fmt.Errorf("make O=%s: %v\n%s", dir, err, out)
			return
		}
		// The API test program, linked at build time (no LD_PRELOAD).
		cmd := exec.Command("mpicc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-I../include",
			"-o", filepath.Join(dir, "api"), filepath.Join("testdata", "api.c"),
			"-L"+dir, "-lgclockmpi", "-Wl,-rpath,"+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			bins.err = fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// mpirun runs prog on n ranks of this machine with env exported to every
// rank, and returns the ranks' stdout and stderr (each rank's in turn: mpirun
// itself may cut lines of different ranks into each other) with mpirun's own
// stderr after them.
// rankStderr is what each rank of the last mpirun wrote to stderr, by rank
// (mpirun's own stderr repeats it; tests run mpirun one at a time).
var rankStderr = map[int]string{}

func mpirun(t *testing.T, n int, env map[string]string, argv ...string) (stdout, stderr string, err error) {
	t.Helper()
	clear(rankStderr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	outDir := t.TempDir()
	args := []string{"--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(n), "--output-filename", outDir,
		// Containers often forbid the cross-memory attach of the shared-memory transport.
		"--mca", "btl_vader_single_copy_mechanism", "none",
		// OpenMPI 4.1's default one-sided component (rdma) cannot create a window over that transport.
		"--mca", "osc", "sm,pt2pt"}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-x", k+"="+env[k])
	}
	cmd := exec.CommandContext(ctx, "mpirun", append(args, argv...)...)
	var e bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &e
	err = cmd.Run()
	var o, re strings.Builder
	for r := range n {
		for _, f := range []struct {
			name string
			b    *strings.Builder
		}{{"stdout", &o}, {"stderr", &re}} {
			paths, _ := filepath.Glob(filepath.Join(outDir, "*", fmt.Sprintf("rank.%d", r), f.name))
			for _, p := range paths {
				data, rerr := os.ReadFile(p)
				if rerr != nil {
					t.Fatal(rerr)
				}
				f.b.Write(data)
				if f.name == "stderr" {
					rankStderr[r] = string(data)
				}
			}
		}
	}
	re.WriteString(e.String())
	if ctx.Err() != nil {
		t.Fatalf("mpirun %s: timed out\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), o.String(), re.String())
	}
	return o.String(), re.String(), err
}

// knownPage writes a page with a known mapping: global time is local time
// plus offset, running fast by skew.
func knownPage(t *testing.T, offset int64, skew float64) (*gtime.Writer, string, estimate.Mapping) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "page")
	w, err := gtime.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	x := gtime.RawNow()
	m := estimate.Mapping{X0: x, Y0: x + offset, Skew: skew, W0: 1500, SkewErr: 2e-6, Valid: true}
	publish(t, w, x, m)
	return w, path, m
}

func publish(t *testing.T, w *gtime.Writer, local int64, m estimate.Mapping) {
	t.Helper()
	if err := w.Publish(gtime.Update{Local: local, Mapping: m, Status: gtime.StatusSynced, StaleAfter: time.Minute,
		MaxDrift: 100e-6, MaxSlewRate: 500e-6}); err != nil {
		t.Fatal(err)
	}
}

type wtimeLine struct {
	rank   int
	before int64
	wtime  float64
	after  int64
}

func parseWtimes(t *testing.T, out string) []wtimeLine {
	t.Helper()
	var ws []wtimeLine
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 5 || f[0] != "wtime" {
			continue
		}
		var w wtimeLine
		var err error
		if w.rank, err = strconv.Atoi(f[1]); err == nil {
			if w.before, err = strconv.ParseInt(f[2], 10, 64); err == nil {
				if w.wtime, err = strconv.ParseFloat(f[3], 64); err == nil {
					w.after, err = strconv.ParseInt(f[4], 10, 64)
				}
			}
		}
		if err != nil {
			t.Fatalf("bad line %q: %v", l, err)
		}
		ws = append(ws, w)
	}
	return ws
}

// TestWtimeKnownMapping runs an unmodified MPI program with libgclockmpi
// preloaded against a page whose mapping the test wrote, and checks every
// MPI_Wtime exactly: it is the mapping's value at a CLOCK_MONOTONIC_RAW
// instant between the two stamps around the call, minus the origin.
func TestWtimeKnownMapping(t *testing.T) {
	dir := built(t)
	const offset = 5000*sec + 123456789
	const origin = 1000 // s
	_, page, m := knownPage(t, offset, 37e-6)
	out, errout, err := mpirun(t, ranks, map[string]string{
		"LD_PRELOAD": filepath.Join(dir, "libgclockmpi.so"), "GCLOCK_PAGE": page,
		"GCLOCK_MPI_ORIGIN": strconv.Itoa(origin),
	}, filepath.Join(dir, "ring"), "20", "0")
	if err != nil {
		t.Fatalf("mpirun: %v\n%s\n%s", err, out, errout)
	}
	ws := parseWtimes(t, out)
	if len(ws) != ranks*5 {
		t.Fatalf("%d wtime lines, want %d:\n%s", len(ws), ranks*5, out)
	}
	for _, w := range ws {
		lo, _, _ := m.At(w.before)
		hi, _, _ := m.At(w.after)
		// The printed %.9f value, back in ns: exact to 1 ns.
		got := int64(math.Round(w.wtime*1e9)) + origin*sec
		if tol := tolNs(w.wtime); got < lo-tol || got > hi+tol {
			t.Errorf("rank %d: MPI_Wtime %.9f = %d ns global, want the mapping's value between the raw stamps: [%d, %d]",
				w.rank, w.wtime, got, lo, hi)
		}
	}
	for r := 0; r < ranks; r++ {
		if !strings.Contains(out, fmt.Sprintf("attr %d 1 1\n", r)) {
			t.Errorf("rank %d: MPI_WTIME_IS_GLOBAL not true:\n%s", r, out)
		}
		if !strings.Contains(out, fmt.Sprintf("tick %d 1e-09\n", r)) {
			t.Errorf("rank %d: MPI_Wtick not 1e-09:\n%s", r, out)
		}
	}
	if strings.Contains(errout, "libgclockmpi") {
		t.Errorf("libgclockmpi complained on a synced page:\n%s", errout)
	}
}

// TestAPI checks gclock_mpi.h's C API in global mode against a known
// mapping, and in local mode without a page, including the variables that
// make it fail (table test).
func TestAPI(t *testing.T) {
	dir := built(t)
	_, page, m := knownPage(t, -3*sec, -12e-6)
	// The same mapping on a page the daemon says is degraded.
	degraded := filepath.Join(t.TempDir(), "degraded")
	dw, err := gtime.NewWriter(degraded)
	if err != nil {
		t.Fatal(err)
	}
	defer dw.Close()
	if err := dw.Publish(gtime.Update{Local: m.X0, Mapping: m, Status: gtime.StatusDegraded, StaleAfter: time.Minute,
		MaxDrift: 100e-6, MaxSlewRate: 500e-6}); err != nil {
		t.Fatal(err)
	}
	api := filepath.Join(dir, "api")
	tests := []struct {
		name    string
		env     map[string]string
		fail    string // stderr must contain this and mpirun fail
		mode    int
		status  int    // of the readings in global mode (0: synced)
		noticed string // stderr must contain this
	}{
		{name: "global", env: map[string]string{"GCLOCK_PAGE": page}, mode: 1},
		{name: "global with origin", env: map[string]string{"GCLOCK_PAGE": page, "GCLOCK_MPI_ORIGIN": "7"}, mode: 1},
		{name: "degraded", env: map[string]string{"GCLOCK_PAGE": degraded}, mode: 1, status: 4},
		// Without a page on any rank the library syncs itself (TestWtimeSyncedNoPage); GCLOCK_MPI_SYNC=0 keeps local time.
		{name: "no page", env: map[string]string{"GCLOCK_PAGE": filepath.Join(t.TempDir(), "none"), "GCLOCK_MPI_SYNC": "0"}, mode: 0,
			noticed: "MPI_Wtime is local time: cannot read the gclock page"},
		{name: "no page, quiet", env: map[string]string{"GCLOCK_PAGE": filepath.Join(t.TempDir(), "none"), "GCLOCK_MPI_SYNC": "0", "GCLOCK_MPI_QUIET": "1"}, mode: 0},
		{name: "not a page", env: map[string]string{"GCLOCK_PAGE": "/etc/hostname", "GCLOCK_MPI_SYNC": "0"}, mode: 0, noticed: "not a gclock page"},
		{name: "required", env: map[string]string{"GCLOCK_PAGE": filepath.Join(t.TempDir(), "none"), "GCLOCK_MPI_REQUIRE": "1"},
			fail: "GCLOCK_MPI_REQUIRE is set"},
		{name: "bad origin", env: map[string]string{"GCLOCK_PAGE": page, "GCLOCK_MPI_ORIGIN": "12x"},
			fail: "GCLOCK_MPI_ORIGIN=12x: want whole seconds"},
		{name: "negative origin", env: map[string]string{"GCLOCK_PAGE": page, "GCLOCK_MPI_ORIGIN": "-1"},
			fail: "GCLOCK_MPI_ORIGIN=-1: want whole seconds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errout, err := mpirun(t, 2, tc.env, api, "5")
			if tc.fail != "" {
				if err == nil || !strings.Contains(errout, tc.fail) {
					t.Fatalf("want a failure saying %q, got err %v\n%s\n%s", tc.fail, err, out, errout)
				}
				return
			}
			if err != nil {
				t.Fatalf("mpirun: %v\n%s\n%s", err, out, errout)
			}
			if tc.noticed != "" && !strings.Contains(errout, tc.noticed) {
				t.Errorf("stderr does not say %q:\n%s", tc.noticed, errout)
			}
			if n0, n1 := strings.Count(rankStderr[0], "MPI_Wtime is"), strings.Count(rankStderr[1], "MPI_Wtime is"); tc.noticed != "" && (n0 != 1 || n1 != 0) {
				t.Errorf("notices: %d from rank 0, %d from rank 1; want one for the job, rank 0's:\n%s", n0, n1, errout)
			}
			if tc.noticed == "" && strings.Contains(errout, "libgclockmpi") {
				t.Errorf("unexpected notice:\n%s", errout)
			}
			originS, _ := strconv.ParseInt(tc.env["GCLOCK_MPI_ORIGIN"], 10, 64)
			origin := originS * sec
			if _, set := tc.env["GCLOCK_MPI_ORIGIN"]; !set && tc.mode == 1 {
				origin = jobOrigin(t, out, m)
			}
			checkAPI(t, out, tc.mode, max(tc.status, 1), origin, m)
		})
	}
}

// jobOrigin checks the job origin the ranks printed ("origin RANK NS"):
// the same on every rank, a whole second, at most the page's estimate when
// the program ran (global time at MPI_Init on rank 0, rounded down) and
// not more than a minute before it. (issue 19: MPI_Wtime was absolute
// global time, 1.8e9 s on UTC, with 238-ns steps.)
func jobOrigin(t *testing.T, out string, m estimate.Mapping) int64 {
	t.Helper()
	var origin int64 = -1
	for rank, o := range rankOrigins(out) {
		if o < 0 || (origin >= 0 && o != origin) {
			t.Fatalf("rank %s's origin %d: want one origin on every rank (another: %d)", rank, o, origin)
		}
		origin = o
	}
	now, _, _ := m.At(gtime.RawNow())
	if origin <= 0 || origin%sec != 0 || origin > now || now-origin > 60*sec {
		t.Fatalf("job origin %d: want a whole second within the minute before the estimate now %d", origin, now)
	}
	return origin
}

// rankOrigins reads the job origin each rank printed ("origin RANK NS"),
// by rank; -1 for a number that does not parse. MPI_Wtime is relative to
// it: a test makes the truth relative to it in int64 first.
func rankOrigins(out string) map[string]int64 {
	origin := map[string]int64{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "origin" {
			o, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				o = -1
			}
			origin[f[1]] = o
		}
	}
	return origin
}

func checkAPI(t *testing.T, out string, mode, status int, origin int64, m estimate.Mapping) {
	t.Helper()
	var nb, nn int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[0] == "mode":
			if f[2] != strconv.Itoa(mode) {
				t.Errorf("mode %s, want %d: %q", f[2], mode, l)
			}
		case len(f) == 3 && f[0] == "origin":
			if f[2] != strconv.FormatInt(origin, 10) {
				t.Errorf("origin %s, want %d", f[2], origin)
			}
		case len(f) == 8 && f[0] == "bounds":
			nb++
			st, _ := strconv.Atoi(f[2])
			a, _ := strconv.ParseInt(f[3], 10, 64)
			b, _ := strconv.ParseInt(f[7], 10, 64)
			w, lo, hi := parseF(t, f[4]), parseF(t, f[5]), parseF(t, f[6])
			if mode == 0 {
				if st != -1 || !math.IsInf(lo, -1) || !math.IsInf(hi, 1) {
					t.Errorf("local mode: %q, want status -1 and infinite bounds", l)
				}
				continue
			}
			e0, lo0, _ := m.At(a)
			e1, _, hi1 := m.At(b)
			ns := func(s float64) int64 { return int64(math.Round(s*1e9)) + origin }
			tol := tolNs(w)
			if st != status || ns(w) < e0-tol || ns(w) > e1+tol || ns(lo) < lo0-tol || ns(lo) > ns(w) || ns(hi) > hi1+tol || ns(hi) < ns(w) {
				t.Errorf("%q: want status %d, wtime in [%d, %d], earliest >= %d, latest <= %d (ns, origin %d)", l, status, e0, e1, lo0, hi1, origin)
			}
		case len(f) == 9 && f[0] == "now":
			nn++
			var v [8]int64
			for i := range v {
				v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
			}
			rc, a, est, lo, hi, st, b := v[1], v[2], v[3], v[4], v[5], v[6], v[7]
			if mode == 0 {
				if rc != -19 { // -ENODEV
					t.Errorf("local mode: %q, want rc -19 (ENODEV)", l)
				}
				continue
			}
			e0, lo0, _ := m.At(a)
			e1, _, hi1 := m.At(b)
			if rc != 0 || st != int64(status) || est < e0 || est > e1 || lo < lo0 || lo > est || hi > hi1 || hi < est {
				t.Errorf("%q: want rc 0, status %d, est in [%d, %d], bounds within [%d, %d]", l, status, e0, e1, lo0, hi1)
			}
		}
	}
	if nb != 10 || nn != 10 {
		t.Errorf("%d bounds and %d now lines, want 10 each:\n%s", nb, nn, out)
	}
}

// tolNs is how far (ns) a value printed in seconds with %.9f can be from
// the int64 ns it came from: 1 ns of printing plus the double's own step,
// which passes 1 ns beyond 2^23 s (97 days of uptime on the reference
// timescale).
func tolNs(sec float64) int64 { return 1 + int64(math.Ceil(math.Abs(sec)*1e9*0x1p-52)) }

func parseF(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return f
}

// rawEvents reads a trace's events in file order.
func rawEvents(t *testing.T, path string) []format.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := format.NewReader(bufio.NewReader(f), path)
	var evs []format.Event
	for {
		c, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind == format.KindEvents {
			ev, err := format.DecodeEvents(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev...)
		}
	}
}

func summary(t *testing.T, path string) *format.Summary {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := format.Summarize(f, path, false)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTraceKnownMappings traces the ring program while the test republishes
// the page with a new mapping every 30 ms: every rank's file must hold
// exactly mappings the test published (with their publish time as From),
// several of them, and the four files must merge with -method daemon with
// every message matched and no receive before its send. Each corrected
// timestamp is checked against the published mappings.
func TestTraceKnownMappings(t *testing.T) {
	dir := built(t)
	w, page, m0 := knownPage(t, 100*sec, 20e-6)
	var mu sync.Mutex
	published := []format.DaemonMapping{{From: m0.X0, Mapping: m0}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(30 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			x := gtime.RawNow()
			mu.Lock()
			prev := published[len(published)-1].Mapping
			mu.Unlock()
			y, _, _ := prev.At(x)
			m := estimate.Mapping{X0: x, Y0: y + int64(i%3) - 1, Skew: 20e-6 + float64(i%5)*1e-6, W0: 1500, SkewErr: 2e-6, Valid: true}
			if err := w.Publish(gtime.Update{Local: x, Mapping: m, Status: gtime.StatusSynced, StaleAfter: time.Minute,
				MaxDrift: 100e-6, MaxSlewRate: 500e-6}); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			published = append(published, format.DaemonMapping{From: x, Mapping: m})
			mu.Unlock()
		}
	}()
	tdir := filepath.Join(t.TempDir(), "trace")
	out, errout, err := mpirun(t, ranks, map[string]string{
		"LD_PRELOAD": filepath.Join(dir, "libgclockmpi.so"), "GCLOCK_PAGE": page, "GCLOCK_MPI_TRACE": tdir,
	}, filepath.Join(dir, "ring"), "30", "10")
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("mpirun: %v\n%s\n%s", err, out, errout)
	}
	files, _ := filepath.Glob(filepath.Join(tdir, "rank-*.gct"))
	if len(files) != ranks {
		t.Fatalf("trace files %v, want %d", files, ranks)
	}
	byFrom := map[int64]estimate.Mapping{}
	for _, p := range published {
		byFrom[p.From] = p.Mapping
	}
	for _, f := range files {
		s := summary(t, f)
		if s.Meta.Flags&format.FlagSyncedHost == 0 || s.Meta.Clock != "CLOCK_MONOTONIC_RAW" || !strings.HasPrefix(s.Meta.Name, "rank ") {
			t.Errorf("%s: meta %+v", f, s.Meta)
		}
		if len(s.Mappings) < 3 {
			t.Errorf("%s: %d mappings recorded, want several (published %d)", f, len(s.Mappings), len(published))
		}
		for i, dm := range s.Mappings {
			if want, ok := byFrom[dm.From]; !ok || want != dm.Mapping {
				t.Errorf("%s: mapping %d %+v from %d was never published (published at that time: %+v, %v)", f, i, dm.Mapping, dm.From, want, ok)
			}
			if i > 0 && dm.From <= s.Mappings[i-1].From {
				t.Errorf("%s: mapping %d from %d not after the previous one's %d", f, i, dm.From, s.Mappings[i-1].From)
			}
		}
		names := map[string]bool{}
		for _, n := range s.Names {
			names[n.Name] = true
		}
		for _, n := range []string{"MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce"} {
			if !names[n] {
				t.Errorf("%s: no name %q in %v", f, n, s.Names)
			}
		}
	}
	var bin bytes.Buffer
	rep, err := timeline.Run(timeline.Files(files), timeline.Options{Method: correct.Daemon, Binary: &bin})
	if err != nil {
		t.Fatal(err)
	}
	checkMerge(t, rep, 30)
	// Every corrected time is one of the published mappings at the raw stamp:
	// between the lowest and the highest of them there.
	r := format.NewReader(&bin, "merged")
	n := 0
	for {
		c, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind != format.KindMerged {
			continue
		}
		ms, err := format.DecodeMerged(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ms {
			lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
			for _, p := range published {
				y, _, _ := p.Mapping.At(e.Raw)
				lo, hi = min(lo, y), max(hi, y)
			}
			if e.Time < lo || e.Time > hi {
				t.Fatalf("proc %d: raw %d corrected to %d, outside every published mapping's value [%d, %d]", e.Proc, e.Raw, e.Time, lo, hi)
			}
			n++
		}
	}
	if n != int(rep.Events) {
		t.Errorf("checked %d merged events, the merge reported %d", n, rep.Events)
	}
}

// checkMerge checks a daemon-corrected merge of the ring program's traces:
// the number of messages it sends in rounds rounds, all matched, none
// received before sent.
func checkMerge(t *testing.T, rep *timeline.Report, rounds int) {
	t.Helper()
	for _, c := range rep.Choices {
		if c.Method != correct.Daemon || c.Mappings < 1 {
			t.Errorf("proc %d: method %s with %d mappings, want daemon", c.Proc, c.Method, c.Mappings)
		}
	}
	// Per round and rank: 5 point-to-point messages on the world, 1 on the
	// split communicator, and the collectives' dependencies: 3 per rank for
	// the barrier and the allreduce (offsets 1, 2, 3), 3 for the bcast and
	// the reduce (root and the 3 others), 1 per rank for the allreduce on
	// the halves.
	perRound := ranks*5 + ranks*1 + ranks*3 + 3 + 3 + ranks*3 + ranks*1
	tot := causality.Totals(rep.Pairs)
	if tot.Messages != int64(perRound*rounds) || rep.Unmatched != 0 {
		t.Errorf("%d messages matched, %d ends unmatched; want %d and 0", tot.Messages, rep.Unmatched, perRound*rounds)
	}
	if tot.Corrected != 0 || tot.Raw != 0 {
		t.Errorf("received before sent: %d raw, %d corrected (one host: want 0)", tot.Raw, tot.Corrected)
	}
}

// freeUDP returns n free loopback UDP addresses.
func freeUDP(t *testing.T, n int) []string {
	t.Helper()
	var conns []net.PacketConn
	var addrs []string
	for range n {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		addrs = append(addrs, c.LocalAddr().String())
	}
	for _, c := range conns {
		c.Close()
	}
	return addrs
}

// TestRealDaemon runs two gclock daemons on this machine, the MPI programs
// against the page of the one that is not the reference, and checks against
// the truth: global time is the reference's CLOCK_MONOTONIC_RAW, which on
// one machine is every process's CLOCK_MONOTONIC_RAW. MPI_Wtime's bounds
// must hold the truth, and the ring's traces, merged with -method daemon by
// the gclock command, must match every message; their corrected timestamps
// are compared with the truth.
func TestRealDaemon(t *testing.T) {
	dir := built(t)
	if testing.Short() {
		t.Skip("starts two daemons and waits for them to sync")
	}
	gclock := filepath.Join(dir, "gclock")
	if out, err := exec.Command("go", "build", "-o", gclock, "../cmd/gclock").CombinedOutput(); err != nil {
		t.Fatalf("go build gclock: %v\n%s", err, out)
	}
	addrs := freeUDP(t, 2)
	tmp := t.TempDir()
	page := filepath.Join(tmp, "page2")
	peers := "1=" + addrs[0] + ",2=" + addrs[1]
	for id := 1; id <= 2; id++ {
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, gclock, "daemon", "-id", strconv.Itoa(id), "-peers", peers, "-reference", "1,2",
			"-shm", filepath.Join(tmp, fmt.Sprintf("page%d", id)), "-metrics", "none")
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cancel()
			cmd.Wait()
			if t.Failed() {
				t.Logf("daemon %d log:\n%s", id, log.String())
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := gtime.Open(page)
		if err == nil {
			tm, err := r.Now()
			r.Close()
			if err == nil && tm.Status == gtime.StatusSynced {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's page %s is not synced after 60 s", page)
		}
		time.Sleep(200 * time.Millisecond)
	}
	env := map[string]string{"GCLOCK_PAGE": page}
	out, errout, err := mpirun(t, ranks, env, filepath.Join(dir, "api"), "50")
	if err != nil {
		t.Fatalf("mpirun api: %v\n%s\n%s", err, out, errout)
	}
	var worst float64
	n := 0
	origin := rankOrigins(out) // MPI_Wtime is relative to the job's origin
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 8 || f[0] != "bounds" {
			continue
		}
		n++
		a, _ := strconv.ParseInt(f[3], 10, 64)
		b, _ := strconv.ParseInt(f[7], 10, 64)
		a, b = a-origin[f[1]], b-origin[f[1]]
		w, lo, hi := parseF(t, f[4]), parseF(t, f[5]), parseF(t, f[6])
		// The truth at the read lies in [a, b] (seconds since the origin).
		if tol := float64(tolNs(w)); f[2] != "1" || lo*1e9 > float64(b)+tol || hi*1e9 < float64(a)-tol {
			t.Errorf("%q: the bounds [%.9f, %.9f] exclude the truth [%d, %d] ns", l, lo, hi, a, b)
		}
		worst = math.Max(worst, math.Max(w*1e9-float64(b), float64(a)-w*1e9))
	}
	if n != ranks*50 {
		t.Fatalf("%d bounds lines, want %d", n, ranks*50)
	}
	t.Logf("MPI_Wtime against the truth on %d reads: worst error %.0f ns (beyond the read's own duration)", n, worst)

	tdir := filepath.Join(tmp, "trace")
	env["LD_PRELOAD"] = filepath.Join(dir, "libgclockmpi.so")
	env["GCLOCK_MPI_TRACE"] = tdir
	if out, errout, err := mpirun(t, ranks, env, filepath.Join(dir, "ring"), "20", "5"); err != nil {
		t.Fatalf("mpirun ring: %v\n%s\n%s", err, out, errout)
	}
	files, _ := filepath.Glob(filepath.Join(tdir, "rank-*.gct"))
	sort.Strings(files)
	if len(files) != ranks {
		t.Fatalf("trace files %v, want %d", files, ranks)
	}
	mout, err := exec.Command(gclock, append([]string{"merge", "-method", "daemon"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("gclock merge -method daemon: %v\n%s", err, mout)
	}
	want := "received before sent: 0 on raw timestamps, 0 after correction; 0 message ends unmatched"
	if !strings.Contains(string(mout), want) {
		t.Errorf("gclock merge -method daemon: no %q in\n%s", want, mout)
	}
	// The truth of every event is its raw stamp (reference timescale, one machine).
	truth := map[uint32][]int64{}
	for _, f := range files {
		s := summary(t, f)
		for _, e := range rawEvents(t, f) {
			truth[s.Meta.Proc] = append(truth[s.Meta.Proc], e.Time)
		}
	}
	rep, err := timeline.Run(timeline.Files(files), timeline.Options{Method: correct.Daemon, Truth: truth})
	if err != nil {
		t.Fatal(err)
	}
	checkMerge(t, rep, 20)
	if rep.Error == nil || rep.Error.N != rep.Events {
		t.Fatalf("no error against the truth: %+v", rep.Error)
	}
	// The daemons' bounds on this machine are microseconds; a corrected
	// stamp 1 ms off would be a bug, not noise.
	if rep.Error.Max > int64(time.Millisecond) {
		t.Errorf("corrected stamps up to %d ns from the truth", rep.Error.Max)
	}
	t.Logf("ring traces, -method daemon, against the truth: %d events, p50 %d ns, p99 %d ns, max %d ns",
		rep.Error.N, rep.Error.P50, rep.Error.P99, rep.Error.Max)
}

// TestCollbench runs the sample program on 4 ranks against a known page and
// checks its report: both ways for both operations, one line per rank, and
// figures that are numbers.
func TestCollbench(t *testing.T) {
	dir := built(t)
	_, page, _ := knownPage(t, 42*sec, 5e-6)
	raw := filepath.Join(t.TempDir(), "raw.csv")
	out, errout, err := mpirun(t, ranks, map[string]string{"GCLOCK_PAGE": page},
		filepath.Join(dir, "collbench"), "-reps", "30", "-truth", "-raw", raw)
	if err != nil {
		t.Fatalf("mpirun collbench: %v\n%s\n%s", err, out, errout)
	}
	t.Logf("collbench (under the test machine's load):\n%s", out)
	rows, truthRows := 0, 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 9 && strings.HasPrefix(f[0], "MPI_") {
			rows++
			for _, v := range f[2:7] {
				if x, err := strconv.ParseFloat(v, 64); err != nil || math.IsNaN(x) || x < 0 {
					t.Errorf("row %q: %q is not a figure", l, v)
				}
			}
			if (f[1] == "global") == (f[7] == "-") {
				t.Errorf("row %q: bounds only for the global way", l)
			}
		}
		if len(f) == 10 && strings.HasPrefix(f[0], "MPI_") {
			truthRows++
			for _, v := range f[2:] {
				if x, err := strconv.ParseFloat(v, 64); err != nil || math.IsNaN(x) || x < 0 {
					t.Errorf("truth row %q: %q is not a figure", l, v)
				}
			}
		}
	}
	if rows != 4 || truthRows != 4 {
		t.Errorf("%d result rows and %d truth rows, want 4 each (2 ops x 2 ways):\n%s", rows, truthRows, out)
	}
	if got := strings.Count(out, "  rank "); got != 4*ranks {
		t.Errorf("%d per-rank lines, want %d", got, 4*ranks)
	}
	data, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != 1+30*2*2*ranks {
		t.Errorf("raw CSV: %d lines, want %d", lines, 1+30*2*2*ranks)
	}
}

// TestMappingRecords checks gclock_trace.h's mapping records directly (no
// MPI): what gct_poll_mapping records and refuses, and that Go reads back
// exactly the mappings written.
func TestMappingRecords(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) on PATH; run ci/deps.sh")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "mapping")
	if out, err := exec.Command(cc, "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-pthread", "-I../include",
		"-o", bin, filepath.Join("testdata", "mapping.c"), "-lm").CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	file := filepath.Join(dir, "m.gct")
	out, err := exec.Command(bin, file).CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if want := "poll 1\npoll 0\npoll 0\npoll 1\nrecord -1 1\npoll -1 1\nrecord 0\nclose 0\n"; string(out) != want {
		t.Errorf("results:\n%s\nwant:\n%s", out, want)
	}
	s := summary(t, file)
	m := estimate.Mapping{X0: 1000, Y0: 5000000000, Skew: 12.5e-6, W0: 300, SkewErr: 1e-6, Wander: 1e-18, Valid: true}
	m2 := m
	m2.Skew = -7e-6
	inv := m
	inv.Valid = false
	want := []format.DaemonMapping{{From: 1000, Mapping: m}, {From: 3000, Mapping: m2}, {From: 2000, Mapping: inv}}
	if len(s.Mappings) != len(want) {
		t.Fatalf("mappings %+v, want %+v", s.Mappings, want)
	}
	for i := range want {
		if s.Mappings[i] != want[i] {
			t.Errorf("mapping %d: %+v, want %+v", i, s.Mappings[i], want[i])
		}
	}
	if s.Events != 2 || s.Meta.Proc != 5 || s.Meta.Host != 9 {
		t.Errorf("events %d, meta %+v", s.Events, s.Meta)
	}
}
