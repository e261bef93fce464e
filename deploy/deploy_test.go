// Package deploy_test checks the deployment files in deploy/: the example
// configs, the systemd unit, the Kubernetes DaemonSet, the Slurm recipe and
// the Grafana dashboard, each against what the daemon really needs.
package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/wire/keyfile"
)

// TestConfigExamples: the production example serves UTC from raw clocks.
// (The lab writes its hosts' configs itself, on emulated clocks, from the
// precise sync profile: engineconf's TestOneCopyOfEachProfile.)
func TestConfigExamples(t *testing.T) {
	prod, err := daemon.Load("gclock.yaml")
	if err != nil {
		t.Fatalf("the production example does not load: %v", err)
	}
	checkProduction(t, "gclock.yaml", prod)
}

// checkProduction holds a config to what a production host needs.
func checkProduction(t *testing.T, name string, c daemon.Config) {
	t.Helper()
	if c.Clock.Source != daemon.ClockRaw {
		t.Errorf("%s: clock.source %q, want raw (an emulated clock serves made-up time)", name, c.Clock.Source)
	}
	if c.RealTime.Mode != daemon.RealTimeReference {
		t.Errorf("%s: real_time.mode %q, want %s (UTC)", name, c.RealTime.Mode, daemon.RealTimeReference)
	}
	if c.Metrics.Listen == "" {
		t.Errorf("%s: no metrics.listen: no metrics, no status page", name)
	}
	if c.GlobalTime.ShmPath == "" {
		t.Errorf("%s: no global_time.shm_path: programs cannot read global time", name)
	}
	if len(c.Reference.Order) < 2 {
		t.Errorf("%s: reference.order %v: no failover", name, c.Reference.Order)
	}
	// Safe defaults (issue 17): a key, metrics on loopback, the page in
	// the daemon's own directory.
	if c.Auth.KeyFile == "" || c.Auth.Insecure {
		t.Errorf("%s: auth %+v: want a key file (and not insecure): without one anyone can forge the peers' rounds", name, c.Auth)
	}
	if host, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil || (host != "127.0.0.1" && host != "::1" && host != "") {
		t.Errorf("%s: metrics.listen %q: want loopback (127.0.0.1:PORT): the status page and metrics show the cluster's state", name, c.Metrics.Listen)
	}
	if filepath.Dir(c.GlobalTime.ShmPath) != "/run/gclock" {
		t.Errorf("%s: global_time.shm_path %q: want a file in /run/gclock, the daemon's own directory (not /dev/shm: anyone can plant files there)", name, c.GlobalTime.ShmPath)
	}
}

// TestSystemdUnit checks deploy/gclockd.service with systemd-analyze verify
// (any complaint fails), with ExecStart pointed at a freshly built gclockd.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("gclockd.service")
	if err != nil {
		t.Fatal(err)
	}
	const exe = "/usr/local/bin/gclockd"
	m := regexp.MustCompile(`(?m)^ExecStart=(\S+) (.*)$`).FindSubmatch(unit)
	if m == nil || string(m[1]) != exe {
		t.Fatalf("gclockd.service: want ExecStart=%s ..., got %q", exe, m)
	}
	args := strings.Fields(string(m[2]))
	if i := slices.Index(args, "-config"); i < 0 || i+1 >= len(args) || args[i+1] != "/etc/gclock/gclock.yaml" {
		t.Errorf("ExecStart arguments %q: want -config /etc/gclock/gclock.yaml", args)
	}
	if !slices.Contains(args, "-auto-id") {
		t.Errorf("ExecStart arguments %q: want -auto-id (one file for every host)", args)
	}
	// The page's directory is the daemon's own: systemd makes /run/gclock
	// (0755) and keeps it across restarts; nothing in /dev/shm.
	for _, want := range []string{"RuntimeDirectory=gclock\n", "RuntimeDirectoryMode=0755\n", "RuntimeDirectoryPreserve=yes\n"} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("gclockd.service: no %q: the page needs its own directory /run/gclock", strings.TrimSpace(want))
		}
	}
	if bytes.Contains(unit, []byte("/dev/shm")) {
		t.Errorf("gclockd.service: mentions /dev/shm: the page lives in /run/gclock")
	}
	// The key: made once at install (gclock keygen -o), the same 0600
	// file on every host, where deploy/gclock.yaml reads it.
	prod, err := daemon.Load("gclock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^#.*gclock keygen -o \S+`).Match(unit) ||
		!regexp.MustCompile(`(?m)^#.*install (?:-o gclock )?-m 600 \S+ `+regexp.QuoteMeta(prod.Auth.KeyFile)+`\b`).Match(unit) {
		t.Errorf("gclockd.service: the install steps do not make the key (gclock keygen -o FILE) and install it 0600 at %s", prod.Auth.KeyFile)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (ci/deps.sh installs the systemd package): unit not verified")
	}
	dir := t.TempDir()
	bin := buildCmd(t, dir, "gclockd")
	path := filepath.Join(dir, "gclockd.service")
	if err := os.WriteFile(path, bytes.Replace(unit, []byte("ExecStart="+exe), []byte("ExecStart="+bin), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	wait, err := os.ReadFile("gclock-wait.service")
	if err != nil {
		t.Fatal(err)
	}
	gclock := buildCmd(t, dir, "gclock")
	waitPath := filepath.Join(dir, "gclock-wait.service")
	if err := os.WriteFile(waitPath, bytes.Replace(wait, []byte("ExecStart=/usr/local/bin/gclock"), []byte("ExecStart="+gclock), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path, waitPath).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify gclockd.service gclock-wait.service: %v\n%s", err, out)
	}
}

// TestSystemdNotify: the unit asks for the notify protocol the daemon
// speaks (daemon/sdnotify.go: READY=1 once synced, WATCHDOG=1 from the main
// loop), and gclock-wait.service waits with gclock waitsync, as
// chrony-wait.service does.
func TestSystemdNotify(t *testing.T) {
	unit, err := os.ReadFile("gclockd.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nType=notify\n", "\nNotifyAccess=main\n", "\nWatchdogSec="} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("gclockd.service lacks %q", strings.TrimSpace(want))
		}
	}
	wait, err := os.ReadFile("gclock-wait.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=/usr/local/bin/gclock waitsync ", "After=gclockd.service", "Type=oneshot"} {
		if !bytes.Contains(wait, []byte(want)) {
			t.Errorf("gclock-wait.service lacks %q", want)
		}
	}
}

// buildCmd builds ./cmd/NAME of this module into dir.
func buildCmd(t *testing.T, dir, name string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	return bin
}

// k8s is the part of the Kubernetes objects the test reads.
type k8s struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec struct {
				HostNetwork bool   `yaml:"hostNetwork"`
				DNSPolicy   string `yaml:"dnsPolicy"`
				Containers  []struct {
					Name  string   `yaml:"name"`
					Image string   `yaml:"image"`
					Args  []string `yaml:"args"`
					Ports []struct {
						ContainerPort int    `yaml:"containerPort"`
						HostPort      int    `yaml:"hostPort"`
						Protocol      string `yaml:"protocol"`
					} `yaml:"ports"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
						ReadOnly  bool   `yaml:"readOnly"`
					} `yaml:"volumeMounts"`
					ReadinessProbe probe `yaml:"readinessProbe"`
					LivenessProbe  probe `yaml:"livenessProbe"`
				} `yaml:"containers"`
				Volumes []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
					HostPath *struct {
						Path string `yaml:"path"`
						Type string `yaml:"type"`
					} `yaml:"hostPath"`
					Secret *struct {
						SecretName  string `yaml:"secretName"`
						DefaultMode *int   `yaml:"defaultMode"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// probe is a container's HTTP probe.
type probe struct {
	HTTPGet struct {
		Host string `yaml:"host"`
		Path string `yaml:"path"`
		Port int    `yaml:"port"`
	} `yaml:"httpGet"`
}

// TestDaemonSet parses the DaemonSet and its ConfigMap and checks what the
// daemon needs: the host's network, the config file where -config says, a
// valid production config in it, -auto-id, the page on a host directory,
// the sync and metrics ports.
func TestDaemonSet(t *testing.T) {
	f, err := os.Open("kubernetes/gclock-daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	objs := map[string]k8s{}
	for {
		var o k8s
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("gclock-daemonset.yaml: %v", err)
		}
		objs[o.Kind] = o
	}
	ds, ok := objs["DaemonSet"]
	if !ok {
		t.Fatalf("no DaemonSet among %v", objs)
	}
	cm, ok := objs["ConfigMap"]
	if !ok {
		t.Fatalf("no ConfigMap")
	}
	pod := ds.Spec.Template.Spec
	if !pod.HostNetwork {
		t.Errorf("hostNetwork is not true: the daemons must use the nodes' addresses and kernel stamps")
	}
	if pod.DNSPolicy != "ClusterFirstWithHostNet" {
		t.Errorf("dnsPolicy %q, want ClusterFirstWithHostNet with hostNetwork", pod.DNSPolicy)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	i := slices.Index(c.Args, "-config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("args %q: no -config FILE", c.Args)
	}
	cfgPath := c.Args[i+1]
	if !slices.Contains(c.Args, "-auto-id") {
		t.Errorf("args %q: want -auto-id (one ConfigMap for every node)", c.Args)
	}
	volumes := map[string]int{}
	for j, v := range pod.Volumes {
		volumes[v.Name] = j
	}
	// mountOf returns the volume mounted at the directory holding path.
	mountOf := func(path string) (name string, readOnly bool) {
		for _, m := range c.VolumeMounts {
			if filepath.Dir(path) == filepath.Clean(m.MountPath) {
				return m.Name, m.ReadOnly
			}
		}
		return "", false
	}
	name, _ := mountOf(cfgPath)
	j, ok := volumes[name]
	if name == "" || !ok || pod.Volumes[j].ConfigMap == nil || pod.Volumes[j].ConfigMap.Name != cm.Metadata.Name {
		t.Fatalf("-config %s: its directory is not a volume of ConfigMap %q", cfgPath, cm.Metadata.Name)
	}
	text, ok := cm.Data[filepath.Base(cfgPath)]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %q (keys: %v)", cm.Metadata.Name, filepath.Base(cfgPath), cm.Data)
	}
	cfg, err := daemon.Parse([]byte(text))
	if err != nil {
		t.Fatalf("the ConfigMap's %s: %v", filepath.Base(cfgPath), err)
	}
	checkProduction(t, "ConfigMap", cfg)
	page, ro := mountOf(cfg.GlobalTime.ShmPath)
	if j, ok := volumes[page]; page == "" || ro || !ok || pod.Volumes[j].HostPath == nil {
		t.Errorf("global_time.shm_path %s: its directory is not a writable hostPath volume (programs on the node could not read it)", cfg.GlobalTime.ShmPath)
	}
	ports := map[string]bool{}
	for _, p := range c.Ports {
		if p.HostPort != 0 && p.HostPort != p.ContainerPort {
			t.Errorf("port %d mapped to host port %d: with hostNetwork they must match", p.ContainerPort, p.HostPort)
		}
		ports[fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol)] = true
	}
	for _, p := range cfg.Peers {
		_, port, _ := net.SplitHostPort(p.Address)
		if !ports[port+"/UDP"] {
			t.Errorf("peer %d (%s): port %s/UDP not declared", p.ID, p.Address, port)
		}
	}
	// Metrics on the node's loopback: probed there by the kubelet (with
	// hostNetwork the node's loopback is the pod's), no port exposed.
	mhost, mport, _ := net.SplitHostPort(cfg.Metrics.Listen)
	if ports[mport+"/TCP"] {
		t.Errorf("metrics.listen %s: port %s/TCP declared, but the metrics listen on loopback only", cfg.Metrics.Listen, mport)
	}
	// /readyz answers 503 until synced (/status.json answered 200 while
	// unsynced); /healthz while the daemon answers.
	for name, p := range map[string]probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if g := p.HTTPGet; strconv.Itoa(g.Port) != mport || g.Path != name || g.Host != mhost {
			t.Errorf("probe %+v: want %s on the metrics address %s:%s", g, name, mhost, mport)
		}
	}
	// The key: a Secret of mode 0400 at its own path, apart from the
	// ConfigMap's, where auth.key_file points.
	kname, kro := mountOf(cfg.Auth.KeyFile)
	j, ok = volumes[kname]
	switch {
	case kname == "" || !ok || pod.Volumes[j].Secret == nil:
		t.Errorf("auth.key_file %s: its directory is not a Secret volume", cfg.Auth.KeyFile)
	case !kro:
		t.Errorf("the key's Secret is mounted writable")
	case pod.Volumes[j].Secret.DefaultMode == nil || *pod.Volumes[j].Secret.DefaultMode != 0o400:
		t.Errorf("the key's Secret %q: defaultMode %v, want 0400 (the daemon refuses a key others can read)", pod.Volumes[j].Secret.SecretName, pod.Volumes[j].Secret.DefaultMode)
	}
	var cfgMount, keyMount string
	for _, m := range c.VolumeMounts {
		switch m.Name {
		case name:
			cfgMount = filepath.Clean(m.MountPath)
		case kname:
			keyMount = filepath.Clean(m.MountPath)
		}
	}
	if keyMount == "" || cfgMount == "" || keyMount == cfgMount || strings.HasPrefix(keyMount+"/", cfgMount+"/") || strings.HasPrefix(cfgMount+"/", keyMount+"/") {
		t.Errorf("the key is mounted at %q, the config at %q: want separate paths, neither inside the other", keyMount, cfgMount)
	}
}

// TestGrafanaDashboard checks that every metric the dashboard queries is one
// the daemon exports (daemon/testdata/metrics.golden), and that it shows
// the main ones.
func TestGrafanaDashboard(t *testing.T) {
	golden, err := os.ReadFile("../daemon/testdata/metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllSubmatch(golden, -1) {
		exported[string(m[1])] = true
	}
	if len(exported) < 20 {
		t.Fatalf("only %d metrics in the golden file", len(exported))
	}
	// Metrics exported only with a feature on (ntp.listen, refclock.sock)
	// are not in the golden file: their declarations in the daemon count.
	srcs, _ := filepath.Glob("../daemon/*.go")
	for _, f := range srcs {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, _ := os.ReadFile(f)
		for _, m := range regexp.MustCompile(`NewDesc\("(gclock_[a-z_]+)"`).FindAllSubmatch(b, -1) {
			exported[string(m[1])] = true
		}
	}
	raw, err := os.ReadFile("grafana/gclock-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	queried := map[string]bool{}
	name := regexp.MustCompile(`\bgclock_[a-z_]+`)
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				queried[n] = true
				if !exported[n] {
					t.Errorf("panel %q queries %s, which the daemon does not export", p.Title, n)
				}
			}
		}
	}
	for _, n := range []string{"gclock_served_status", "gclock_served_max_error_seconds", "gclock_max_error_seconds", "gclock_frequency_adjustment_ratio",
		"gclock_last_offset_seconds", "gclock_rms_offset_seconds", "gclock_update_interval_seconds", "gclock_global_period_seconds",
		"gclock_build_info"} {
		if !queried[n] {
			t.Errorf("the dashboard does not show %s", n)
		}
	}
}

// TestSlurmRecipe runs deploy/slurm/gclock-run.sh under a fake Slurm: three
// "nodes" on 127.0.0.1-3 of this machine, srun running one task per node
// here. The command it runs reads every node's page: all synced, node i+1
// on the i-th node, the first node the reference.
func TestSlurmRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gclock and runs three daemons")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	buildCmd(t, bin, "gclockd")
	buildCmd(t, bin, "gclock")
	writeExe(t, filepath.Join(bin, "scontrol"), `#!/usr/bin/env bash
[ "$1 $2" = "show hostnames" ] || { echo "fake scontrol: $*" >&2; exit 1; }
printf '%s\n' $FAKE_NODES
`)
	// srun [options] CMD...: --ntasks N copies of CMD, SLURM_NODEID 0..N-1;
	// SIGTERM goes to the copies.
	writeExe(t, filepath.Join(bin, "srun"), `#!/usr/bin/env bash
n=1
while [ $# -gt 0 ]; do
  case $1 in
    --ntasks=*) n=${1#--ntasks=} ;;
    --*) ;;
    *) break ;;
  esac
  shift
done
pids=()
for ((i = 0; i < n; i++)); do SLURM_NODEID=$i "$@" & pids+=($!); done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM
rc=0
for p in "${pids[@]}"; do
  while true; do wait "$p"; s=$?; kill -0 "$p" 2>/dev/null || break; done
  [ $s -eq 0 ] || rc=$s
done
exit $rc
`)
	t.Run("default", func(t *testing.T) {
		gen, _ := runSlurm(t, bin, "")
		c, err := daemon.Parse(gen)
		if err != nil {
			t.Fatalf("the generated config: %v\n%s", err, gen)
		}
		if c.Clock.Source != daemon.ClockRaw || c.RealTime.Mode != daemon.RealTimeReference || c.Sync.Estimator != "center" {
			t.Errorf("generated config: clock %s, real_time %s, estimator %s; want raw, reference-realtime, center", c.Clock.Source, c.RealTime.Mode, c.Sync.Estimator)
		}
		checkJobKey(t, c)
	})
	// GCLOCK_CONFIG: the user's settings are kept, their node, peers,
	// reference and topology replaced by the allocation's.
	t.Run("GCLOCK_CONFIG", func(t *testing.T) {
		user := filepath.Join(t.TempDir(), "user.yaml")
		os.WriteFile(user, []byte(`node: {id: 7}
peers:
  - {id: 7, address: 203.0.113.7:3190}
reference:
  order: [7]
topology: {kind: ring}
sync:
  estimator: hull
  stale_after: 90s
clock: {source: raw}
real_time: {mode: reference-realtime, upstream: none}
log: {format: json}
auth: {insecure: true}
`), 0o644)
		gen, logs := runSlurm(t, bin, user)
		c, err := daemon.Parse(gen)
		if err != nil {
			t.Fatalf("the generated config: %v\n%s", err, gen)
		}
		if c.Sync.Estimator != "hull" || c.Sync.StaleAfter != daemon.Duration(90*time.Second) || c.Log.Format != "json" ||
			len(c.Peers) != 3 || c.Peers[0].ID != 1 || c.Topology.Kind != "tree" {
			t.Errorf("generated config from GCLOCK_CONFIG:\n%s", gen)
		}
		for _, l := range logs {
			if b, _ := os.ReadFile(l); !bytes.HasPrefix(b, []byte("{")) {
				t.Errorf("%s: log.format json not applied: %s", l, lastLines(b, 2))
			}
		}
		checkJobKey(t, c)
	})
}

// checkJobKey: the job's daemons authenticate with a key made for the
// job, mode 0600 (a real allocation's nodes are off loopback: no key, no
// daemon), the user's own auth section replaced.
func checkJobKey(t *testing.T, c daemon.Config) {
	t.Helper()
	if c.Auth.KeyFile == "" || c.Auth.Insecure {
		t.Fatalf("generated config: auth %+v, want the job's key", c.Auth)
	}
	fi, err := os.Stat(c.Auth.KeyFile)
	if err != nil {
		t.Fatalf("the job's key: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the job's key %s: mode %v, want 0600", c.Auth.KeyFile, fi.Mode().Perm())
	}
	if _, err := keyfile.Read(c.Auth.KeyFile); err != nil {
		t.Errorf("the job's key: %v", err)
	}
}

// runSlurm runs gclock-run.sh under the fake Slurm of bin, with the
// daemon settings of userConfig ("": the script's), checks the three
// pages from inside the job, and returns the generated config and the
// daemons' log files.
func runSlurm(t *testing.T, bin, userConfig string) ([]byte, []string) {
	t.Helper()
	l, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.LocalAddr().(*net.UDPAddr).Port
	l.Close()
	dir := t.TempDir()
	out := filepath.Join(dir, "pages.json")
	// The command is what a user runs: one task per node reading "its"
	// page through GCLOCK_PAGE, whose %n each reader expands with
	// SLURM_NODEID (it was exported raw, and readers did not expand it).
	check := `srun --ntasks=3 bash -c 'gclock now -json > "$0.$SLURM_NODEID"' ` + out + `; cat ` + out + `.0 ` + out + `.1 ` + out + `.2 > ` + out
	cmd := exec.Command("bash", "slurm/gclock-run.sh", "bash", "-c", check)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"),
		"SLURM_JOB_ID=4242", "SLURM_JOB_NODELIST=fake[1-3]", "FAKE_NODES=127.0.0.1 127.0.0.2 127.0.0.3",
		"GCLOCK_PORT="+strconv.Itoa(port), "GCLOCK_PAGE="+filepath.Join(dir, "page-%j-%n"),
		"GCLOCK_DIR="+filepath.Join(dir, "job"), "GCLOCK_WAIT=30",
		// This machine's kernel clock may be unsynchronised: serve CLOCK_REALTIME as it is.
		"GCLOCK_UPSTREAM=none")
	if userConfig != "" {
		cmd.Env = append(cmd.Env, "GCLOCK_CONFIG="+userConfig)
	}
	var stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("gclock-run.sh still running after 90 s:\n%s", stderr.String())
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "job", "gclockd-node*.log"))
	var all strings.Builder
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		fmt.Fprintf(&all, "== %s\n%s", filepath.Base(l), b)
	}
	if err != nil {
		t.Fatalf("gclock-run.sh: %v\n%s\n%s", err, stderr.String(), all.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	jd := json.NewDecoder(bytes.NewReader(raw))
	for i := 0; i < 3; i++ {
		var p struct {
			Status    string `json:"status"`
			Node      uint32 `json:"node"`
			Reference uint32 `json:"reference"`
			Page      string `json:"page"`
		}
		if err := jd.Decode(&p); err != nil {
			t.Fatalf("page %d: %v\n%s", i, err, raw)
		}
		if p.Status != "synced" || p.Node != uint32(i+1) || p.Reference != 1 {
			t.Errorf("page %s: status %s, node %d, reference %d; want synced, node %d, reference 1", p.Page, p.Status, p.Node, p.Reference, i+1)
		}
	}
	if len(logs) != 3 {
		t.Errorf("%d daemon logs, want 3: %v", len(logs), logs)
	}
	// The daemons were stopped (their logs end with "daemon stopping").
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if !bytes.Contains(b, []byte("daemon stopping")) {
			t.Errorf("%s: the daemon did not stop cleanly:\n%s", l, lastLines(b, 5))
		}
	}
	if t.Failed() {
		t.Logf("gclock-run.sh:\n%s\n%s", stderr.String(), all.String())
	}
	gen, err := os.ReadFile(filepath.Join(dir, "job", "gclock.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return gen, logs
}

// TestSlurmRecipeOutsideSlurm: outside an allocation the script says so.
func TestSlurmRecipeOutsideSlurm(t *testing.T) {
	cmd := exec.Command("bash", "slurm/gclock-run.sh", "true")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(s string) bool { return strings.HasPrefix(s, "SLURM_") })
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not inside a Slurm allocation") {
		t.Errorf("outside Slurm: %v, %q; want an error saying so", err, out)
	}
}

func writeExe(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

func lastLines(b []byte, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAlertRules: every metric the shipped Prometheus rules query is one
// the daemon exports (daemon/testdata/metrics.golden, or a reason of its
// drop counter that the daemon names), and promtool (Debian's prometheus
// package, installed by ci/deps.sh) checks the rules and runs their unit
// tests: each alert fires on the series that should raise it.
func TestAlertRules(t *testing.T) {
	rules, err := os.ReadFile("prometheus/gclock-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("../daemon/testdata/metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`\bgclock_[a-z_]+`).FindAllString(string(rules), -1)
	if len(used) < 5 {
		t.Fatalf("the rules query %d gclock metrics: %v", len(used), used)
	}
	for _, m := range used {
		if !bytes.Contains(golden, []byte("# TYPE "+m+" ")) {
			t.Errorf("prometheus/gclock-rules.yaml queries %s, which the daemon does not export", m)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian's prometheus package; ci/deps.sh installs it): the rules' syntax and unit tests not checked")
	}
	for _, args := range [][]string{{"check", "rules", "gclock-rules.yaml"}, {"test", "rules", "gclock-rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
