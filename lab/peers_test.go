package lab

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/gtime"
)

// trackingOut is `chronyc tracking` as chrony 4.3 prints it under -x, with
// the System time line replaced per case.
const trackingOut = `Reference ID    : 0A4D0001 (10.77.0.1)
Stratum         : 2
Ref time (UTC)  : Sun Nov 22 21:35:36 2026
System time     : %s
Last offset     : -0.000000210 seconds
RMS offset      : 0.000002113 seconds
Frequency       : 0.000 ppm slow
Residual freq   : -0.008 ppm
Skew            : 0.138 ppm
Root delay      : 0.000222680 seconds
Root dispersion : 0.000011408 seconds
Update interval : 0.1 seconds
Leap status     : Normal
`

func TestParseChronyTracking(t *testing.T) {
	tests := []struct {
		sys    string
		want   int64
		ok     bool
		errHas string
	}{
		{"0.000003494 seconds slow of NTP time", -3494, true, ""},
		{"0.000000120 seconds fast of NTP time", 120, true, ""},
		{"0.000000000 seconds fast of NTP time", 0, true, ""},
		{"1.500000000 seconds slow of NTP time", -1500000000, true, ""},
		{"0.000003494 seconds early of NTP time", 0, false, "want fast or slow"},
		{"x seconds slow of NTP time", 0, false, "bad number"},
		{"-0.1 seconds slow of NTP time", 0, false, "bad number"},
		{"0.1 seconds slow", 0, false, "unexpected format"},
	}
	for _, tt := range tests {
		t.Run(tt.sys, func(t *testing.T) {
			out := strings.Replace(trackingOut, "%s", tt.sys, 1)
			got, ok, err := parseChronyTracking(out)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v, want one containing %q", err, tt.errHas)
				}
				return
			}
			if err != nil || ok != tt.ok || got != tt.want {
				t.Fatalf("= %d, %v, %v; want %d, %v, nil", got, ok, err, tt.want, tt.ok)
			}
		})
	}
}

func TestParseChronyTrackingUnsynced(t *testing.T) {
	for name, out := range map[string]string{
		"leap": strings.Replace(strings.Replace(trackingOut, "%s", "0.000000000 seconds fast of NTP time", 1),
			"Leap status     : Normal", "Leap status     : Not synchronised", 1),
		"refid": strings.Replace(strings.Replace(trackingOut, "%s", "0.000000000 seconds fast of NTP time", 1),
			"0A4D0001 (10.77.0.1)", "00000000 ()", 1),
		"empty":   "",
		"garbage": "506 Cannot talk to daemon\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok, err := parseChronyTracking(out); ok || err != nil {
				t.Fatalf("ok=%v err=%v, want no reading and no error", ok, err)
			}
		})
	}
}

func FuzzParseChronyTracking(f *testing.F) {
	f.Add(strings.Replace(trackingOut, "%s", "0.000003494 seconds slow of NTP time", 1))
	f.Add("System time : 1e300 seconds fast of NTP time")
	f.Add("System time : NaN seconds fast of NTP time")
	f.Fuzz(func(t *testing.T, s string) {
		v, ok, err := parseChronyTracking(s)
		if err != nil && ok {
			t.Fatalf("error and a reading: %v", err)
		}
		if ok && (v > 1e15 || v < -1e15) {
			t.Fatalf("offset %d ns out of the accepted range", v)
		}
	})
}

func TestParsePTP4LOffset(t *testing.T) {
	tests := []struct {
		line string
		want int64
		ok   bool
	}{
		{"ptp4l[8566.924]: master offset     -16288 s0 freq  -56163 path delay    126138", -16288, true},
		{"ptp4l[8566.924]: master offset         12 s2 freq     +10 path delay      9000", 12, true},
		{"master offset 5 s1 freq +0 path delay 1", 5, true},
		{"ptp4l[8565.860]: port 1: LISTENING to UNCALIBRATED on RS_SLAVE", 0, false},
		{"ptp4l[1.0]: master offset", 0, false},
		{"ptp4l[1.0]: master offset abc s0", 0, false},
		{"ptp4l[1.0]: master offset 12 freq", 0, false},
		{"ptp4l[1.0]: master offset 99999999999999999999 s0", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parsePTP4LOffset(tt.line)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parsePTP4LOffset(%q) = %d, %v; want %d, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParsePTP4LOffset(f *testing.F) {
	f.Add("ptp4l[8566.924]: master offset     -16288 s0 freq  -56163 path delay    126138")
	f.Add("master offset -9223372036854775808 s2")
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := parsePTP4LOffset(s)
		if !ok && v != 0 {
			t.Fatalf("no reading but offset %d", v)
		}
	})
}

// TestPeerConfigValidate: the chrony clients default to every host but
// the server; a list names distinct hosts other than the server.
func TestPeerConfigValidate(t *testing.T) {
	pc := DefaultPeerConfig()
	if got := pc.chronyClients(4); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("default clients of 4 hosts: %v, want [1 2 3]", got)
	}
	for _, tt := range []struct {
		clients []int
		want    string // "" valid, else part of the error
	}{
		{nil, ""},
		{[]int{2}, ""},
		{[]int{1, 3}, ""},
		{[]int{}, "empty list"},
		{[]int{0}, "chrony client 0"},
		{[]int{1, 1}, "chrony client 1"},
		{[]int{4}, "chrony client 4"},
		{[]int{-1}, "chrony client -1"},
	} {
		pc.ChronyClients = tt.clients
		err := pc.Validate(4)
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("clients %v: %v, want %q", tt.clients, err, tt.want)
		}
	}
	pc.ChronyClients = nil
	gc := DefaultGclockConfig()
	gc.Origin = 1e12
	clocks, err := gc.HostClocks(4)
	if err != nil {
		t.Fatal(err)
	}
	noOrigin := slices.Clone(clocks)
	noOrigin[2].OriginRaw = 0
	for _, tt := range []struct {
		clocks []clock.EmulatedConfig
		want   string
	}{
		{clocks, ""},
		{clocks[:3], "clocks: 3, want one per host (4)"},
		{noOrigin, "host 2: no origin_raw"},
	} {
		pc.Clocks = tt.clocks
		err := pc.Validate(4)
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%d clocks: %v, want %q", len(tt.clocks), err, tt.want)
		}
	}
	if _, err := DefaultGclockConfig().HostClocks(4); err == nil {
		t.Error("host clocks without an origin")
	}
}

// TestChronyEveryHost: chrony runs a client on every host but the server,
// pools their readings and notes each client's median (the bench compares
// it with gclock over the same hosts); on emulated clocks every chronyd
// runs on its host's clock through the shim and is judged against the
// clocks' true offsets, which are milliseconds: a chronyd left on the
// machine's clock, or judged against the wrong truth, would be that far
// off.
func TestChronyEveryHost(t *testing.T) {
	if _, err := exec.LookPath("chronyd"); err != nil {
		t.Skip("no chronyd")
	}
	for _, emulated := range []bool{false, true} {
		t.Run(map[bool]string{false: "raw", true: "emulated"}[emulated], func(t *testing.T) {
			if emulated {
				if _, err := exec.LookPath("cc"); err != nil {
					t.Skip("no C compiler for the clock shim (ci/deps.sh installs gcc)")
				}
			}
			l, _ := gclockLab(t, 3)
			pc := DefaultPeerConfig()
			pc.Duration, pc.Warmup = 12*time.Second, 6*time.Second
			if emulated {
				gc := DefaultGclockConfig()
				gc.Seed, gc.Origin = 5, gtime.RawNow()
				var err error
				if pc.Clocks, err = gc.HostClocks(3); err != nil {
					t.Fatal(err)
				}
			}
			res, err := l.runPeers(context.Background(), []string{PeerChrony}, pc)
			if err != nil {
				t.Fatal(err)
			}
			notes := strings.Join(res[0].Notes, "; ")
			t.Logf("chrony: %+v; %s", res[0].Summary, notes)
			for _, h := range []string{"client h1:", "client h2:"} {
				if !strings.Contains(notes, h) {
					t.Errorf("notes %q: no %q", notes, h)
				}
			}
			if res[0].Summary.Evaluations < 20 {
				t.Errorf("%d pooled readings after the warm-up, want at least 20 (two clients, 4 a second, 6 s)", res[0].Summary.Evaluations)
			}
			var maxTrue int64
			for _, r := range res[0].Readings {
				maxTrue = max(maxTrue, abs64(r.TrueNs))
			}
			switch {
			case !emulated && maxTrue != 0:
				t.Errorf("a true offset of %d ns on the machine's clock", maxTrue)
			case emulated && maxTrue < 500_000:
				t.Errorf("true offsets at most %d ns: the clocks drawn do not test the shim", maxTrue)
			case emulated && !strings.Contains(notes, "emulated clocks") || emulated && !strings.Contains(notes, "timing uncertainty"):
				t.Errorf("notes %q: no word of the emulated clocks", notes)
			}
			if p50 := res[0].Summary.ErrorP50Ns; p50 > 20_000 {
				t.Errorf("chrony's median error %d ns: not synchronised to the truth", p50)
			}
		})
	}
}
