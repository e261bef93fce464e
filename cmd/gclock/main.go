// Command gclock is a global clock for clusters: it simulates, runs and
// measures clock synchronization, and puts traces on one timeline.
//
// Each subcommand lives in its own file of this package and registers itself
// with register in an init function.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
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

func usage() string {
	var b strings.Builder
	b.WriteString("usage: gclock <command> [flags] [args]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	b.WriteString("\nRun 'gclock <command> -h' for a command's flags.\n")
	return b.String()
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes one command line and returns the exit code.
func run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(os.Stderr, usage())
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "gclock: unknown command %q\n\n%s", args[0], usage())
		return 2
	}
	if err := c.run(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "gclock %s: %v\n", c.name, err)
		return 1
	}
	return 0
}
