// Package engineconf is the YAML schema of the engine's parameters, shared
// by the simulator's scenarios (the engine: section) and the daemon's
// configuration (the sync: section), so both accept the same keys with the
// same meaning.
//
// Config holds the keys, with units in their names (_ppm) or in their
// values (conf's Duration: "250ms", "2s"), each bound by its engine tag to
// the engine.Config field it sets; Default gives the engine's own defaults
// and ToEngine, the one conversion out of the section, the engine.Config,
// both by walking those tags; Check and Validate name the bad field. A new
// engine parameter is a field of engine.Config (with its default in
// engine.DefaultConfig) and one tagged field of Config. Files are read
// with the house's strict decoder (internal/conf): unknown fields are
// refused and every error names the field path and the line.
//
//	var c engineconf.Config = engineconf.Default()
//	// ... decode YAML into c ...
//	cfg, err := c.ToEngine() // then set ID, Sources, Children
package engineconf
