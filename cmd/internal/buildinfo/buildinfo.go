// Package buildinfo says which gclock a binary is: the module version, the
// VCS revision and time it was built from, and the Go version, as the Go
// toolchain recorded them in the binary (runtime/debug.ReadBuildInfo).
//
// `go install github.com/gclock/gclock/cmd/gclock@v1.2.3` records v1.2.3 and
// the revision; `go build` in a git checkout records a pseudo-version and the
// revision (with -buildvcs=false, or outside a checkout, neither is known and
// Read says "unknown").
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Info describes the running binary.
type Info struct {
	Path      string `json:"path"`     // the main package's import path
	Module    string `json:"module"`   // the main module's path
	Version   string `json:"version"`  // module version, "(devel)" for a local build
	Revision  string `json:"revision"` // VCS revision, "" if not recorded
	Time      string `json:"time"`     // VCS commit time (RFC 3339), "" if not recorded
	Modified  bool   `json:"modified"` // the working tree had uncommitted changes
	GoVersion string `json:"go"`       // the toolchain that built the binary
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// Read returns the running binary's build information.
func Read() Info {
	in := Info{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Version: "(devel)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	in.Path, in.Module, in.GoVersion = bi.Path, bi.Main.Path, bi.GoVersion
	if bi.Main.Version != "" {
		in.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// Short is the version on one line: "v1.2.3 (abcdef123456, go1.26.0)".
func (in Info) Short() string {
	rev := "revision unknown"
	if in.Revision != "" {
		rev = shortRev(in.Revision)
		if in.Modified {
			rev += "+modified"
		}
	}
	return fmt.Sprintf("%s (%s, %s)", in.Version, rev, in.GoVersion)
}

// Fprint writes the information as "key  value" lines under a first line
// "NAME version VERSION".
func (in Info) Fprint(w io.Writer, name string) {
	unknown := func(s string) string {
		if s == "" {
			return "unknown (not recorded: build from a git checkout, or go install ...@version)"
		}
		return s
	}
	rev := unknown(in.Revision)
	if in.Modified {
		rev += " (with uncommitted changes)"
	}
	fmt.Fprintf(w, "%s version %s\n", name, in.Version)
	fmt.Fprintf(w, "  module    %s\n", orDash(in.Module))
	fmt.Fprintf(w, "  revision  %s\n", rev)
	fmt.Fprintf(w, "  time      %s\n", unknown(in.Time))
	fmt.Fprintf(w, "  go        %s %s\n", in.GoVersion, in.Platform)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shortRev(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}
