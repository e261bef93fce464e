package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// runCaptured runs one command line in-process and returns its exit code,
// stdout and stderr.
func runCaptured(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outW, errW
	outC, errC := make(chan string), make(chan string)
	go func() { b, _ := io.ReadAll(outR); outC <- string(b) }()
	go func() { b, _ := io.ReadAll(errR); errC <- string(b) }()
	code := run(args)
	os.Stdout, os.Stderr = stdout, stderr
	outW.Close()
	errW.Close()
	return code, <-outC, <-errC
}

// TestExitCodes: usage errors exit 2 and are printed once; help exits 0 on
// stdout; --version is version. (issue 19: every bad flag exited 1 and printed
// its error twice; `gclock help bogus` exited 1; `gclock ntp-query` with no
// host printed "gclock ntp-query: gclock ntp-query: ...".)
func TestExitCodes(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stderr string // printed exactly once
		stdout string
	}{
		{[]string{"now", "-nosuchflag"}, 2, "flag provided but not defined: -nosuchflag", ""},
		{[]string{"sim", "-nosuchflag"}, 2, "flag provided but not defined: -nosuchflag", ""},
		{[]string{"merge", "-method"}, 2, "flag needs an argument: -method", ""},
		{[]string{"daemon", "-nosuchflag"}, 2, "flag provided but not defined: -nosuchflag", ""},
		{[]string{"daemon", "extra"}, 2, `gclock daemon: unexpected argument "extra"`, ""},
		{[]string{"lab", "bench", "-nosuchflag"}, 2, "flag provided but not defined: -nosuchflag", ""},
		{[]string{"help", "bogus"}, 2, `gclock help: unknown command "bogus"`, ""},
		{[]string{"bogus"}, 2, `gclock: unknown command "bogus"`, ""},
		{[]string{"ntp-query"}, 2, "gclock ntp-query: want one server", ""},
		{[]string{"version", "extra"}, 2, `gclock version: unexpected argument "extra"`, ""},
		// issue 29: measure's usage errors exited 1 and a bad flag printed
		// twice; lab's unknown subcommand and completion's arguments exited 1.
		{[]string{"measure", "-nosuchflag"}, 2, "flag provided but not defined: -nosuchflag", ""},
		{[]string{"measure", "latency", "-nosuchflag"}, 2, "flag provided but not defined: -nosuchflag", ""},
		{[]string{"measure"}, 2, "gclock measure: -peers: empty", ""},
		{[]string{"measure", "-peers", "10.0.0.1:3200,10.0.0.2:3200", "-rank", "5"}, 2, "gclock measure: rank 5: want 0..1", ""},
		{[]string{"measure", "extra"}, 2, `gclock measure: unexpected argument "extra"`, ""},
		{[]string{"measure", "report"}, 2, "gclock measure: no stamp files given", ""},
		{[]string{"lab", "nosuchsub"}, 2, `gclock lab: unexpected argument "nosuchsub"`, ""},
		{[]string{"completion"}, 2, "gclock completion: want one shell", ""},
		{[]string{"completion", "bash", "zsh"}, 2, "gclock completion: want one shell", ""},
		{[]string{"completion", "bogus"}, 2, `gclock completion: unknown shell "bogus"`, ""},
		{[]string{"--version"}, 0, "", "gclock"},
		{[]string{"help", "now"}, 0, "", "usage: gclock now"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCaptured(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, stderr)
			}
			if tt.stderr != "" {
				if n := strings.Count(stderr, tt.stderr); n != 1 {
					t.Errorf("stderr has %q %d times, want once:\n%s", tt.stderr, n, stderr)
				}
				if strings.Contains(stderr, "gclock ntp-query: gclock ntp-query") {
					t.Errorf("doubled prefix: %s", stderr)
				}
			} else if code == 0 && stderr != "" {
				t.Errorf("stderr %q, want nothing", stderr)
			}
			if !strings.Contains(stdout, tt.stdout) {
				t.Errorf("stdout %q, want %q in it", stdout, tt.stdout)
			}
		})
	}
}
