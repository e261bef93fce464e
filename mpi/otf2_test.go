package mpi

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
		// The nonblocking forms: a request each, completed with the call's data.
		{`^NON_BLOCKING_COLLECTIVE_REQUEST .*Request: \d+$`, 3 * n},
		{`^NON_BLOCKING_COLLECTIVE_COMPLETE .*Operation: SCAN, ` + world + `, Root: NONE, Sent: 12, Received: 12, Request: \d+$`, n},
		{`^NON_BLOCKING_COLLECTIVE_COMPLETE .*Operation: EXSCAN, ` + half + `, Root: NONE, Sent: 8, Received: (0|8), Request: \d+$`, n},
		{`^NON_BLOCKING_COLLECTIVE_COMPLETE .*Operation: ALLTOALLW, ` + world + `, Root: NONE, Sent: 40, Received: (16|32|48|64), Request: \d+$`, n},
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

// otf2Python finds a python3 that imports otf2 (python3-otf2 installs into
// the system's python, which may not be the first python3 on PATH).
func otf2Python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import otf2").Run() == nil {
			return path
		}
	}
	t.Skip("no python3 with the otf2 module (ci/deps.sh installs python3-otf2): the wait states are not checked")
	return ""
}

// waitMsg is one message as testdata/waitstates.py reports it.
type waitMsg struct {
	Tag, Sender, Receiver int
	SendRegion            string `json:"send_region"`
	RecvRegion            string `json:"recv_region"`
	SendEnterLocal        *int64 `json:"send_enter_local"`
	SendLeaveLocal        *int64 `json:"send_leave_local"`
	RecvEnterLocal        *int64 `json:"recv_enter_local"`
	RecvLeaveLocal        *int64 `json:"recv_leave_local"`
	LateSender            int64  `json:"late_sender"`
	LateReceiver          int64  `json:"late_receiver"`
}

// waitStates runs testdata/waitstates.py on an archive.
func waitStates(t *testing.T, py, arch string) []waitMsg {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command(py, filepath.Join("testdata", "waitstates.py"), filepath.Join(arch, "traces.otf2"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("waitstates.py: %v\n%s", err, stderr.String())
	}
	var res struct {
		Messages  []waitMsg
		Unmatched int
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("waitstates.py output: %v\n%s", err, out)
	}
	if res.Unmatched != 0 {
		t.Errorf("waitstates.py: %d send or receive records without their partner", res.Unmatched)
	}
	return res.Messages
}

// scalasca computes the late-sender and late-receiver waits of a message
// from its regions' enter and leave times, as waitstates.py does.
func scalasca(sendRegion, recvRegion string, se, sl, re, rl int64) (ls, lr int64) {
	recvCalls := map[string]bool{"MPI_Recv": true, "MPI_Sendrecv": true, "MPI_Wait": true, "MPI_Waitall": true, "MPI_Waitany": true, "MPI_Waitsome": true}
	blocking := map[string]bool{"MPI_Send": true, "MPI_Ssend": true, "MPI_Rsend": true, "MPI_Sendrecv": true}
	if recvCalls[recvRegion] && re < se {
		ls = min(se, rl) - re
	}
	if blocking[sendRegion] && se < re {
		lr = min(re, sl) - se
	}
	return ls, lr
}

// TestWaitStatesOTF2 runs waits.c on 4 ranks whose trace stamps run on
// emulated clocks that disagree by milliseconds to seconds and tens of ppm
// (libgclockmpi-test.so, no daemon: the tracer's sync sessions), merges the
// traces with -method linear into an OTF2 archive, and computes Scalasca's
// late-sender and late-receiver waits from the archive alone
// (testdata/waitstates.py, python3-otf2). The truth is the same formulas
// over the true times of the same region events: their raw local stamps
// (the gclock::local_ns attribute) through the known emulated clocks onto
// rank 0's clock (the sessions' reference, so global time). Each archive
// wait must be within twice the claimed correction error (half the longest
// round trip of the recorded sync exchanges, TestTraceSyncNoDaemon's
// bound: each of the two times a wait subtracts is within it) of the
// truth. The waits by construction (rank 1 sleeps 50 ms before its send,
// rank 3 30 ms before receiving a synchronous send, 40 ms before a
// nonblocking send, an eager send 30 ms before its receive) must show in
// the truth, every message's records must lie in its calls' regions
// (MPI_Send/MPI_Recv, MPI_Ssend, MPI_Isend/MPI_Wait), and the program's own
// stamps just before each call must precede the tracer's enter. The
// uncorrected archive (-method none) must get some wait wrong by more than
// the tolerance: the test sees the correction.
func TestWaitStatesOTF2(t *testing.T) {
	dir := built(t)
	py := otf2Python(t)
	clocks := []testClock{{1_000_000, 20_000}, {-3_000_000, -15_000}, {5_000_000_000, 30_000}, {7, -30_000}}
	const rounds, lsMs, lrMs, nbMs = 5, 50, 30, 40
	tdir := filepath.Join(t.TempDir(), "trace")
	out, errout, err := mpirun(t, ranks, map[string]string{
		"LD_PRELOAD":            filepath.Join(dir, "libgclockmpi-test.so"),
		"GCLOCK_MPI_TRACE":      tdir,
		"GCLOCK_PAGE":           filepath.Join(t.TempDir(), "no-page"),
		"GCLOCK_MPI_QUIET":      "1",
		"GCLOCK_MPI_TEST_CLOCK": testClockEnv(clocks),
	}, filepath.Join(dir, "waits"), strconv.Itoa(rounds), strconv.Itoa(lsMs), strconv.Itoa(lrMs), strconv.Itoa(nbMs))
	if err != nil {
		t.Fatalf("mpirun waits: %v\n%s\n%s", err, out, errout)
	}
	// The program's stamps: rank, tag, round -> raw ns just before the call.
	stamps := map[[3]int]int64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && f[0] == "stamp" {
			var k [3]int
			for i := range k {
				k[i], _ = strconv.Atoi(f[1+i])
			}
			stamps[k], _ = strconv.ParseInt(f[4], 10, 64)
		}
	}
	if len(stamps) != 8*rounds {
		t.Fatalf("%d stamps, want %d:\n%s", len(stamps), 8*rounds, out)
	}
	files, _ := filepath.Glob(filepath.Join(tdir, "rank-*.gct"))
	slices.Sort(files)
	if len(files) != ranks {
		t.Fatalf("trace files %v, want %d", files, ranks)
	}
	_, claim, _, _ := syncTruth(t, files, clocks)
	tol := 2 * claim
	truthOf := func(rank int, local *int64) int64 {
		if local == nil {
			t.Fatalf("a region event of rank %d without gclock::local_ns", rank)
		}
		return clocks[0].at(clocks[rank].raw(*local))
	}
	type want struct {
		send, recv string
		ls, lr     int64 // by construction, ns
	}
	scenario := map[int]want{
		1: {"MPI_Send", "MPI_Recv", lsMs * 1e6, 0},
		2: {"MPI_Ssend", "MPI_Recv", 0, lrMs * 1e6},
		3: {"MPI_Isend", "MPI_Wait", nbMs * 1e6, 0},
		4: {"MPI_Send", "MPI_Recv", 0, 0},
	}
	for _, method := range []correct.Method{correct.Linear, correct.None} {
		arch := filepath.Join(t.TempDir(), "otf2")
		if _, err := timeline.Run(timeline.Files(files), timeline.Options{Method: method, OTF2: arch}); err != nil {
			t.Fatal(err)
		}
		msgs := waitStates(t, py, arch)
		round := map[int]int{}
		truths := map[int][][2]int64{} // per tag, the true late sender and late receiver of each round
		worst := int64(0)
		for _, m := range msgs {
			w, ok := scenario[m.Tag]
			r := round[m.Tag]
			round[m.Tag]++
			if !ok {
				t.Errorf("-method %s: a message with tag %d: %+v", method, m.Tag, m)
				continue
			}
			if m.SendRegion != w.send || m.RecvRegion != w.recv {
				t.Errorf("-method %s: tag %d round %d: records in regions %q and %q, want %q and %q", method, m.Tag, r, m.SendRegion, m.RecvRegion, w.send, w.recv)
				continue
			}
			se, sl := truthOf(m.Sender, m.SendEnterLocal), truthOf(m.Sender, m.SendLeaveLocal)
			re, rl := truthOf(m.Receiver, m.RecvEnterLocal), truthOf(m.Receiver, m.RecvLeaveLocal)
			tls, tlr := scalasca(m.SendRegion, m.RecvRegion, se, sl, re, rl)
			d := max(abs64(m.LateSender-tls), abs64(m.LateReceiver-tlr))
			worst = max(worst, d)
			if method == correct.None {
				continue
			}
			t.Logf("tag %d round %d: late sender %.3f ms (truth %.3f, by construction %.0f), late receiver %.3f ms (truth %.3f, by construction %.0f)",
				m.Tag, r, float64(m.LateSender)/1e6, float64(tls)/1e6, float64(w.ls)/1e6, float64(m.LateReceiver)/1e6, float64(tlr)/1e6, float64(w.lr)/1e6)
			if d > tol {
				t.Errorf("tag %d round %d: archive's waits (late sender %d ns, late receiver %d ns) %d ns from the truth (%d, %d), beyond 2x the claimed error %d ns",
					m.Tag, r, m.LateSender, m.LateReceiver, d, tls, tlr, tol)
			}
			truths[m.Tag] = append(truths[m.Tag], [2]int64{tls, tlr})
			// The tracer's enters follow the program's stamps just before the
			// calls (how soon after is up to the scheduler: over 100 ms on a
			// loaded machine; an enter recorded late would shrink the waits,
			// which the medians below would see).
			for _, e := range []struct {
				rank  int
				local *int64
			}{{m.Sender, m.SendEnterLocal}, {m.Receiver, m.RecvEnterLocal}} {
				s, ok := stamps[[3]int{e.rank, m.Tag, r}]
				if raw := clocks[e.rank].raw(*e.local); !ok || raw < s {
					t.Errorf("tag %d round %d: rank %d's region entered at raw %d, its program stamped %d (found %v) just before the call", m.Tag, r, e.rank, raw, s, ok)
				}
			}
		}
		for tag, w := range scenario {
			if round[tag] != rounds {
				t.Errorf("-method %s: %d messages with tag %d, want %d", method, round[tag], tag, rounds)
			}
			if method == correct.None || len(truths[tag]) == 0 {
				continue
			}
			// By construction, over the rounds (a loaded machine may delay
			// one rank's exit from the barrier or its wake-up in one
			// round): the sleeper's wait shows, the barrier's exits and the
			// sleep's overshoot adding a little; the eager send waits for
			// nothing beyond its own run.
			for i, c := range []struct {
				name   string
				expect int64
			}{{"late sender", w.ls}, {"late receiver", w.lr}} {
				var v []int64
				for _, x := range truths[tag] {
					v = append(v, x[i])
				}
				slices.Sort(v)
				med := v[len(v)/2]
				if c.expect > 0 && (med < c.expect*9/10 || med > c.expect+50e6) {
					t.Errorf("tag %d: median true %s %d ns over the rounds, want about %d by construction", tag, c.name, med, c.expect)
				}
				if c.expect == 0 && med > 5e6 {
					t.Errorf("tag %d: median true %s %d ns over the rounds, want none by construction", tag, c.name, med)
				}
			}
		}
		t.Logf("-method %s: worst |archive wait - true wait| %d ns; tolerance 2 x %d ns", method, worst, claim)
		if method == correct.None && worst <= tol {
			t.Errorf("uncorrected archive: waits within %d ns of the truth: the emulated clocks did not disagree", tol)
		}
	}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
