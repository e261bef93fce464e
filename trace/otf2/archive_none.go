//go:build !(otf2 && cgo)

package otf2

// Available reports whether this build can write OTF2 archives.
const Available = false

// Create would open an archive in dir; this build has no libotf2, so it
// returns ErrNotBuilt.
func Create(dir string, opt Options) (*Writer, error) { return nil, ErrNotBuilt }
