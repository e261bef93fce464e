package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"math"
	"os"
	"os/user"
	"strconv"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/gtime"
)

func init() {
	register("now", "print global time with its bounds and the daemon's status", func(args []string) error {
		return runNow(args, os.Stdout, os.Stderr)
	})
}

const nowUsage = `usage: gclock now [-page PATH] [-owner USER] [-json] [-max-width D]
       gclock now -check [-timeout D] [-interval D] [-max-width D] [...]

Reads the global-time page the daemon publishes (a shared-memory file) and
prints global time, its guaranteed bounds [earliest, latest], their width and
the daemon's status. The status is one of synced, degraded (the data
contradicted the daemon's clock model: the bounds are what it still holds
certain, re-acquiring), stale (no update for longer than the page's limit: the
bounds keep widening at the worst-case drift), no-daemon (the daemon closed
the page or its process is gone) and unsynced. Only synced promises that the
truth is inside the bounds.

Exit status: 0 when the reading is synced (and, with -max-width, its bounds
are at most that wide), 1 otherwise (the reading is still printed) or on an
error. With -check, gclock now waits up to -timeout for such a reading,
reading every -interval (the page may not exist yet while the daemon starts),
like chronyc waitsync; it prints the last reading.

The page is refused if someone other than root, you, the -owner user or the
owner of a directory only its owner can write could have written it.

flags:
`

// nowReport is gclock now's JSON output. Bounds are null while unbounded.
// Times are decimal strings of ns: they exceed 2^53, where a JSON number
// read as a double (jq, JavaScript) is rounded. Est, Earliest and Latest are
// the same instants as seconds.nanoseconds (UTC in RFC 3339 on the UTC
// timescale), for people.
type nowReport struct {
	Page        string  `json:"page"`
	EstNs       string  `json:"est_ns"`
	EarliestNs  *string `json:"earliest_ns"`
	LatestNs    *string `json:"latest_ns"`
	WidthNs     *int64  `json:"width_ns"`
	Est         string  `json:"est"`
	Earliest    *string `json:"earliest"`
	Latest      *string `json:"latest"`
	Status      string  `json:"status"`
	Timescale   string  `json:"timescale"`
	DaemonPID   int     `json:"daemon_pid"`
	DaemonAlive bool    `json:"daemon_alive"`
	AgeNs       int64   `json:"age_ns"`
	// Node is the daemon's node id, Reference the node whose clock global
	// time is (0: the daemon did not say).
	Node      uint32 `json:"node"`
	Reference uint32 `json:"reference"`
	// Reason says why the status is not synced when the daemon knows a
	// cause beyond its own sync: "upstream-unsynchronised" (the
	// reference's CLOCK_REALTIME is not synchronised, so no UTC is served).
	Reason string `json:"reason,omitempty"`
}

// nowReading is one read of the page with what gclock now prints.
type nowReading struct {
	t  gtime.Time
	in gtime.Info
}

// good says whether the reading is synced within maxWidth (0: any width);
// if not, why.
func (r nowReading) good(maxWidth time.Duration) (bool, string) {
	if r.t.Status != gtime.StatusSynced {
		return false, fmt.Sprintf("status %s, not synced", r.t.Status)
	}
	if maxWidth > 0 && r.t.Width() > int64(maxWidth) {
		return false, fmt.Sprintf("width %v above -max-width %v", time.Duration(r.t.Width()), maxWidth)
	}
	return true, ""
}

func runNow(args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("now", flag.ContinueOnError)
	fs.SetOutput(stderr)
	page := fs.String("page", "", "`path` of the global-time page (default: $GCLOCK_PAGE, else "+gtime.DefaultPath+")")
	owner := fs.String("owner", "", "trust a page owned by this user (name or uid; the daemon's user)")
	asJSON := fs.Bool("json", false, "print JSON")
	check := fs.Bool("check", false, "wait up to -timeout for a synced reading (exit 1 if none)")
	timeout := fs.Duration("timeout", 30*time.Second, "with -check: how long to wait")
	interval := fs.Duration("interval", 100*time.Millisecond, "with -check: time between reads")
	maxWidth := fs.Duration("max-width", 0, "a reading wider than this (earliest to latest) is not good (0: any width)")
	fs.Usage = func() { fmt.Fprint(stderr, nowUsage); fs.PrintDefaults() }
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usage.Errorf("unexpected argument %q (see gclock now -h)", fs.Arg(0))
	}
	printed := false
	if *asJSON {
		// With -json, a failure before any reading is a JSON object too,
		// so that a script parsing stdout sees why.
		defer func() {
			if isUsage, _ := usage.Is(err); err != nil && !printed && !isUsage {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				enc.Encode(struct {
					Page  string `json:"page"`
					Error string `json:"error"`
				}{*page, err.Error()})
			}
		}()
	}
	if *page == "" {
		// GCLOCK_PAGE, as the MPI library reads it (the Slurm recipe and
		// the Kubernetes DaemonSet put the page elsewhere).
		// %n in it is the node's index in a Slurm job ($SLURM_NODEID).
		*page = gtime.PageFromEnv()
	}
	switch {
	case *timeout <= 0:
		return usage.Errorf("-timeout %v: must be > 0", *timeout)
	case *interval <= 0:
		return usage.Errorf("-interval %v: must be > 0", *interval)
	case *maxWidth < 0:
		return usage.Errorf("-max-width %v: must be >= 0", *maxWidth)
	}
	var opts gtime.OpenOptions
	if *owner != "" {
		uid, err := lookupUID(*owner)
		if err != nil {
			return fmt.Errorf("-owner %q: %w", *owner, err)
		}
		opts.Owner = uid
	}
	show := func(rd nowReading) error { printed = true; return printNow(stdout, *page, rd, *asJSON) }
	if !*check {
		r, err := gtime.OpenWith(*page, opts)
		if err != nil {
			return fmt.Errorf("%w (hint: start gclock daemon, or pass -page)", err)
		}
		defer r.Close()
		rd, err := readNow(r)
		if err != nil {
			return err
		}
		if err := show(rd); err != nil {
			return err
		}
		if ok, why := rd.good(*maxWidth); !ok {
			return fmt.Errorf("%s (%s)", why, *page)
		}
		return nil
	}
	deadline := time.Now().Add(*timeout)
	var r *gtime.Reader
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	var last *nowReading
	var why string
	for {
		var err error
		if r == nil {
			r, err = gtime.OpenWith(*page, opts)
			if err != nil && !errors.Is(err, iofs.ErrNotExist) {
				return err // not a page, or refused: waiting will not help
			}
		}
		if r != nil {
			rd, err := readNow(r)
			if err != nil {
				why = err.Error() // e.g. a page being replaced: read again
			} else {
				last = &rd
				var ok bool
				if ok, why = rd.good(*maxWidth); ok {
					return show(rd)
				}
			}
		} else {
			why = err.Error()
		}
		left := time.Until(deadline)
		if left <= 0 {
			if last != nil {
				if err := show(*last); err != nil {
					return err
				}
			}
			return fmt.Errorf("no good reading within -timeout %v: %s (%s)", *timeout, why, *page)
		}
		time.Sleep(min(*interval, left))
	}
}

// readNow reads the page once; a synced, stale or degraded page whose
// writer's process is gone says no-daemon.
func readNow(r *gtime.Reader) (nowReading, error) {
	t, err := r.Now()
	if err != nil {
		return nowReading{}, err
	}
	in, err := r.Info()
	if err != nil {
		return nowReading{}, err
	}
	if t.Status != gtime.StatusUnsynced && t.Status != gtime.StatusNoDaemon && !in.WriterAlive {
		t.Status = gtime.StatusNoDaemon // the writer died without closing the page
	}
	return nowReading{t, in}, nil
}

// lookupUID resolves a user name or numeric uid.
func lookupUID(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("uid must be >= 0")
		}
		return n, nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(u.Uid)
}

func printNow(stdout io.Writer, page string, rd nowReading, asJSON bool) error {
	t, in := rd.t, rd.in
	rep := nowReport{
		Page: page, EstNs: strconv.FormatInt(t.Est, 10), Est: formatGlobal(t.Est, in.Timescale), Status: t.Status.String(), Timescale: in.Timescale.String(),
		DaemonPID: in.WriterPID, DaemonAlive: in.WriterAlive, AgeNs: int64(in.Age),
		Node: in.Node, Reference: in.Reference,
	}
	if in.UpstreamUnsynced && t.Status != gtime.StatusSynced {
		rep.Reason = "upstream-unsynchronised"
	}
	bounded := t.Earliest != math.MinInt64 && t.Latest != math.MaxInt64
	// A UTC page with no UTC yet (no model, an unsynchronised upstream)
	// has no time to print: its estimate is no date (it would read 1970).
	estText := formatGlobal(t.Est, in.Timescale)
	if in.Timescale.Epoch() && !bounded && t.Status != gtime.StatusSynced && t.Status != gtime.StatusDegraded {
		estText = "none (no UTC yet)"
		rep.Est = estText
	}
	if bounded {
		w := t.Width()
		e, l := strconv.FormatInt(t.Earliest, 10), strconv.FormatInt(t.Latest, 10)
		ef, lf := formatGlobal(t.Earliest, in.Timescale), formatGlobal(t.Latest, in.Timescale)
		rep.EarliestNs, rep.LatestNs, rep.WidthNs = &e, &l, &w
		rep.Earliest, rep.Latest = &ef, &lf
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "global time  %s (%s timescale)\n", estText, in.Timescale)
	if bounded {
		fmt.Fprintf(stdout, "earliest     %s (%s)\n", formatGlobal(t.Earliest, in.Timescale), signedDur(t.Earliest-t.Est))
		fmt.Fprintf(stdout, "latest       %s (%s)\n", formatGlobal(t.Latest, in.Timescale), signedDur(t.Latest-t.Est))
		fmt.Fprintf(stdout, "width        %v\n", time.Duration(t.Width()))
	} else if rep.Reason != "" {
		fmt.Fprintf(stdout, "bounds       unbounded (no UTC: see reason)\n")
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
	if rep.Reason != "" {
		fmt.Fprintf(stdout, "reason       %s: the reference's CLOCK_REALTIME is not synchronised to UTC (its kernel says "+
			"STA_UNSYNC: is its NTP daemon running and tracking a source?)\n", rep.Reason)
	}
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
