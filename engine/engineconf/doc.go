// Package engineconf is the YAML schema of the engine's parameters, shared
// by the simulator's scenarios (the engine: section) and the daemon's
// configuration (the sync: section), so both accept the same keys with the
// same meaning.
//
// Config holds the keys, with units in their names (_ppm) or in their
// values (conf's Duration: "250ms", "2s"), each bound by its engine tag to
// the engine.Config field it sets; Default gives the engine's own defaults
// and ToEngine, the one conversion out of the section, the engine.Config,
// both by walking those tags. The package keeps no rules of its own: Check
// and Validate run engine.Config.Check on the conversion and say what it
// finds in the file's words (the key, its unit). A new engine parameter is
// a field of engine.Config (with its default in engine.DefaultConfig and
// its range in Check) and one tagged field of Config. Files are read with
// the house's strict decoder (internal/conf): unknown fields are refused
// and every error names the field path and the line.
//
// A section may start from a shipped sync profile (deploy/profiles:
// precise, frugal), a YAML fragment of these keys embedded in the binary:
// `profile: precise` reads the profile's keys first and the keys written
// beside it over them (Config.UnmarshalConf); Profile and ApplyProfile do
// the same from Go (the lab, the daemon's -profile flag).
//
//	var c engineconf.Config = engineconf.Default()
//	// ... decode YAML into c ...
//	cfg, err := c.ToEngine() // then set ID, Sources, Children
package engineconf
