// Package daemon is gclock's per-host daemon: its configuration, its
// Prometheus metrics and (see docs/daemon.md for its state) the run loop
// that drives an engine.Node over transport sockets and publishes global
// time to programs through a gtime page.
//
// # Configuration
//
// One YAML file, usually the same on every host except node.id:
//
//	cfg, err := daemon.Load("/etc/gclock.yaml") // defaults + file, validated
//	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
//	over := daemon.AddFlags(fs)                  // -id, -peers, -estimator, ...
//	fs.Parse(args)
//	err = over.Apply(&cfg)                       // flags given win over the file
//
// Absent fields keep DefaultConfig's values (a three-node star on
// localhost, the engine's Liao defaults, the raw clock, kernel timestamps,
// the page at /run/gclock/page). Units are in the names (drift_ppm,
// max_slew_ppm) or in the values: durations need a unit ("250ms"; a bare
// number is an error). Unknown fields are rejected. Every error names its
// field as a YAML path and, for a file, its line:
//
//	line 3: sync.pings_per_round: 0 outside [1, 1000]
//
// Validate reports every bad field at once (errors.Join of *FieldError, all
// wrapping ErrConfig). Config.Roles turns the topology and the reference
// into this node's sources and children (package topology, Jezequel A3),
// and Config.EngineConfig into an engine.Config.
//
// # Metrics
//
// With metrics.listen set, Run serves a private Prometheus registry whose
// one collector builds every metric at scrape time from a Snapshot
// (node_exporter's timex collector does the same), in base units:
// gclock_offset_seconds,
// gclock_max_error_seconds, gclock_frequency_adjustment_ratio,
// gclock_sync_messages_total{type,direction} and a few more; the exact
// exposition is pinned by testdata/metrics.golden.
package daemon
