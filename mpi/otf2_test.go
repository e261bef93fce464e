//go:build otf2 && cgo

package mpi

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	regions := map[string]int{}
	opRe := regexp.MustCompile(`Operation: ([A-Z_]+)`)
	regRe := regexp.MustCompile(`Region: "([^"]+)"`)
	open := map[string]string{} // location -> the innermost open region
	var outside []string
	for _, l := range strings.Split(string(printed), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || !regexp.MustCompile(`^\d+$`).MatchString(f[1]) {
			continue
		}
		count[f[0]]++
		if m := opRe.FindStringSubmatch(l); m != nil && f[0] == "MPI_COLLECTIVE_END" {
			ops[m[1]]++
		}
		switch m := regRe.FindStringSubmatch(l); {
		case f[0] == "ENTER" && m != nil:
			regions[m[1]]++
			open[f[1]] = m[1]
		case f[0] == "LEAVE":
			open[f[1]] = ""
		case open[f[1]] == "" || !strings.HasPrefix(open[f[1]], "MPI_"):
			outside = append(outside, l)
		}
	}
	var total int64
	for _, n := range count {
		total += int64(n)
	}
	if total != rep.OTF2.Events {
		t.Errorf("otf2-print printed %d events, gclock wrote %d", total, rep.OTF2.Events)
	}
	colls := regions["MPI_Barrier"] + regions["MPI_Bcast"] + regions["MPI_Reduce"] + regions["MPI_Allreduce"]
	if count["ENTER"] == 0 || count["ENTER"] != count["LEAVE"] || count["MPI_COLLECTIVE_BEGIN"] != colls || count["MPI_COLLECTIVE_END"] != colls {
		t.Errorf("regions and collectives: %v, regions %v (one collective begin and end per collective region)", count, regions)
	}
	// Every MPI call a region: the environment, point-to-point and completion calls too.
	for _, r := range []string{"MPI_Init", "MPI_Finalize", "MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv",
		"MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Test"} {
		if regions[r] == 0 || (r == "MPI_Init" || r == "MPI_Finalize") && regions[r] != ranks {
			t.Errorf("%d %s regions (regions %v)", regions[r], r, regions)
		}
	}
	if len(outside) > 0 {
		t.Errorf("%d MPI records outside an MPI call's region, e.g. %s", len(outside), outside[0])
	}
	// Nonblocking requests: each started and completed once.
	if count["MPI_ISEND"] == 0 || count["MPI_ISEND"] != count["MPI_ISEND_COMPLETE"] || count["MPI_IRECV_REQUEST"] == 0 || count["MPI_IRECV_REQUEST"] != count["MPI_IRECV"] {
		t.Errorf("requests: %v, want as many MPI_ISEND as MPI_ISEND_COMPLETE and MPI_IRECV_REQUEST as MPI_IRECV, all positive", count)
	}
	for _, op := range []string{"BARRIER", "BCAST", "REDUCE", "ALLREDUCE"} {
		if ops[op] == 0 || ops[op]%ranks != 0 {
			t.Errorf("operation %s: %d collective ends, want a positive multiple of %d ranks (%v)", op, ops[op], ranks, ops)
		}
	}
	if count["MPI_SEND"] == 0 || count["MPI_SEND"]+count["MPI_ISEND"] != count["MPI_RECV"]+count["MPI_IRECV"] {
		t.Errorf("messages: %d+%d sends, %d+%d receives, want equal and positive", count["MPI_SEND"], count["MPI_ISEND"], count["MPI_RECV"], count["MPI_IRECV"])
	}
	if rep.OTF2.Dependencies == 0 {
		t.Error("no collective dependency was left out: the C tracer records them for every collective")
	}
	t.Logf("otf2-print: %v; operations %v; %d dependencies left out", count, ops, rep.OTF2.Dependencies)
}

// TestMPICallsOTF2 traces calls.c (scans, Alltoallw, a bcast on a split
// communicator, persistent requests and one-sided calls) on 4 ranks, writes
// the OTF2 archive and reads it back with otf2-print: the collectives with
// their communicator, root and sizes, the persistent requests' messages
// with their tags on their communicators, and the RMA records (window
// creation and destruction, puts, gets, accumulates, fences and locks) with
// their targets and sizes, every record named (Stats.Unnamed 0).
func TestMPICallsOTF2(t *testing.T) {
	dir := built(t)
	bin, err := exec.LookPath("otf2-print")
	if err != nil {
		t.Skip("otf2-print not installed (ci/deps.sh installs otf2-tools): the OTF2 read-back is not checked")
	}
	const rounds = 2
	files := traceRun(t, dir, "ok", filepath.Join(dir, "calls"), strconv.Itoa(rounds))
	arch := filepath.Join(t.TempDir(), "otf2")
	rep, err := timeline.Run(timeline.Files(files), timeline.Options{Method: correct.Auto, OTF2: arch})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OTF2.Unnamed != 0 {
		t.Errorf("%d MPI records without their communicator or window", rep.OTF2.Unnamed)
	}
	printed, err := exec.Command(bin, filepath.Join(arch, "traces.otf2")).Output()
	if err != nil {
		t.Fatalf("otf2-print: %v", err)
	}
	// Per record kind, the number of lines with the fields each must have; per round and rank.
	half := `Communicator: "MPI communicator [0-9a-f]{8}" <\d>`
	world := `Communicator: "MPI_COMM_WORLD" <0>`
	n := rounds * ranks
	for _, c := range []struct {
		re   string
		want int
	}{
		{`^MPI_COLLECTIVE_END .*Operation: SCAN, ` + world + `, Root: NONE, Sent: 12, Received: 12$`, n},
		{`^MPI_COLLECTIVE_END .*Operation: EXSCAN, ` + half + `, Root: NONE, Sent: 8, Received: (0|8)$`, n},
		{`^MPI_COLLECTIVE_END .*Operation: ALLTOALLW, ` + world + `, Root: NONE, Sent: 40, Received: (16|32|48|64)$`, n},
		{`^MPI_COLLECTIVE_END .*Operation: BCAST, ` + half + `, Root: 1 \("rank [23] `, n},
		{`^MPI_SEND .*Receiver: \d .*` + world + `, Tag: 7, Length: 12$`, 3 * n},
		{`^MPI_RECV .*Sender: \d .*` + world + `, Tag: 7, Length: 12$`, 3 * n},
		{`^MPI_SEND .*Receiver: 1 .*` + half + `, Tag: 8, Length: 4$`, 3 * n / 2},
		{`^MPI_SEND .*Receiver: 0 .*` + half + `, Tag: 8, Length: 4$`, 3 * n / 2},
		{`^MPI_RECV .*Sender: [01] .*` + half + `, Tag: 8, Length: 4$`, 3 * n},
		{`^RMA_WIN_CREATE .*Window: "MPI window [0-9a-f]{8}"`, 2 * n},
		{`^RMA_WIN_DESTROY .*Window: "MPI window [0-9a-f]{8}"`, 2 * n},
		{`^RMA_PUT .*Remote: \d .*Bytes: 8, Matching`, n},
		{`^RMA_PUT .*Remote: [01] .*Bytes: 4, Matching`, n},
		{`^RMA_GET .*Remote: \d .*Bytes: 12, Matching`, n},
		{`^RMA_ATOMIC .*Type: ACCUMULATE, Sent: 4, Received: 0`, n},
		{`^RMA_ACQUIRE_LOCK .*Type: EXCLUSIVE$`, n},
		{`^RMA_ACQUIRE_LOCK .*Type: SHARED$`, n},
		{`^RMA_RELEASE_LOCK `, 2 * n},
		{`^RMA_COLLECTIVE_BEGIN `, 5 * n},
		{`^RMA_COLLECTIVE_END .*Operation: BARRIER, Window: "MPI window`, 5 * n},
	} {
		re := regexp.MustCompile(c.re)
		got := 0
		for _, l := range strings.Split(string(printed), "\n") {
			if re.MatchString(strings.TrimSpace(l)) {
				got++
			}
		}
		if got != c.want {
			t.Errorf("%d lines match %s, want %d", got, c.re, c.want)
		}
	}
	if t.Failed() {
		t.Logf("otf2-print:\n%s", printed)
	}
}
