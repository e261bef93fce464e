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
		"-I", filepath.Join("..", "include"), filepath.Join("..", "tests", "c", "gclock_test.c"), "-o", bin, "-lm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(build.Args, " "), err, out)
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
			ts, _ := r.w.load()
			want := fmt.Sprintf("at %d %d %d %d %s %d", x, tm.Est, tm.Earliest, tm.Latest, tm.Status, ts.timescale)
			if i >= len(lines) || lines[i] != want {
				t.Errorf("%s: C and Go differ at x=%d:\n C: %q\nGo: %q", name, x, lines[min(i, len(lines)-1)], want)
			}
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
	w.Close()
	check("closed")
}
