// Command gclock is a global clock for clusters: it simulates, runs and
// measures clock synchronization, and puts traces on one timeline.
//
// Each subcommand lives in its own file of this package and registers itself
// with register in an init function. main.go holds what every command shares:
// dispatch, help (on stdout when asked for, on stderr after a usage error),
// `gclock help CMD`, `gclock version` and `gclock completion SHELL`
// (completion.go), both built from the registered commands.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/gclock/gclock/cmd/internal/buildinfo"
	"github.com/gclock/gclock/cmd/internal/usage"
)

// command is one gclock subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string) error
}

var commands = map[string]command{}

// register adds a subcommand; called from init functions.
func register(name, summary string, run func(args []string) error) {
	if _, dup := commands[name]; dup {
		panic("gclock: subcommand registered twice: " + name)
	}
	commands[name] = command{name, summary, run}
}

func init() {
	register("help", "show the help of gclock or of a command (gclock help CMD)", func(args []string) error {
		return runHelp(args, os.Stdout)
	})
	register("version", "print gclock's version, VCS revision and Go version", func(args []string) error {
		return runVersion(args, os.Stdout, os.Stderr)
	})
}

// commandNames returns the registered commands, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func mainUsage() string {
	var b strings.Builder
	b.WriteString("usage: gclock <command> [flags] [args]\n\ncommands:\n")
	width := 0
	for n := range commands {
		width = max(width, len(n))
	}
	for _, n := range commandNames() {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, n, commands[n].summary)
	}
	b.WriteString("\nRun 'gclock help <command>' (or 'gclock <command> -h') for a command's flags.\n")
	b.WriteString("Docs: README.md and docs/ in https://github.com/gclock/gclock\n")
	return b.String()
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes one command line and returns the exit code: 0, 1 when the
// command failed, 2 for a usage error (no or unknown command).
func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, mainUsage())
		return 2
	}
	if isHelpFlag(args[0]) {
		fmt.Fprint(os.Stdout, mainUsage())
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "gclock: unknown command %q (run 'gclock help' for the list)\n", args[0])
		if s := suggest(args[0]); s != "" {
			fmt.Fprintf(os.Stderr, "did you mean 'gclock %s'?\n", s)
		}
		return 2
	}
	if wantsHelp(args[1:]) {
		// gclock CMD -h: the command prints its usage on stderr, as after a
		// bad flag; help asked for goes to stdout.
		text, err := helpText(c, args[1:])
		if err != nil {
			fmt.Fprint(os.Stderr, text)
			if isUsage, printed := usage.Is(err); isUsage {
				if !printed {
					fmt.Fprintf(os.Stderr, "gclock %s: %v\n", c.name, err)
				}
				return usage.ExitCode
			}
			fmt.Fprintf(os.Stderr, "gclock %s: %v\n", c.name, err)
			return 1
		}
		fmt.Fprint(os.Stdout, text)
		return 0
	}
	if err := c.run(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		// A usage error is printed once (flag prints its own with the
		// command's usage) and exits 2; a failed command exits 1.
		isUsage, printed := usage.Is(err)
		if !printed {
			fmt.Fprintf(os.Stderr, "gclock %s: %v\n", c.name, err)
		}
		if isUsage {
			return usage.ExitCode
		}
		return 1
	}
	return 0
}

func isHelpFlag(s string) bool { return s == "-h" || s == "-help" || s == "--help" }

// wantsHelp reports whether a command's arguments ask for its help: a -h
// flag before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// captureMu serializes helpText, which swaps os.Stdout and os.Stderr.
var captureMu sync.Mutex

// helpText runs a command with args (which ask for help; -h is appended if
// they do not) and returns what it printed. Commands print their usage
// wherever they print errors (os.Stderr, read when they run), so the
// process's stdout and stderr are swapped for a pipe while the command runs.
// The error is nil when the command only printed its help.
func helpText(c command, args []string) (string, error) {
	if !wantsHelp(args) {
		args = append(append([]string(nil), args...), "-h")
	}
	captureMu.Lock()
	defer captureMu.Unlock()
	r, w, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("capturing the help of %s: %w", c.name, err)
	}
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&buf, r); close(done) }()
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = w, w
	err = c.run(args)
	os.Stdout, os.Stderr = stdout, stderr
	w.Close()
	<-done
	r.Close()
	if errors.Is(err, flag.ErrHelp) {
		err = nil
	}
	return buf.String(), err
}

const helpUsage = `usage: gclock help [COMMAND [SUBCOMMAND]]

Prints the help of gclock (the list of commands) or of one command, with its
flags, on stdout. 'gclock help lab bench' is 'gclock lab bench -h'.
`

// runHelp is `gclock help [CMD [SUB...]]`.
func runHelp(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, mainUsage())
		return nil
	}
	if isHelpFlag(args[0]) || args[0] == "help" {
		fmt.Fprint(stdout, helpUsage)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		hint := "run 'gclock help' for the list"
		if s := suggest(args[0]); s != "" {
			hint = fmt.Sprintf("did you mean %q?", s)
		}
		return usage.Errorf("unknown command %q (%s)", args[0], hint)
	}
	text, err := helpText(c, args[1:])
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	fmt.Fprint(stdout, text)
	return nil
}

// suggest returns the registered command closest to a mistyped one (a
// prefix, or one or two edits away), or "".
func suggest(name string) string {
	best, bestD := "", 3
	for _, n := range commandNames() {
		if len(name) >= 2 && strings.HasPrefix(n, name) {
			return n
		}
		if d := editDistance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

const versionUsage = `usage: gclock version [-json]

Prints the version of this gclock binary: the module version (v1.2.3 from
'go install ...@v1.2.3', a pseudo-version or (devel) from 'go build'), the VCS
revision and commit time it was built from, and the Go toolchain and platform.

flags:
`

// runVersion is `gclock version`.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { fmt.Fprint(stderr, versionUsage); fs.PrintDefaults() }
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usage.Errorf("unexpected argument %q (see gclock version -h)", fs.Arg(0))
	}
	in := buildinfo.Read()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(in)
	}
	in.Fprint(stdout, "gclock")
	return nil
}
