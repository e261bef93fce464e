package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/trace/causality"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/timeline"
)

func init() {
	register("mpirun", "run an MPI job traced by libgclockmpi and merge its ranks into one corrected trace (as ITAC's mpirun -trace)", runMPIRun)
}

const mpirunUsage = `usage: gclock mpirun [flags] [mpirun args] [--] PROGRAM [ARGS]

Runs the job with OpenMPI's mpirun, every rank with libgclockmpi preloaded
(LD_PRELOAD) and tracing into DIR/ranks (GCLOCK_MPI_TRACE), then merges the
ranks' traces onto global time (the daemon's mappings where the ranks had a
gclock page, else the library's own sync sessions with rank 0; -method),
with the controlled logical clock, into one Perfetto trace DIR/trace.pftrace
(ui.perfetto.dev) and one OTF2 archive
DIR/otf2/traces.otf2 (Vampir, Scalasca). It says one line for the job on
stderr; the merge's full report is DIR/merge.txt. The program's own output
passes through. gclock's flags come first, before mpirun's:

  gclock mpirun -out run1 -np 4 --hostfile hosts -- ./app input.dat

flags:
`

// mpirunFlags are gclock mpirun's flags that take a value: the first
// argument that is none of them (nor a boolean one) starts mpirun's.
var mpirunFlags = map[string]bool{"out": true, "lib": true, "method": true, "mpirun": true, "h": false, "help": false}

func runMPIRun(args []string) error { return mpirunCmd(args, os.Stdout, os.Stderr) }

func mpirunCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mpirun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), mpirunUsage); fs.PrintDefaults() }
	out := fs.String("out", "gclock-mpirun", "directory for the ranks' traces (DIR/ranks), the merged traces and the merge's report")
	lib := fs.String("lib", "", "libgclockmpi.so to preload (default: $GCLOCK_MPI_LIB, else next to the gclock executable, in ../lib or ../mpi of it, else ./mpi)")
	method := fs.String("method", "auto", "correction: auto, linear, spline, daemon, offset or none")
	mpirunBin := fs.String("mpirun", "mpirun", "the mpirun to run (OpenMPI's: -x exports the variables)")
	n := 0
	for n < len(args) {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[n], "-"), "=")
		takes, own := mpirunFlags[name]
		if !own || !strings.HasPrefix(args[n], "-") {
			break
		}
		n++
		if takes && !hasValue {
			n++
		}
	}
	if err := usage.Parse(fs, args[:min(n, len(args))]); err != nil {
		return err
	}
	rest := slices.Clone(args[min(n, len(args)):])
	if i := slices.Index(rest, "--"); i >= 0 {
		rest = slices.Delete(rest, i, i+1)
	}
	if len(rest) == 0 {
		return errors.New("mpirun: no program given (usage: gclock mpirun [flags] [mpirun args] [--] PROGRAM [ARGS])")
	}
	m, err := correct.ParseMethod(*method)
	if err != nil {
		return err
	}
	so, err := findMPILib(*lib)
	if err != nil {
		return err
	}
	ranksDir, err := filepath.Abs(filepath.Join(*out, "ranks"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(ranksDir, 0o755); err != nil {
		return fmt.Errorf("mpirun: %w", err)
	}
	// Files of an earlier job with more ranks would be merged with this one's.
	old, _ := filepath.Glob(filepath.Join(ranksDir, "rank-*.gct"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("mpirun: removing an earlier job's trace: %w", err)
		}
	}
	cmd := exec.Command(*mpirunBin, append([]string{"-x", "LD_PRELOAD=" + so, "-x", "GCLOCK_MPI_TRACE=" + ranksDir}, rest...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mpirun: %s: %w (the ranks' traces so far are in %s: gclock merge -keep-going merges them)", *mpirunBin, err, ranksDir)
	}
	paths, _ := filepath.Glob(filepath.Join(ranksDir, "rank-*.gct"))
	if len(paths) == 0 {
		return fmt.Errorf("mpirun: the job wrote no trace into %s (hint: did the program call MPI_Init? is %s the library of this MPI?)", ranksDir, so)
	}
	line, err := mergeJob(paths, *out, m)
	if err != nil {
		return fmt.Errorf("mpirun: merging %s: %w", ranksDir, err)
	}
	fmt.Fprintln(stderr, "gclock: "+line)
	return nil
}

// mergeJob merges the ranks' traces into DIR/trace.pftrace (and
// DIR/otf2/traces.otf2 when built with OTF2), writes the full report to
// DIR/merge.txt and returns the job's one line.
func mergeJob(paths []string, dir string, m correct.Method) (string, error) {
	pft := filepath.Join(dir, "trace.pftrace")
	f, err := os.Create(pft)
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	opt := timeline.Options{Method: m, CLC: true, Perfetto: bw, Log: slog.New(slog.DiscardHandler)}
	otf2Dir := filepath.Join(dir, "otf2")
	opt.OTF2 = otf2Dir
	rep, err := timeline.Run(timeline.Files(paths), opt)
	if ferr := bw.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	var b strings.Builder
	printReport(&b, rep)
	if err := os.WriteFile(filepath.Join(dir, "merge.txt"), []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	var methods []string // the corrections used; rank 0, the sync sessions' reference, needs none
	for _, c := range rep.Choices {
		if s := string(c.Method); s != string(correct.None) && !slices.Contains(methods, s) {
			methods = append(methods, s)
		}
	}
	if len(methods) == 0 {
		methods = []string{string(correct.None)}
	}
	tot := causality.Totals(rep.Pairs)
	after := tot.Corrected
	if rep.AfterCLC != nil {
		after = causality.Totals(rep.AfterCLC).Corrected
	}
	line := fmt.Sprintf("%d ranks, %d events, %d messages (received before sent: %d raw, %d corrected), %s: %s (ui.perfetto.dev)",
		len(paths), rep.Events, tot.Messages, tot.Raw, after, strings.Join(methods, "/"), pft)
	line += ", " + filepath.Join(otf2Dir, "traces.otf2")
	return line + "; report " + filepath.Join(dir, "merge.txt"), nil
}

// findMPILib returns the library to preload: the flag's, $GCLOCK_MPI_LIB,
// or the first libgclockmpi.so next to the gclock executable, in ../lib or
// ../mpi of it, or in ./mpi (a source tree after make -C mpi).
func findMPILib(flagged string) (string, error) {
	if flagged == "" {
		flagged = os.Getenv("GCLOCK_MPI_LIB")
	}
	if flagged != "" {
		if _, err := os.Stat(flagged); err != nil {
			return "", fmt.Errorf("mpirun: %w", err)
		}
		return filepath.Abs(flagged)
	}
	var tried []string
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		tried = append(tried, d, filepath.Join(d, "..", "lib"), filepath.Join(d, "..", "mpi"))
	}
	tried = append(tried, "mpi")
	for _, d := range tried {
		p := filepath.Join(d, "libgclockmpi.so")
		if _, err := os.Stat(p); err == nil {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("mpirun: no libgclockmpi.so in %s (hint: make -C mpi builds it; -lib or GCLOCK_MPI_LIB names it)", strings.Join(tried, ", "))
}
