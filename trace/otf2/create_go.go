//go:build !(otf2 && cgo)

package otf2

// Available reports whether this build can write OTF2 archives: always (in
// pure Go; a build with -tags otf2 and cgo writes them with libotf2).
const Available = true

// Create opens an OTF2 archive in dir: dir/traces.otf2 (the anchor file),
// dir/traces.def and dir/traces/. An archive already there is replaced;
// other files in dir are left alone.
func Create(dir string, opt Options) (*Writer, error) { return CreateGo(dir, opt) }
