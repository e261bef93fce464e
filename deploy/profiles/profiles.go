// Package profiles holds gclock's shipped sync profiles: YAML fragments of
// the engine's settings (the keys of a daemon config's sync: section and a
// scenario's engine: section), one file a profile, embedded in the binary.
// A config selects one with `profile: NAME` in that section; package
// engine/engineconf reads it (engineconf.Profile, Config.ApplyProfile), so
// the daemon, the lab and the simulator run the same file.
//
//	precise.yaml  the lab's settings: 240 exchanges a round, the figures of the README
//	frugal.yaml   few packets: the production example's settings
//
// docs/operations.md, "Sync profiles", gives each one's measured accuracy,
// bound width and packets per second.
package profiles

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Names lists the shipped profiles, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Read returns the YAML of profile name (deploy/profiles/NAME.yaml).
func Read(name string) ([]byte, error) {
	if !slices.Contains(Names(), name) {
		return nil, fmt.Errorf("unknown profile %q (%s)", name, strings.Join(Names(), ", "))
	}
	return files.ReadFile(name + ".yaml")
}
