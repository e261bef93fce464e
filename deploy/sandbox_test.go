//go:build linux

package deploy_test

// TestUnitSandbox runs gclockd with the shipped config under the sandbox
// of deploy/gclockd.service: not systemd itself (PID 1 here and on CI is
// not systemd, so systemd-run cannot start a unit) but the same kernel
// mechanisms systemd uses, built from the unit's own lines:
//
//   - the seccomp filters: SystemCallFilter= (its groups expanded by
//     `systemd-analyze syscall-filter`, the machine's systemd's own
//     lists), SystemCallErrorNumber= (none: an unlisted call kills the
//     process, SIGSYS, as systemd's default KillProcess does),
//     SystemCallArchitectures=native, and the filters the Protect*= and
//     Restrict*= settings add (ProtectClock: @clock -> EPERM;
//     ProtectKernelModules, ProtectKernelLogs, ProtectHostname,
//     RestrictNamespaces, RestrictAddressFamilies, LockPersonality,
//     MemoryDenyWriteExecute), each a filter of its own, stacked as
//     systemd stacks them;
//   - the mount namespace: ProtectSystem=strict (every mount read-only
//     but /dev, /proc, /sys and the unit's RuntimeDirectory and
//     StateDirectory), PrivateTmp, ProtectHome, ProtectKernelTunables,
//     ProtectControlGroups;
//   - the credentials: User= (here uid 65534: the gclock user need not
//     exist), SupplementaryGroups=, CapabilityBoundingSet= (the bounding
//     set emptied), NoNewPrivileges.
//
// Not emulated: DeviceAllow (ProtectClock's /dev/rtc), ProtectKernelLogs'
// /dev/kmsg, cgroup limits, Nice.
//
// chronyd (-x: it never touches the clock) runs beside it as its own user
// (_chrony) with its command socket in a directory of mode 0750, as
// Debian's /run/chrony, under the umask of systemd/chronyd-umask.conf;
// the daemon's unit with its drop-in systemd/chrony.conf. The test fails if the daemon dies (SIGSYS), cannot
// read the kernel's clock state (adjtimex) or does not reach chronyd.
// issue 29: the shipped unit killed the reference at its first adjtimex.
// Point it at another unit with -unit FILE (e.g. an older one: it fails).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"
)

var unitFile = flag.String("unit", "gclockd.service", "the unit file TestUnitSandbox runs the daemon under")

// sandboxEnv names the file of a sandboxSpec: set, the test binary is the
// sandbox's launcher (TestMain), not a test.
const sandboxEnv = "GCLOCK_TEST_SANDBOX_SPEC"

func TestMain(m *testing.M) {
	if p := os.Getenv(sandboxEnv); p != "" {
		sandboxExec(p) // does not return
	}
	os.Exit(m.Run())
}

// unitSandbox is what the test reads from a unit file.
type unitSandbox struct {
	User, Group          string
	SupplementaryGroups  []string
	Filter               []string // SystemCallFilter= allow entries, in order
	Deny                 []string // SystemCallFilter=~ entries
	ErrorNumber          string   // SystemCallErrorNumber=
	Native               bool     // SystemCallArchitectures=native
	AddressFamilies      []string
	ProtectSystem        string
	Bool                 map[string]bool // ProtectClock= and the other yes/no settings
	RuntimeDir, StateDir string
	BoundingSetEmpty     bool
}

// parseUnit reads the [Service] settings of the unit files (a drop-in
// after its unit), as systemd does: an empty assignment resets a list.
func parseUnit(t *testing.T, files ...string) unitSandbox {
	t.Helper()
	u := unitSandbox{Bool: map[string]bool{}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
				continue
			}
			switch k {
			case "User":
				u.User = v
			case "Group":
				u.Group = v
			case "SupplementaryGroups":
				if v == "" {
					u.SupplementaryGroups = nil
				}
				u.SupplementaryGroups = append(u.SupplementaryGroups, strings.Fields(v)...)
			case "SystemCallFilter":
				switch {
				case v == "":
					u.Filter, u.Deny = nil, nil
				case strings.HasPrefix(v, "~"):
					u.Deny = append(u.Deny, strings.Fields(v[1:])...)
				default:
					u.Filter = append(u.Filter, strings.Fields(v)...)
				}
			case "SystemCallErrorNumber":
				u.ErrorNumber = v
			case "SystemCallArchitectures":
				u.Native = v == "native"
			case "RestrictAddressFamilies":
				u.AddressFamilies = strings.Fields(v)
			case "ProtectSystem":
				u.ProtectSystem = v
			case "RuntimeDirectory":
				u.RuntimeDir = v
			case "StateDirectory":
				u.StateDir = v
			case "CapabilityBoundingSet":
				u.BoundingSetEmpty = v == ""
			case "ProtectClock", "ProtectHome", "PrivateTmp", "ProtectKernelTunables", "ProtectKernelModules",
				"ProtectKernelLogs", "ProtectControlGroups", "ProtectHostname", "RestrictNamespaces",
				"LockPersonality", "MemoryDenyWriteExecute", "NoNewPrivileges":
				u.Bool[k] = v == "yes" || v == "true" || v == "on" || v == "1"
			}
		}
	}
	return u
}

// syscallGroups reads systemd's syscall groups (@system-service, ...):
// each group's entries, names and nested groups.
func syscallGroups(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("systemd-analyze", "syscall-filter", "--no-pager").Output()
	if err != nil {
		t.Skipf("systemd-analyze syscall-filter: %v (ci/deps.sh installs systemd)", err)
	}
	groups := map[string][]string{}
	var cur string
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "@"):
			cur = strings.TrimSpace(line)
		case strings.HasPrefix(strings.TrimSpace(line), "#"), strings.TrimSpace(line) == "":
		case cur != "":
			groups[cur] = append(groups[cur], strings.TrimSpace(line))
		}
	}
	if len(groups["@system-service"]) == 0 {
		t.Skipf("systemd-analyze syscall-filter printed no @system-service group:\n%s", out)
	}
	return groups
}

// expand resolves names and @groups into syscall names.
func expand(groups map[string][]string, entries []string) map[string]bool {
	out := map[string]bool{}
	var add func(e string, depth int)
	add = func(e string, depth int) {
		if !strings.HasPrefix(e, "@") {
			out[e] = true
			return
		}
		if depth > 10 {
			return
		}
		for _, x := range groups[e] {
			add(x, depth+1)
		}
	}
	for _, e := range entries {
		add(e, 0)
	}
	return out
}

// syscallNumbers reads this architecture's syscall numbers from the
// kernel headers (linux-libc-dev, which gcc's libc6-dev brings).
func syscallNumbers(t *testing.T) map[string]uint32 {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("the seccomp filter is built for amd64 only (here %s)", runtime.GOARCH)
	}
	b, err := os.ReadFile("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
	if err != nil {
		if b, err = os.ReadFile("/usr/include/asm/unistd_64.h"); err != nil {
			t.Skipf("no syscall table: %v (linux-libc-dev; ci/deps.sh installs libc6-dev)", err)
		}
	}
	nr := map[string]uint32{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "#define" && strings.HasPrefix(f[1], "__NR_") {
			if n, err := strconv.ParseUint(f[2], 10, 32); err == nil {
				nr[strings.TrimPrefix(f[1], "__NR_")] = uint32(n)
			}
		}
	}
	if nr["adjtimex"] == 0 || nr["read"] != 0 {
		t.Skipf("syscall table unreadable (adjtimex %d)", nr["adjtimex"])
	}
	return nr
}

// Classic BPF and seccomp constants (linux/filter.h, linux/seccomp.h).
const (
	bpfLdAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJge    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfJset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfAnd    = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfRet    = unix.BPF_RET | unix.BPF_K
	retAllow  = 0x7fff0000
	retKill   = 0x80000000 // SECCOMP_RET_KILL_PROCESS: systemd's default action
	retErrno  = 0x00050000
	archAMD64 = 0xc000003e // AUDIT_ARCH_X86_64
	offNr     = 0
	offArch   = 4
	x32Bit    = 0x40000000
)

func offArg(i int) uint32 { return 16 + 8*uint32(i) } // low 32 bits, little-endian

type prog []unix.SockFilter

func (p *prog) ins(code uint16, jt, jf uint8, k uint32) {
	*p = append(*p, unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k})
}

// block is "if nr == n { body }"; body ends in a return.
func (p *prog) block(n uint32, body prog) {
	p.ins(bpfLdAbs, 0, 0, offNr)
	p.ins(bpfJeq, 0, uint8(len(body)), n)
	*p = append(*p, body...)
}

// allowList is SystemCallFilter=: the names allowed, def for the rest;
// with native, other architectures (and x32) are killed.
func allowList(nr map[string]uint32, names map[string]bool, def uint32, native bool) prog {
	var p prog
	p.ins(bpfLdAbs, 0, 0, offArch)
	if native {
		p.ins(bpfJeq, 1, 0, archAMD64)
		p.ins(bpfRet, 0, 0, retKill)
	}
	p.ins(bpfLdAbs, 0, 0, offNr)
	p.ins(bpfJge, 0, 1, x32Bit)
	p.ins(bpfRet, 0, 0, retKill)
	var nums []uint32
	for n := range names {
		if v, ok := nr[n]; ok {
			nums = append(nums, v)
		}
	}
	slices.Sort(nums)
	for _, v := range slices.Compact(nums) {
		p.ins(bpfJeq, 0, 1, v)
		p.ins(bpfRet, 0, 0, retAllow)
	}
	p.ins(bpfRet, 0, 0, def)
	return p
}

// denyList returns ret for the names, allows the rest.
func denyList(nr map[string]uint32, names map[string]bool, ret uint32) prog {
	var p prog
	p.ins(bpfLdAbs, 0, 0, offNr)
	for n := range names {
		if v, ok := nr[n]; ok {
			p.ins(bpfJeq, 0, 1, v)
			p.ins(bpfRet, 0, 0, ret)
		}
	}
	p.ins(bpfRet, 0, 0, retAllow)
	return p
}

var addressFamilies = map[string]uint32{"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17}

// sandboxFilters builds the unit's seccomp filters, in systemd's order
// (exec_child: the Protect*= and Restrict*= filters, SystemCallFilter= last).
func sandboxFilters(t *testing.T, u unitSandbox) []prog {
	t.Helper()
	nr := syscallNumbers(t)
	groups := syscallGroups(t)
	var out []prog
	eperm := uint32(retErrno | uint32(unix.EPERM))
	if u.Bool["ProtectClock"] {
		out = append(out, denyList(nr, expand(groups, []string{"@clock"}), eperm))
	}
	if u.Bool["ProtectKernelModules"] {
		out = append(out, denyList(nr, expand(groups, []string{"@module"}), eperm))
	}
	if u.Bool["ProtectKernelLogs"] {
		out = append(out, denyList(nr, map[string]bool{"syslog": true}, eperm))
	}
	if u.Bool["ProtectHostname"] {
		out = append(out, denyList(nr, map[string]bool{"sethostname": true, "setdomainname": true}, eperm))
	}
	if u.Bool["RestrictNamespaces"] {
		var p prog
		const newNS = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP
		flags := prog{}
		flags.ins(bpfLdAbs, 0, 0, offArg(0))
		flags.ins(bpfJset, 0, 1, newNS)
		flags.ins(bpfRet, 0, 0, eperm)
		flags.ins(bpfRet, 0, 0, retAllow)
		p.block(nr["clone"], flags)
		p.block(nr["unshare"], flags)
		p.block(nr["setns"], prog{{Code: bpfRet, K: eperm}})
		p.block(nr["clone3"], prog{{Code: bpfRet, K: retErrno | uint32(unix.ENOSYS)}}) // systemd's: callers fall back to clone
		p.ins(bpfRet, 0, 0, retAllow)
		out = append(out, p)
	}
	if u.Bool["MemoryDenyWriteExecute"] {
		var p prog
		wx := func(arg int) prog {
			var b prog
			b.ins(bpfLdAbs, 0, 0, offArg(arg))
			b.ins(bpfAnd, 0, 0, unix.PROT_WRITE|unix.PROT_EXEC)
			b.ins(bpfJeq, 0, 1, unix.PROT_WRITE|unix.PROT_EXEC)
			b.ins(bpfRet, 0, 0, eperm)
			b.ins(bpfRet, 0, 0, retAllow)
			return b
		}
		p.block(nr["mmap"], wx(2))
		p.block(nr["mprotect"], wx(2))
		p.block(nr["pkey_mprotect"], wx(2))
		p.ins(bpfRet, 0, 0, retAllow)
		out = append(out, p)
	}
	if u.Bool["LockPersonality"] {
		var b prog
		b.ins(bpfLdAbs, 0, 0, offArg(0))
		b.ins(bpfJeq, 2, 0, 0xffffffff) // a query
		b.ins(bpfJeq, 1, 0, 0)          // PER_LINUX, the current one
		b.ins(bpfRet, 0, 0, eperm)
		b.ins(bpfRet, 0, 0, retAllow)
		var p prog
		p.block(nr["personality"], b)
		p.ins(bpfRet, 0, 0, retAllow)
		out = append(out, p)
	}
	if len(u.AddressFamilies) > 0 {
		var b prog
		b.ins(bpfLdAbs, 0, 0, offArg(0))
		for _, f := range u.AddressFamilies {
			af, ok := addressFamilies[f]
			if !ok {
				t.Fatalf("RestrictAddressFamilies: %s unknown to the test", f)
			}
			b.ins(bpfJeq, 0, 1, af)
			b.ins(bpfRet, 0, 0, retAllow)
		}
		b.ins(bpfRet, 0, 0, retErrno|uint32(unix.EAFNOSUPPORT))
		var p prog
		p.block(nr["socket"], b)
		p.ins(bpfRet, 0, 0, retAllow)
		out = append(out, p)
	}
	// SystemCallFilter= last, as systemd loads it: the others need seccomp(2),
	// which @system-service does not list.
	if len(u.Filter) > 0 {
		def := uint32(retKill)
		if u.ErrorNumber != "" {
			errno := 0
			for e := 1; e < 256; e++ {
				if unix.ErrnoName(syscall.Errno(e)) == u.ErrorNumber {
					errno = e
				}
			}
			if errno == 0 {
				t.Fatalf("SystemCallErrorNumber=%s: not an errno name", u.ErrorNumber)
			}
			def = retErrno | uint32(errno)
		}
		allowed := expand(groups, u.Filter)
		for n := range expand(groups, u.Deny) {
			delete(allowed, n)
		}
		out = append(out, allowList(nr, allowed, def, u.Native))
	}
	return out
}

// sandboxSpec is what the launcher (sandboxExec) applies before it
// executes the daemon.
type sandboxSpec struct {
	Filters                     []prog
	UID, GID                    int
	Groups                      []int
	Writable                    []string // RuntimeDirectory, StateDirectory: kept writable
	ReadOnly                    bool     // ProtectSystem=strict
	Tmpfs, Inaccessible, ROBind []string
	DropBoundingSet, NoNewPrivs bool
	Argv, Env                   []string
}

// sandboxExec is the launcher, run as root in a new mount namespace (its
// mounts private): mounts, credentials, seccomp, then exec.
func sandboxExec(specPath string) {
	die := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "sandbox launcher: "+format+"\n", a...)
		os.Exit(120)
	}
	b, err := os.ReadFile(specPath)
	if err != nil {
		die("%v", err)
	}
	var s sandboxSpec
	if err := json.Unmarshal(b, &s); err != nil {
		die("%v", err)
	}
	runtime.LockOSThread() // seccomp, no_new_privs and the bounding set are this thread's, which execs
	for _, w := range s.Writable {
		if err := unix.Mount(w, w, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			die("bind %s: %v", w, err)
		}
	}
	under := func(p string, dirs ...string) bool {
		for _, d := range dirs {
			if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
				return true
			}
		}
		return false
	}
	for _, d := range s.ROBind {
		if _, err := os.Stat(d); err == nil {
			unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, "")
		}
	}
	if s.ReadOnly {
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			die("%v", err)
		}
		for line := range strings.Lines(string(mi)) {
			f := strings.Fields(line)
			if len(f) < 5 {
				continue
			}
			mp := f[4]
			if under(mp, "/dev", "/proc", "/sys") || under(mp, s.Writable...) {
				continue
			}
			if err := unix.Mount("", mp, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
				die("read-only %s: %v", mp, err)
			}
		}
	}
	for _, d := range s.ROBind { // ProtectKernelTunables, ProtectControlGroups
		if _, err := os.Stat(d); err == nil {
			if err := unix.Mount("", d, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
				die("read-only %s: %v", d, err)
			}
		}
	}
	for _, d := range s.Tmpfs { // PrivateTmp
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			die("tmpfs %s: %v", d, err)
		}
	}
	for _, d := range s.Inaccessible { // ProtectHome
		if _, err := os.Stat(d); err == nil {
			if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=000"); err != nil {
				die("inaccessible %s: %v", d, err)
			}
		}
	}
	if s.DropBoundingSet {
		for c := 0; c <= unix.CAP_LAST_CAP; c++ {
			unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		}
	}
	if err := syscall.Setgroups(s.Groups); err != nil {
		die("setgroups: %v", err)
	}
	if err := syscall.Setgid(s.GID); err != nil {
		die("setgid: %v", err)
	}
	if err := syscall.Setuid(s.UID); err != nil {
		die("setuid: %v", err)
	}
	if s.NoNewPrivs || len(s.Filters) > 0 {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			die("no_new_privs: %v", err)
		}
	}
	for _, f := range s.Filters {
		fp := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
		if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fp))); e != 0 {
			die("seccomp: %v", e)
		}
	}
	err = syscall.Exec(s.Argv[0], s.Argv, s.Env)
	die("exec %s: %v", s.Argv[0], err)
}

func TestUnitSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon for a few seconds")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: a mount namespace, another user, chronyd as its user")
	}
	u := parseUnit(t, *unitFile, "systemd/chrony.conf")
	filters := sandboxFilters(t, u)
	if len(filters) == 0 {
		t.Fatalf("%s: no SystemCallFilter=", *unitFile)
	}
	chronyd, err := exec.LookPath("chronyd")
	if err != nil {
		t.Skip("chronyd not installed (ci/deps.sh installs chrony)")
	}
	chronyUser, err := user.Lookup("_chrony")
	if err != nil {
		t.Skipf("no _chrony user (Debian's chrony package makes it): %v", err)
	}
	// Everything under /run: PrivateTmp hides /tmp from the daemon, and
	// chronyd (outside its namespace) must see the daemon's runtime
	// directory at the same path.
	root, err := os.MkdirTemp("/run", "gclock-sandbox-test-")
	if err != nil {
		t.Skipf("cannot make a directory under /run: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	var sfs unix.Statfs_t
	if unix.Statfs(root, &sfs) == nil && sfs.Flags&unix.ST_NOEXEC != 0 {
		t.Skip("/run is mounted noexec here: the daemon's binary cannot run from it")
	}
	os.Chmod(root, 0o755)
	const uid, gid = 65534, 65534 // User=gclock, Group=gclock: here nobody, nogroup
	run := filepath.Join(root, "run", "gclock")
	state := filepath.Join(root, "lib", "gclock")
	etc := filepath.Join(root, "etc")
	chronyDir := filepath.Join(root, "chrony")
	for _, d := range []string{filepath.Dir(run), filepath.Dir(state), run, state, etc, chronyDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chown(run, uid, gid)
	os.Chown(state, uid, gid)
	os.Chmod(state, 0o700) // StateDirectoryMode
	cu, _ := strconv.Atoi(chronyUser.Uid)
	cg, _ := strconv.Atoi(chronyUser.Gid)
	os.Chown(chronyDir, cu, cg)
	os.Chmod(chronyDir, 0o750) // Debian's /run/chrony

	// chronyd -x, its command socket only, a local stratum 3.
	chronySock := filepath.Join(chronyDir, "chronyd.sock")
	cconf := filepath.Join(etc, "chrony.conf")
	os.WriteFile(cconf, []byte(fmt.Sprintf("pidfile %s/chronyd.pid\nbindcmdaddress %s\ncmdport 0\nport 0\nlocal stratum 3\n", chronyDir, chronySock)), 0o644)
	var clog bytes.Buffer
	// chronyd-umask.conf: chronyd under UMask=0007, its socket 0770.
	cmdC := exec.Command("/bin/sh", "-c", "umask 0007 && exec \"$0\" -x -d -u _chrony -f \"$1\"", chronyd, cconf)
	cmdC.Stdout, cmdC.Stderr = &clog, &clog
	if err := cmdC.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmdC.Process.Signal(syscall.SIGTERM); cmdC.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(chronySock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chronyd made no command socket in 10 s:\n%s", clog.String())
		}
	}

	bin := buildCmd(t, root, "gclockd")
	tool := buildCmd(t, t.TempDir(), "gclock")
	key := filepath.Join(etc, "cluster.key")
	if out, err := exec.Command(tool, "keygen", "-o", key).CombinedOutput(); err != nil {
		t.Fatalf("gclock keygen: %v\n%s", err, out)
	}
	os.Chown(key, uid, gid)

	// The shipped config, with this machine's addresses and paths.
	var cfg map[string]any
	shipped, err := os.ReadFile("gclock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(shipped, &cfg); err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	set := func(section, key string, v any) {
		m, ok := cfg[section].(map[string]any)
		if !ok {
			t.Fatalf("gclock.yaml has no %s section", section)
		}
		m[key] = v
	}
	cfg["peers"] = []any{map[string]any{"id": 1, "address": fmt.Sprintf("127.0.0.1:%d", ports[0])}}
	set("reference", "order", []int{1})
	set("global_time", "shm_path", filepath.Join(run, "page"))
	set("metrics", "listen", fmt.Sprintf("127.0.0.1:%d", ports[1]))
	set("real_time", "chrony_socket", chronySock)
	set("auth", "key_file", key)
	set("state", "file", filepath.Join(state, "state.json"))
	if rt := cfg["real_time"].(map[string]any); rt["upstream"] != "kernel" {
		t.Fatalf("gclock.yaml: real_time.upstream %v; the test is of upstream kernel", rt["upstream"])
	}
	cfgBytes, _ := yaml.Marshal(cfg)
	cfgPath := filepath.Join(etc, "gclock.yaml")
	os.WriteFile(cfgPath, cfgBytes, 0o644)

	if u.User == "" || u.User == "root" {
		t.Fatalf("%s: User=%q; want the daemon's own user", *unitFile, u.User)
	}
	var groups []int
	for _, g := range u.SupplementaryGroups {
		gr, err := user.LookupGroup(g)
		if err != nil {
			t.Fatalf("SupplementaryGroups=%s: %v", g, err)
		}
		n, _ := strconv.Atoi(gr.Gid)
		groups = append(groups, n)
	}
	spec := sandboxSpec{
		Filters: filters, UID: uid, GID: gid, Groups: groups,
		Writable:        []string{run, state},
		ReadOnly:        u.ProtectSystem == "strict",
		DropBoundingSet: u.BoundingSetEmpty, NoNewPrivs: u.Bool["NoNewPrivileges"],
		Argv: []string{bin, "-config", cfgPath},
		Env:  []string{"PATH=/usr/bin:/bin", "RUNTIME_DIRECTORY=" + run, "STATE_DIRECTORY=" + state},
	}
	if u.ProtectSystem != "strict" {
		t.Errorf("%s: ProtectSystem=%q; the unit keeps strict", *unitFile, u.ProtectSystem)
	}
	if u.RuntimeDir != "gclock" || u.StateDir != "gclock" {
		t.Errorf("%s: RuntimeDirectory=%q StateDirectory=%q, want gclock (the config's /run/gclock, /var/lib/gclock)", *unitFile, u.RuntimeDir, u.StateDir)
	}
	if u.Bool["PrivateTmp"] {
		spec.Tmpfs = append(spec.Tmpfs, "/tmp", "/var/tmp")
	}
	if u.Bool["ProtectHome"] {
		spec.Inaccessible = append(spec.Inaccessible, "/home", "/root", "/run/user")
	}
	if u.Bool["ProtectKernelTunables"] {
		spec.ROBind = append(spec.ROBind, "/proc/sys", "/proc/sysrq-trigger", "/sys")
	}
	if u.Bool["ProtectControlGroups"] {
		spec.ROBind = append(spec.ROBind, "/sys/fs/cgroup")
	}
	specPath := filepath.Join(etc, "spec.json")
	sb, _ := json.Marshal(spec)
	os.WriteFile(specPath, sb, 0o600)

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = []string{sandboxEnv + "=" + specPath}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // Go makes / private in it
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var exitErr error
	select {
	case exitErr = <-done:
	case <-time.After(4 * time.Second):
		cmd.Process.Signal(syscall.SIGTERM)
		exitErr = <-done
	}
	logs := out.String()
	if exitErr != nil {
		why := exitErr.Error()
		if ee, ok := exitErr.(*exec.ExitError); ok {
			if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() && ws.Signal() == syscall.SIGSYS {
				why = "killed by SIGSYS: a system call outside the unit's SystemCallFilter= (and no SystemCallErrorNumber=)"
			}
		}
		t.Fatalf("gclockd under %s with the shipped config: %s\n%s", *unitFile, why, logs)
	}
	for _, bad := range []string{"cannot read the state of CLOCK_REALTIME", "chronyd's tracking not read", "sandbox launcher:"} {
		for line := range strings.Lines(logs) {
			if strings.Contains(line, bad) {
				t.Errorf("under %s: %s", *unitFile, strings.TrimSpace(line))
			}
		}
	}
	if !strings.Contains(logs, "chronyd's tracking read") {
		t.Errorf("under %s: the daemon never read chronyd's tracking\n%s", *unitFile, logs)
	}
	if t.Failed() {
		t.Logf("daemon's log:\n%s", logs)
	}
}
