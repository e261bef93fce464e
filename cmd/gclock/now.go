package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/gclock/gclock/gtime"
)

func init() {
	register("now", "print global time with its bounds and the daemon's status", func(args []string) error {
		return runNow(args, os.Stdout, os.Stderr)
	})
}

const nowUsage = `usage: gclock now [-page PATH] [-json]

Reads the global-time page the daemon publishes (a shared-memory file) and
prints global time, its guaranteed bounds [earliest, latest], their width and
the daemon's status. The status is one of synced, stale (no update for longer
than the page's limit: the bounds keep widening at the worst-case drift),
no-daemon (the daemon closed the page or its process is gone) and unsynced.

flags:
`

// nowReport is gclock now's JSON output. Bounds are null while unbounded.
type nowReport struct {
	Page        string `json:"page"`
	EstNs       int64  `json:"est_ns"`
	EarliestNs  *int64 `json:"earliest_ns"`
	LatestNs    *int64 `json:"latest_ns"`
	WidthNs     *int64 `json:"width_ns"`
	Status      string `json:"status"`
	Timescale   string `json:"timescale"`
	DaemonPID   int    `json:"daemon_pid"`
	DaemonAlive bool   `json:"daemon_alive"`
	AgeNs       int64  `json:"age_ns"`
	// Node is the daemon's node id, Reference the node whose clock global
	// time is (0: the daemon did not say).
	Node      uint32 `json:"node"`
	Reference uint32 `json:"reference"`
}

func runNow(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("now", flag.ContinueOnError)
	fs.SetOutput(stderr)
	page := fs.String("page", "", "`path` of the global-time page (default: $GCLOCK_PAGE, else "+gtime.DefaultPath+")")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() { fmt.Fprint(stderr, nowUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q (see gclock now -h)", fs.Arg(0))
	}
	if *page == "" {
		// GCLOCK_PAGE, as the MPI library reads it (the Slurm recipe and
		// the Kubernetes DaemonSet put the page elsewhere).
		*page = cmp.Or(os.Getenv("GCLOCK_PAGE"), gtime.DefaultPath)
	}
	r, err := gtime.Open(*page)
	if err != nil {
		return fmt.Errorf("%w (hint: start gclock daemon, or pass -page)", err)
	}
	defer r.Close()
	t, err := r.Now()
	if err != nil {
		return err
	}
	in, err := r.Info()
	if err != nil {
		return err
	}
	if (t.Status == gtime.StatusSynced || t.Status == gtime.StatusStale) && !in.WriterAlive {
		t.Status = gtime.StatusNoDaemon // the writer died without closing the page
	}
	rep := nowReport{
		Page: *page, EstNs: t.Est, Status: t.Status.String(), Timescale: in.Timescale.String(),
		DaemonPID: in.WriterPID, DaemonAlive: in.WriterAlive, AgeNs: int64(in.Age),
		Node: in.Node, Reference: in.Reference,
	}
	bounded := t.Earliest != math.MinInt64 && t.Latest != math.MaxInt64
	if bounded {
		w := t.Width()
		rep.EarliestNs, rep.LatestNs, rep.WidthNs = &t.Earliest, &t.Latest, &w
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "global time  %s (%s timescale)\n", formatGlobal(t.Est, in.Timescale), in.Timescale)
	if bounded {
		fmt.Fprintf(stdout, "earliest     %s (%s)\n", formatGlobal(t.Earliest, in.Timescale), signedDur(t.Earliest-t.Est))
		fmt.Fprintf(stdout, "latest       %s (%s)\n", formatGlobal(t.Latest, in.Timescale), signedDur(t.Latest-t.Est))
		fmt.Fprintf(stdout, "width        %v\n", time.Duration(t.Width()))
	} else {
		fmt.Fprintf(stdout, "bounds       unbounded (no estimate yet)\n")
	}
	daemon := "closed the page"
	if in.WriterPID != 0 {
		daemon = fmt.Sprintf("pid %d, not running", in.WriterPID)
		if in.WriterAlive {
			daemon = fmt.Sprintf("pid %d", in.WriterPID)
		}
	}
	fmt.Fprintf(stdout, "status       %s (daemon %s; page updated %v ago, stale after %v)\n",
		t.Status, daemon, in.Age.Round(time.Microsecond), in.StaleAfter)
	if in.Reference != 0 {
		fmt.Fprintf(stdout, "reference    node %d (this daemon: node %d)\n", in.Reference, in.Node)
	}
	return nil
}

// formatGlobal prints a global time: seconds.nanoseconds on the reference
// timescale, UTC on the real-time one.
func formatGlobal(ns int64, ts gtime.Timescale) string {
	if ts.Epoch() {
		return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000000000Z")
	}
	if ns == math.MinInt64 {
		return "-inf"
	}
	sign := ""
	if ns < 0 {
		sign, ns = "-", -ns
	}
	return fmt.Sprintf("%s%d.%09d s", sign, ns/1e9, ns%1e9)
}

func signedDur(d int64) string {
	if d >= 0 {
		return "+" + time.Duration(d).String()
	}
	return time.Duration(d).String()
}
