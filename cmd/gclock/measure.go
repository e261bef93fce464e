package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/measure"
)

func init() {
	register("measure", "time distributed operations and one-way latency in global time (seed 003, seed 000 fig. 2)", runMeasure)
}

const measureUsage = `usage:
  gclock measure [flags] [-- COMMAND...]   one node of an execution-time measurement (start it on every node)
  gclock measure latency [flags]           one end of the one-way latency test (ranks 0 and 1)
  gclock measure report [flags] FILE...    analyse the nodes' stamp files: the methods side by side, histograms
  gclock lab measure [flags]               all of it in the lab, against the truth (docs/measure.md)

Every node runs the same command with its own -rank; -peers lists every
node's address by rank (this node listens on its own). Each iteration runs
the operation twice: started at a scheduled global instant (the PGCCS way)
and after a message barrier (the MPI_Barrier way); every start and end is
stamped on the node's own clock and in global time (its daemon's page).
Each node writes its stamps to -o; 'gclock measure report' puts them
together.

A node hears only the nodes of -peers, each from its address; with -key (the
cluster key, the daemons' auth.key_file) every datagram is authenticated.
Peers off loopback need -key, or -insecure on a private network; -op page
needs -key (its server answers 8-KB pages to short requests).

Example, three nodes (run on each, with its rank):
  gclock measure -key /etc/gclock/cluster.key -rank 0 -peers 10.0.0.1:3200,10.0.0.2:3200,10.0.0.3:3200 -op allreduce -o stamps-r0.csv
  gclock measure report -plot dev.png stamps-r*.csv

flags:
`

func runMeasure(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "report":
			return runMeasureReport(args[1:], os.Stdout)
		case "latency":
			return runMeasureNode(args[1:], true)
		}
	}
	return runMeasureNode(args, false)
}

func runMeasureNode(args []string, latency bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := measure.NodeMain(ctx, args, latency, measureUsage, os.Stderr)
	var ue *measure.UsageError
	if errors.As(err, &ue) {
		// Exit 2, and print it once: flag has printed a bad flag already.
		return &usage.Error{Err: ue.Err, Printed: ue.Printed}
	}
	return err
}

const measureReportUsage = `usage: gclock measure report [flags] FILE...

Reads the stamp files of every node (written by gclock measure -o) and
prints the methods side by side as seed 003 presents them: each node's
time to the operation's common end and its deviation from the mean of its
execution in % of the operation (figures 10-14), the share within the
paper's +-1.8% (MPI_Barrier), +-0.24% (hardware barrier) and +-0.04%
(global counter), with global time's bounds; then each node's time to its
own end, and the one-way latency per size. Scheduled executions with a
node more than -late-limit late are left out, as ReproMPI leaves them out,
and counted. Without the lab's truth there are no errors against the true
time (gclock lab measure has them).

flags:
`

func runMeasureReport(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gclock measure report", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), measureReportUsage); fs.PrintDefaults() }
	asJSON := fs.Bool("json", false, "print the result as JSON")
	plotDev := fs.String("plot", "", "draw the deviation histograms into FILE.png or FILE.svg")
	plotLat := fs.String("plot-latency", "", "draw the latency per size into FILE.png or FILE.svg")
	lateLimit := fs.Duration("late-limit", measure.LateLimitNs*time.Nanosecond, "leave out scheduled executions with a node that started more than this late, as ReproMPI does (negative: keep them)")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return usage.Errorf("no stamp files given")
	}
	var all []measure.Stamp
	for _, p := range fs.Args() {
		fi, err := os.Open(p)
		if err != nil {
			return err
		}
		ss, err := measure.ReadStamps(fi, filepath.Base(p))
		fi.Close()
		if err != nil {
			return err
		}
		all = append(all, ss...)
	}
	res, err := measure.AnalyzeWith(all, nil, measure.Options{LateLimitNs: lateLimit.Nanoseconds()})
	if err != nil {
		return err
	}
	if err := measurePlots(res, *plotDev, "", *plotLat); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return measure.WriteMarkdown(stdout, res, nil)
}

func measurePlots(res *measure.Result, dev, errs, lat string) error {
	if dev != "" && len(res.Methods) > 0 {
		if err := measure.PlotDeviations(res, dev); err != nil {
			return err
		}
	}
	if errs != "" && len(res.Methods) > 0 {
		if err := measure.PlotErrors(res, errs); err != nil {
			return err
		}
	}
	if lat != "" {
		if err := measure.PlotLatency(res, lat); err != nil {
			return err
		}
	}
	return nil
}
