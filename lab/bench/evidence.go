package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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
	evidencePeers   = "peers.csv"  // the peers' readings: t_s,peer,offset_ns,true_ns
	evidenceFrames  = "frames.csv" // the switch's frame log, with --frame-log
	evidenceBench   = "bench.json" // in --keep itself: the whole report, as --json prints it
)

// runEvidenceName is the directory of one run under --keep.
func runEvidenceName(profile string, seed uint64) string {
	return fmt.Sprintf("%s-seed%d", profile, seed)
}

// evidence is run.json: one run of the bench with the command that made
// it.
type evidence struct {
	Command string `json:"command"`
	Machine string `json:"machine"`
	Error   string `json:"error,omitempty"` // the run did not finish: why
	Row
}

// keepRunEvidence fills dir (made if missing) with one run's evidence:
// run.json, the peers' readings and every file the lab left in runDir (the
// daemons' configs, logs, measurements and state files, the peers'
// configs and logs) but the shared-memory pages, pid files and sockets.
// The series (and the frame log) are written there by the run itself.
// A run that failed keeps what it left.
func keepRunEvidence(dir string, ev evidence, rep lab.RunReport, runDir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: --keep: %w", err)
	}
	var errs []error
	if err := writeJSONFile(filepath.Join(dir, evidenceRunJSON), ev); err != nil {
		errs = append(errs, err)
	}
	if len(rep.Peers) > 0 {
		if err := writePeerReadings(filepath.Join(dir, evidencePeers), rep.Peers); err != nil {
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
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		f.Close()
		return fmt.Errorf("bench: --keep: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: --keep: %w", err)
	}
	return nil
}

// writePeerReadings writes every reading of the peers (chronyd's system
// time offset, ptp4l's master offset) and its true offset (0 on the
// machine's clock; the emulated clocks' offset where chronyd ran on them)
// as CSV, in time order per peer: offset_ns - true_ns is the error.
func writePeerReadings(path string, peers []lab.PeerResult) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: --keep: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "t_s,peer,offset_ns,true_ns")
	for _, p := range peers {
		for _, r := range p.Readings {
			fmt.Fprintf(w, "%.3f,%s,%d,%d\n", float64(r.AtNs)/1e9, p.Peer, r.OffsetNs, r.TrueNs)
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
