package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gclock/gclock/lab"
)

// The evidence `gclock lab bench` keeps of every run, one directory per run
// under --keep (docs/lab.md, "What a bench keeps"): enough to take a run
// that missed a target apart afterwards (gclock lab replay on the
// measurements, docs/lab_breakdown.py on the frame log, the series against
// the daemons' logs).
const (
	evidenceRunJSON = "run.json"   // the run: profile, seed, gclock lab --json's report, the target checks
	evidenceSeries  = "series.csv" // the evaluator's series, as gclock lab --series writes it
	evidencePeers   = "peers.csv"  // the peers' readings: t_s,peer,offset_ns
	evidenceFrames  = "frames.csv" // the switch's frame log, with --frame-log
	evidenceBench   = "bench.json" // in --keep itself: the whole report, as --json prints it
)

// keepNone is the --keep value that keeps nothing.
const keepNone = "none"

// keepDir is where a bench keeps its runs' evidence: keep as given, or
// (keep "") beside the report file out (bench.md -> bench.d), or, without
// -o, lab-bench-<UTC time>.d in the current directory; "" for --keep none.
func keepDir(keep, out string, now time.Time) string {
	switch {
	case keep == keepNone:
		return ""
	case keep != "":
		return keep
	case out != "":
		return strings.TrimSuffix(out, filepath.Ext(out)) + ".d"
	}
	return "lab-bench-" + now.UTC().Format("20060102T150405Z") + ".d"
}

// runEvidenceName is the directory of one run under --keep.
func runEvidenceName(profile string, seed uint64) string {
	return fmt.Sprintf("%s-seed%d", profile, seed)
}

// labBenchEvidence is run.json: one run of the bench with the command that
// made it.
type labBenchEvidence struct {
	Command string `json:"command"`
	Machine string `json:"machine"`
	Error   string `json:"error,omitempty"` // the run did not finish: why
	labBenchRun
}

// keepRunEvidence fills dir (made if missing) with one run's evidence:
// run.json, the peers' readings and every file the lab left in runDir (the
// daemons' configs, logs, measurements and state files, the peers'
// configs and logs) but the shared-memory pages, pid files and sockets.
// The series (and the frame log) are written there by the run itself.
// m may be partial: a run that failed keeps what it left.
func keepRunEvidence(dir string, ev labBenchEvidence, m labMeasurement, runDir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: --keep: %w", err)
	}
	var errs []error
	if err := writeJSONFile(filepath.Join(dir, evidenceRunJSON), ev); err != nil {
		errs = append(errs, err)
	}
	if len(m.peers) > 0 {
		if err := writePeerReadings(filepath.Join(dir, evidencePeers), m.peers); err != nil {
			errs = append(errs, err)
		}
	}
	if runDir != "" {
		if err := copyRunFiles(runDir, dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func writeJSONFile(path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: --keep: %w", err)
	}
	if err := labWriteJSON(f, v); err != nil {
		f.Close()
		return fmt.Errorf("bench: --keep: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: --keep: %w", err)
	}
	return nil
}

// writePeerReadings writes every reading of the peers (chronyc tracking's
// system time offset, ptp4l's master offset; the true offset is 0) as CSV,
// in time order per peer.
func writePeerReadings(path string, peers []lab.PeerResult) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: --keep: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "t_s,peer,offset_ns")
	for _, p := range peers {
		for _, r := range p.Readings {
			fmt.Fprintf(w, "%.3f,%s,%d\n", float64(r.AtNs)/1e9, p.Peer, r.OffsetNs)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("bench: --keep: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: --keep: %w", err)
	}
	return nil
}

// skipEvidence says whether a file the lab left is not evidence: a
// daemon's shared-memory page (page-h<i>: the last instant's mapping, and
// not a file to read back), a pid file.
func skipEvidence(name string) bool {
	return strings.HasPrefix(name, "page-") || strings.HasSuffix(name, ".pid")
}

// copyRunFiles copies the regular files under src (the lab's run
// directory) into dst, keeping the layout (gclock/, chrony-h0/, ...);
// sockets and other special files are left, and so are those skipEvidence
// names.
func copyRunFiles(src, dst string) error {
	var errs []error
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || skipEvidence(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if err := copyFile(path, filepath.Join(dst, rel)); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: --keep: copying the run's files from %s: %w", src, err)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", dst, err)
	}
	return out.Close()
}

// clearDir removes everything inside dir, keeping dir.
func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// evidenceLink is how the report at reportFile links a run's evidence
// directory: relative to the report's directory when it can be, else as
// given; "" without evidence.
func evidenceLink(reportFile, evDir string) string {
	if evDir == "" {
		return ""
	}
	if reportFile == "" {
		return filepath.ToSlash(evDir) + "/"
	}
	base, err1 := filepath.Abs(filepath.Dir(reportFile))
	target, err2 := filepath.Abs(evDir)
	if err1 != nil || err2 != nil {
		return filepath.ToSlash(evDir) + "/"
	}
	rel, err := filepath.Rel(base, target)
	if err != nil {
		return filepath.ToSlash(target) + "/"
	}
	return filepath.ToSlash(rel) + "/"
}
