package gtime

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCHeader compiles tests/c/gclock_test.c against include/gclock.h and
// checks that C computes exactly what Go computes on pages written by the
// Go writer, that gclock_now is monotone, and logs its cost.
func TestCHeader(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) on PATH: include/gclock.h not tested; run ci/deps.sh to install gcc")
	}
	bin := filepath.Join(t.TempDir(), "gclock_test")
	build := exec.Command(cc, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror",
		"-I", filepath.Join("..", "include"), filepath.Join("..", "tests", "c", "gclock_test.c"), "-o", bin)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(build.Args, " "), err, out)
	}
	// The header alone also builds as strict C99 and as C++.
	for _, b := range [][]string{
		{cc, "-std=c99", "-D_POSIX_C_SOURCE=200809L", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", filepath.Join("..", "include"), "-x", "c", "-"},
		{cc, "-std=c++11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", filepath.Join("..", "include"), "-x", "c++", "-"},
	} {
		cmd := exec.Command(b[0], b[1:]...)
		cmd.Stdin = strings.NewReader("#include \"gclock.h\"\nint main(void) { struct gclock_reader r; struct gclock_time t;\n" +
			"if (gclock_open(&r, 0) == 0 && gclock_now(&r, &t) == 0) gclock_close(&r); return 0; }\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(b, " "), err, out)
		}
	}
	w, r, path := newPair(t)
	base := RawNow()
	xs := []int64{base - sec, base, base + 1, base + 123456789, base + 11*sec, base + 3600*sec, -5, 1 << 62}
	check := func(name string) {
		t.Helper()
		args := []string{path}
		for _, x := range xs {
			args = append(args, strconv.FormatInt(x, 10))
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: gclock_test: %v\n%s", name, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		for i, x := range xs {
			tm, err := r.At(x)
			if err != nil {
				t.Fatal(err)
			}
			ts, _ := r.cur.Load().w.load()
			want := fmt.Sprintf("at %d %d %d %d %s %d", x, tm.Est, tm.Earliest, tm.Latest, tm.Status, ts.timescale)
			if i >= len(lines) || lines[i] != want {
				t.Errorf("%s: C and Go differ at x=%d:\n C: %q\nGo: %q", name, x, lines[min(i, len(lines)-1)], want)
			}
		}
		in, err := r.Info()
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("nodes %d %d\n", in.Node, in.Reference); !strings.Contains(string(out), want) {
			t.Errorf("%s: no %q line in\n%s", name, want, out)
		}
		_, sc, err := r.AtScale(base)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("scale %d %d %d %d %s", sc.Term, b2i(sc.Defined), sc.X0, sc.Y0, strconv.FormatFloat(sc.Skew, 'g', 17, 64))
		for _, x := range xs {
			want += " " + strconv.FormatInt(sc.At(x), 10)
		}
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("%s: no %q line in\n%s", name, want, out)
		}
		if !strings.Contains(string(out), "monotone 200000") {
			t.Errorf("%s: no monotone line in\n%s", name, out)
		}
		for _, l := range lines {
			if strings.HasPrefix(l, "bench") {
				t.Logf("%s: C %s", name, l)
			}
		}
	}
	check("unsynced")
	u := baseUpdate(base)
	u.Mapping.Skew = -12.345678e-6
	u.Mapping.Wander = 1e-20
	u.StaleAfter = 10 * time.Second
	u.Node, u.Reference = 3, 1<<31+5 // the full uint32 range survives
	// This page's writer is term 7's reference (it took over) and defines it.
	u.Term, u.Scale = 7, Scale{Term: 7, Defined: true, X0: base - 5*sec, Y0: 1<<61 + 12345, Skew: 3.25e-6}
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	check("synced")
	u.Local += int64(time.Millisecond)
	u.Mapping.Y0 += 700 // a correction: slewed
	u.Timescale = TimescaleRealtime
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	u.Local += int64(time.Millisecond)
	u.Mapping.Y0 -= 300
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	check("slewed")
	// The mean-drift timescale (page version 2), published continuous.
	u.Local += int64(time.Millisecond)
	u.Timescale, u.Continuous = TimescaleMeanDrift, true
	u.Mapping.Y0 += 50000
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	check("mean-drift")
	// Degraded: the data contradicted the daemon's clock model; C names it
	// as Go does, and never as synced.
	u.Local += int64(time.Millisecond)
	u.Status = StatusDegraded
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	check("degraded")
	u.Status = StatusSynced
	u.Timescale, u.Continuous = TimescaleRealtime, false

	// The C reader's cached copy follows a page that changes under it.
	x := RawNow() + sec
	watch := exec.Command(bin, path, "-watch", "400", strconv.FormatInt(x, 10))
	var wout strings.Builder
	watch.Stdout, watch.Stderr = &wout, &wout
	done, err := watch.StdinPipe() // closed after the last publish
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		u.Local = RawNow()
		u.Mapping.X0 = u.Local
		est, _ := r.At(u.Local)
		u.Mapping.Y0 = est.Est + int64(i%5-2)*200 // corrections both ways, inside W0
		if err := w.Publish(u); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	done.Close()
	if err := watch.Wait(); err != nil {
		t.Fatalf("watch: %v\n%s", err, wout.String())
	}
	var refreshes int
	var line string
	fmt.Sscanf(wout.String(), "watch %d\n", &refreshes)
	if i := strings.Index(wout.String(), "at "); i >= 0 {
		line = strings.TrimSpace(wout.String()[i:])
	}
	tm, _ := r.At(x)
	want := fmt.Sprintf("at %d %d %d %d %s %d", x, tm.Est, tm.Earliest, tm.Latest, tm.Status, TimescaleRealtime)
	if refreshes < 10 || line != want {
		t.Errorf("watch: %d cache refreshes (want many), final read\n C: %q\nGo: %q", refreshes, line, want)
	}
	t.Logf("C reader refreshed its copy %d times during 100 publishes", refreshes)
	w.Close()
	check("closed")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
