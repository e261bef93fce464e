// Package conf is the floor under every YAML configuration of gclock: the
// one Duration (written with its unit, "250ms"), and the tools the
// sections' owners share (the engine's sync:/engine: section in
// engine/engineconf, the emulated clock in clock, the link model in
// netmodel, the daemon's and the simulator's files).
//
// It imports nothing of gclock, so every package may use it.
package conf
