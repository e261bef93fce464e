// Package lab runs experiments on a cluster on one Linux machine, with the
// truth known: package netlab builds the network (every host a network
// namespace, every link through a userspace switch that delays, jitters,
// drops and reorders frames; one kernel clock, so the true offset between
// any two hosts is exactly 0), and whatever a clock synchronization program
// run on it reports as an offset is therefore its error.
//
// Most callers want the CLI (`gclock lab`, see docs/lab.md). From Go:
//
//	cfg := netlab.DefaultConfig()            // 4 hosts, 100us +- 50us pareto each way
//	l, err := lab.Up(ctx, cfg)               // a netlab.Lab with the experiments as methods
//	if err != nil { ... }
//	defer l.Down()
//	res, _ := l.RunGclock(ctx, lab.DefaultGclockConfig())  // a daemon per host, evaluated
//
// The experiments, a file set each (docs/lab.md lists them); `gclock lab
// bench` is package lab/bench, its profiles and targets with it.
//
// # Names
//
// A run that builds its own lab takes a Spec and gives a Report: Run
// (RunSpec, RunReport), Measure (MeasureSpec, MeasureReport), bench.Run.
// An experiment on a running lab is a method of Lab that takes a Config
// and gives a Result: RunGclock (GclockConfig, GclockResult), RunSpoof
// (SpoofConfig, SpoofResult), runMeasure (measureConfig, MeasureResult).
// A Default* function gives each its defaults.
//
// # Peers
//
// Run's peers (RunSpec.Peers) are chronyd (-x: never touches the clock; client with xleave,
// minpoll/maxpoll -4; kernel timestamps, which chronyc ntpdata confirms) and
// ptp4l (-S software timestamps, UDP IPv4, free_running 1) between two
// hosts (RunSpec.Peer), each instance with its own directory under Config.RunDir for its
// config, sockets and log. chrony's estimate is `chronyc tracking`'s
// "System time"; ptp4l's is its "master offset". Their readings after the
// warm-up are condensed by eval.SummarizeErrors into the fields `gclock
// sim --json` uses.
//
// # The gclock daemons
//
// Lab.Exec starts any command in a host namespace and tracks it until
// Down. RunGclock starts one `gclock daemon` per host, each with an
// emulated clock only the evaluator knows, and evaluates every host's
// shared-memory page against the truth on the shared kernel clock, with
// package eval as the simulator does; GclockConfig.Measurements has the daemons log every exchange
// (log.measurements) for analysis after the run.
package lab
