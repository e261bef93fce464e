package mpi

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gclock/gclock/gtime"
)

// fortranCompiler returns the environment mpifort needs (OMPI_FC when
// gfortran is only installed under a versioned name), or skips.
func fortranCompiler(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("mpifort"); err != nil {
		t.Skip("no mpifort: the Fortran entry points are not tested (apt-get install gfortran)")
	}
	if _, err := exec.LookPath("gfortran"); err == nil {
		return nil
	}
	for _, fc := range []string{"gfortran-14", "gfortran-13", "gfortran-12"} {
		if _, err := exec.LookPath(fc); err == nil {
			return []string{"OMPI_FC=" + fc}
		}
	}
	t.Skip("no gfortran: the Fortran entry points are not tested")
	return nil
}

// TestFortranWtime runs a Fortran program (mpif.h, no gclock code) with
// libgclockmpi preloaded against a page with a known mapping: OpenMPI's
// Fortran MPI_WTIME calls PMPI_Wtime, so only the library's Fortran entry
// points make it global time. Every value must be the mapping's value at a
// raw instant inside the run (5000 s ahead of the raw clock, where the
// MPI library's own clock starts near 0), and MPI_WTICK 1e-9.
func TestFortranWtime(t *testing.T) {
	dir := built(t)
	env := fortranCompiler(t)
	bin := filepath.Join(t.TempDir(), "wtimef")
	cmd := exec.Command("mpifort", "-O2", "-o", bin, filepath.Join("testdata", "wtime.f90"))
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mpifort: %v\n%s", err, out)
	}
	const offset = 5000*sec + 987654321
	_, page, m := knownPage(t, offset, -21e-6)
	before := gtime.RawNow()
	out, errout, err := mpirun(t, ranks, map[string]string{
		"LD_PRELOAD": filepath.Join(dir, "libgclockmpi.so"), "GCLOCK_PAGE": page, "GCLOCK_MPI_ORIGIN": "0",
	}, bin, "20")
	after := gtime.RawNow()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s\n%s", err, out, errout)
	}
	lo, _, _ := m.At(before)
	hi, _, _ := m.At(after)
	n := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "fwtime":
			n++
			w, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			// ~1e13 ns: the printed 9 decimals and the double hold it to a few ns.
			if got := int64(math.Round(w * 1e9)); got < lo-1000 || got > hi+1000 {
				t.Errorf("rank %s: MPI_WTIME %s = %d ns, want global time during the run [%d, %d]", f[1], f[2], got, lo, hi)
			}
		case len(f) == 3 && f[0] == "ftick":
			if v, err := strconv.ParseFloat(f[2], 64); err != nil || v != 1e-9 {
				t.Errorf("rank %s: MPI_WTICK %s, want 1e-9", f[1], f[2])
			}
		}
	}
	if n != ranks*20 {
		t.Fatalf("%d fwtime lines, want %d:\n%s\n%s", n, ranks*20, out, errout)
	}
}
