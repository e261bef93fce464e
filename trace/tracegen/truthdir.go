package tracegen

import (
	"fmt"
	"os"
	"path/filepath"
)

// truthPattern names a process's truth file in a directory (gclock trace
// demo writes them beside the traces, gclock merge -truth reads them).
const truthPattern = "truth-%02d.bin"

// WriteTruthDir writes one truth file per process into dir
// (truth-NN.bin, WriteTruth's format).
func WriteTruthDir(dir string, truth Truth) error {
	for p, tr := range truth {
		path := filepath.Join(dir, fmt.Sprintf(truthPattern, p))
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		err = WriteTruth(f, p, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// ReadTruthDir reads every truth-*.bin file of dir, by process.
func ReadTruthDir(dir string) (Truth, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "truth-*.bin"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no truth-*.bin file in %s (written by gclock trace demo)", dir)
	}
	truth := Truth{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		proc, tr, err := ReadTruth(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		truth[proc] = tr
	}
	return truth, nil
}
