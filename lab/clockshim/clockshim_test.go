package clockshim

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/internal/rawclock"
)

// buildProbe builds the shim and testdata/probe.c into a fresh directory.
func buildProbe(t *testing.T) (so, probe, dir string) {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc): ci/deps.sh installs gcc")
	}
	dir = t.TempDir()
	so, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	probe = filepath.Join(dir, "probe")
	if out, err := exec.Command("cc", "-O2", "-o", probe, "testdata/probe.c").CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v: %s", err, out)
	}
	return so, probe, dir
}

// TestShimShiftsRealtime: a program under the shim reads the emulated
// clock, in the C library's clock calls and in the kernel's packet
// timestamps of recvmsg and recvmmsg; the expected value is computed here
// from the clock's own Ideal, not from the table the shim reads.
func TestShimShiftsRealtime(t *testing.T) {
	so, probe, dir := buildProbe(t)
	now := rawclock.Now()
	// An hour and a bit ahead, 80 ppm fast and wandering every 100 ms, so
	// that a shim reading the wrong knot or ignoring the rate is off by
	// far more than the tolerances below.
	p := clock.EmuParams{Origin: now - 2e9, Offset: 3600e9 + 123_456_789, DriftPPM: 80,
		WanderPPM: 2, WanderStep: 100e6, Seed: 3}
	ks, err := p.Knots(now+60e9, 10000)
	if err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(dir, "h1.knots")
	if err := WriteTable(table, ks); err != nil {
		t.Fatal(err)
	}
	emu, err := clock.NewEmulated(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(probe)
	cmd.Env = append(os.Environ(), Env(so, table)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe under the shim: %v: %s", err, out)
	}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			t.Fatalf("probe line %q", sc.Text())
		}
		var v [3]int64
		for i := range v {
			if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
				t.Fatalf("probe line %q: %v", sc.Text(), err)
			}
		}
		got, kernel, raw := v[0], v[1], v[2]
		if got < 0 {
			t.Errorf("%s: no timestamp received", f[0])
			continue
		}
		// The machine's realtime was read after the interposed one: the
		// difference, less the clock's deviation, is minus the time between
		// the two reads (plus the call's rounding: a us, or a s for time).
		want := kernel + (emu.Ideal(raw) - raw)
		lo := int64(-5e6)
		if f[0] == "time" {
			lo -= 1e9
		}
		if d := got - want; d < lo || d > 2000 {
			t.Errorf("%s: read %d, want about %d (the machine's %d plus the clock's %d ns): off %d ns",
				f[0], got, want, kernel, emu.Ideal(raw)-raw, d)
		}
		seen++
	}
	if seen != 7 {
		t.Fatalf("%d probe lines, want 7:\n%s", seen, out)
	}
}

// TestShimRefusesBadTable: the shim stops the program at start with a
// message naming the table and the fault; it never runs on the wrong clock.
func TestShimRefusesBadTable(t *testing.T) {
	so, probe, dir := buildProbe(t)
	good, err := EncodeTable([]clock.Knot{{T: 1, Local: 11}, {T: 5, Local: 15, Skew: 1e-5}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		data       []byte // nil: no file
		noEnv      bool
	}{
		{"no env", "not set", nil, true},
		{"missing", "No such file", nil, false},
		{"magic", "magic", []byte("GCLKSHM2" + strings.Repeat("\x00", 40)), false},
		{"short", "size", []byte("GCLK"), false},
		{"truncated", "does not match", good[:len(good)-3], false},
		{"order", "not strictly increasing", append(append([]byte{}, good[:16]...), append(good[40:64:64], good[16:40]...)...), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			table := filepath.Join(dir, c.name+".knots")
			if c.data != nil {
				if err := os.WriteFile(table, c.data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(probe)
			cmd.Env = append(os.Environ(), "LD_PRELOAD="+so)
			if !c.noEnv {
				cmd.Env = append(cmd.Env, "GCLOCK_CLOCKSHIM="+table)
			}
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "gclock clockshim") || !strings.Contains(string(out), c.want) {
				t.Fatalf("err %v, output %q: want a failure saying %q", err, out, c.want)
			}
			if !c.noEnv && !strings.Contains(string(out), table) {
				t.Fatalf("output %q does not name the table", out)
			}
		})
	}
}

func TestTableRoundTrip(t *testing.T) {
	ks := []clock.Knot{{T: -5, Local: 100, Skew: 3e-5}, {T: 1e12, Local: 1e12 + 7, Skew: -2e-6}}
	b, err := EncodeTable(ks)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeTable(b)
	if err != nil || len(back) != 2 || back[0] != ks[0] || back[1] != ks[1] {
		t.Fatalf("round trip: %v %v", back, err)
	}
	for _, bad := range [][]clock.Knot{nil, {{T: 2}, {T: 2}}, {{T: 1, Skew: 0.7}}} {
		if _, err := EncodeTable(bad); err == nil {
			t.Errorf("%v encoded", bad)
		}
	}
}

// FuzzDecodeTable: any bytes give a table or an error, never a panic, and
// what decodes encodes back to the same bytes.
func FuzzDecodeTable(f *testing.F) {
	good, _ := EncodeTable([]clock.Knot{{T: 1, Local: 11}, {T: 5, Local: 15, Skew: 1e-5}})
	f.Add(good)
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		ks, err := DecodeTable(b)
		if err != nil {
			return
		}
		again, err := EncodeTable(ks)
		if err != nil || !bytes.Equal(again[16:], b[16:]) {
			t.Fatalf("decoded %v does not encode back: %v", ks, err)
		}
	})
}

// DecodeTable reads a table back as the shim (c/clockshim.c) reads it:
// what the shim accepts, with an error naming what is wrong otherwise.
func DecodeTable(b []byte) ([]clock.Knot, error) {
	if len(b) < 16 || string(b[:8]) != magic {
		return nil, errors.New("clockshim: not a clock table (magic)")
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if n == 0 || uint64(len(b)) != 16+uint64(n)*24 {
		return nil, fmt.Errorf("clockshim: %d knots in %d bytes: sizes do not match", n, len(b))
	}
	ks := make([]clock.Knot, n)
	for i := range ks {
		p := b[16+24*i:]
		t := int64(binary.LittleEndian.Uint64(p))
		dev := int64(binary.LittleEndian.Uint64(p[8:]))
		sk := math.Float64frombits(binary.LittleEndian.Uint64(p[16:]))
		if math.IsNaN(sk) || math.Abs(sk) >= 0.5 {
			return nil, fmt.Errorf("clockshim: knot %d: rate error %v: want |skew| < 0.5", i, sk)
		}
		if i > 0 && t <= ks[i-1].T {
			return nil, fmt.Errorf("clockshim: knot %d at %d: not after knot %d", i, t, i-1)
		}
		ks[i] = clock.Knot{T: t, Local: t + dev, Skew: sk}
	}
	return ks, nil
}
