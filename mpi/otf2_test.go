//go:build otf2 && cgo

package mpi

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/timeline"
)

// TestMPIRunOTF2 traces the ring program (point-to-point messages and the
// four collectives the tracer follows) on 4 ranks, merges the traces into
// an OTF2 archive and reads it back with otf2-print: one collective begin
// and end per collective region, the collectives' operations, every
// point-to-point message once at each end, and the tracer's collective
// dependencies left out.
func TestMPIRunOTF2(t *testing.T) {
	dir := built(t)
	bin, err := exec.LookPath("otf2-print")
	if err != nil {
		t.Skip("otf2-print not installed (ci/deps.sh installs otf2-tools): the OTF2 read-back is not checked")
	}
	tdir := filepath.Join(t.TempDir(), "trace")
	out, errout, err := mpirun(t, ranks, map[string]string{
		"LD_PRELOAD": filepath.Join(dir, "libgclockmpi.so"), "GCLOCK_MPI_TRACE": tdir,
	}, filepath.Join(dir, "ring"), "10", "10")
	if err != nil {
		t.Fatalf("mpirun: %v\n%s\n%s", err, out, errout)
	}
	files, _ := filepath.Glob(filepath.Join(tdir, "rank-*.gct"))
	if len(files) != ranks {
		t.Fatalf("trace files %v, want %d", files, ranks)
	}
	arch := filepath.Join(t.TempDir(), "otf2")
	rep, err := timeline.Run(timeline.Files(files), timeline.Options{Method: correct.None, OTF2: arch})
	if err != nil {
		t.Fatal(err)
	}
	printed, err := exec.Command(bin, filepath.Join(arch, "traces.otf2")).Output()
	if err != nil {
		t.Fatalf("otf2-print: %v", err)
	}
	count := map[string]int{}
	ops := map[string]int{}
	opRe := regexp.MustCompile(`Operation: ([A-Z_]+)`)
	for _, l := range strings.Split(string(printed), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || !regexp.MustCompile(`^\d+$`).MatchString(f[1]) {
			continue
		}
		count[f[0]]++
		if m := opRe.FindStringSubmatch(l); m != nil && f[0] == "MPI_COLLECTIVE_END" {
			ops[m[1]]++
		}
	}
	var total int64
	for _, n := range count {
		total += int64(n)
	}
	if total != rep.OTF2.Events {
		t.Errorf("otf2-print printed %d events, gclock wrote %d", total, rep.OTF2.Events)
	}
	if count["ENTER"] == 0 || count["ENTER"] != count["LEAVE"] || count["MPI_COLLECTIVE_BEGIN"] != count["ENTER"] || count["MPI_COLLECTIVE_END"] != count["ENTER"] {
		t.Errorf("regions and collectives: %v (every region here is a collective: one begin and end each)", count)
	}
	for _, op := range []string{"BARRIER", "BCAST", "REDUCE", "ALLREDUCE"} {
		if ops[op] == 0 || ops[op]%ranks != 0 {
			t.Errorf("operation %s: %d collective ends, want a positive multiple of %d ranks (%v)", op, ops[op], ranks, ops)
		}
	}
	if count["MPI_SEND"] == 0 || count["MPI_SEND"] != count["MPI_RECV"] {
		t.Errorf("messages: %d sends, %d receives, want equal and positive", count["MPI_SEND"], count["MPI_RECV"])
	}
	if rep.OTF2.Dependencies == 0 {
		t.Error("no collective dependency was left out: the C tracer records them for every collective")
	}
	t.Logf("otf2-print: %v; operations %v; %d dependencies left out", count, ops, rep.OTF2.Dependencies)
}
