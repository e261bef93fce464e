package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
)

// Restarts and state (docs/daemon.md, "Restarts and state").
//
// A daemon with state.file set keeps, in a small JSON file, what it learned
// and a restart would otherwise forget: its last local->global mapping
// while synced (engine.Prior: the line with the learned drift and a width
// covering its bounds) and the largest round and period-change numbers it
// sent (so that its children accept a restarted source's rounds at once).
// It writes the file every state.save_every and at shutdown, atomically
// (temporary file, fsync, rename, fsync of the directory; mode 0600). A
// starting daemon reads it, validates every field, and uses it only when it
// was written by the same node on the same local clock: the same boot
// (/proc/sys/kernel/random/boot_id; CLOCK_MONOTONIC_RAW restarts at a
// reboot) and the same clock configuration, at a local time not after now
// and not older than state.max_age. Anything else is logged and ignored:
// the daemon starts as if there were no file.

// StateConfig is the `state` section.
type StateConfig struct {
	// File is the state file (absolute path, e.g.
	// /var/lib/gclock/state.json; its directory is created 0700 if
	// missing). Empty (the default): no state is kept.
	File string `yaml:"file,omitempty"`
	// SaveEvery is how often the file is rewritten (0: 5s).
	SaveEvery Duration `yaml:"save_every,omitempty"`
	// MaxAge: a file written longer ago than this (local clock) is
	// ignored (0: 1h). At 100 ppm a prior an hour old is 360 ms wide.
	MaxAge Duration `yaml:"max_age,omitempty"`
}

// Defaults of StateConfig's zero values.
const (
	defaultStateSaveEvery = 5 * time.Second
	defaultStateMaxAge    = time.Hour
)

func (s StateConfig) saveEvery() time.Duration {
	if s.SaveEvery > 0 {
		return s.SaveEvery.D()
	}
	return defaultStateSaveEvery
}

func (s StateConfig) maxAge() time.Duration {
	if s.MaxAge > 0 {
		return s.MaxAge.D()
	}
	return defaultStateMaxAge
}

func (s *StateConfig) validate(e *errs) {
	if s.File != "" && !filepath.IsAbs(s.File) {
		e.add("state.file", "%q: want an absolute path (/var/lib/gclock/state.json)", s.File)
	}
	if s.SaveEvery < 0 || (s.SaveEvery > 0 && s.SaveEvery.D() < 100*time.Millisecond) || s.SaveEvery.D() > time.Hour {
		e.add("state.save_every", "%v outside [100ms, 1h] (0: %v)", s.SaveEvery, defaultStateSaveEvery)
	}
	if s.MaxAge < 0 || s.MaxAge.D() > 30*24*time.Hour {
		e.add("state.max_age", "%v outside [0, 720h] (0: %v)", s.MaxAge, defaultStateMaxAge)
	}
}

// stateVersion is the state file's format version.
const stateVersion = 1

// maxStateBytes bounds what is read of a state file.
const maxStateBytes = 64 << 10

// savedState is the content of a state file.
type savedState struct {
	Version int    `json:"version"`
	Node    uint32 `json:"node"`
	// BootID is the kernel's boot id when the file was written; Clock
	// names the local clock (see clockIdentity).
	BootID string `json:"boot_id"`
	Clock  string `json:"clock"`
	// Saved is the local clock (ns) when the file was written.
	Saved int64 `json:"saved_local_ns"`
	// Reference is the reference global time followed; a prior is used
	// only under the same reference.
	Reference uint32 `json:"reference"`
	// MaxRound and MaxSeq are the largest round and period-change numbers
	// the node sent (engine.Member.Numbers).
	MaxRound uint32 `json:"max_round"`
	MaxSeq   uint32 `json:"max_seq"`
	// Prior is the last mapping while synced; absent if the node never was
	// (or is the reference).
	Prior *savedPrior `json:"prior,omitempty"`
	// Scale is the definition of global time this node gave as the
	// reference of a term (engine.Member.Scale): a restart that finds it
	// still the reference of that term continues it (engine.Member.
	// RestoreScale) instead of restarting global time from its clock.
	Scale *savedScale `json:"scale,omitempty"`
}

// savedScale is a term's scale in the file: global time is
// y0 + (local - x0)(1 + skew) on this node's local clock.
type savedScale struct {
	Term uint32  `json:"term"`
	X0   int64   `json:"x0"`
	Y0   int64   `json:"y0"`
	Skew float64 `json:"skew"`
}

// savedPrior is engine.Prior in the file: the mapping anchored at X0
// (local ns), the local time it was taken.
type savedPrior struct {
	X0      int64   `json:"x0"`
	Y0      int64   `json:"y0"`
	Skew    float64 `json:"skew"`
	W0      int64   `json:"w0"`
	SkewErr float64 `json:"skew_err"`
	Wander  float64 `json:"wander"`
}

// enginePrior converts the file's prior.
func (p *savedPrior) enginePrior() engine.Prior {
	return engine.Prior{Saved: p.X0, Mapping: estimate.Mapping{X0: p.X0, Y0: p.Y0, Skew: p.Skew, W0: p.W0,
		SkewErr: p.SkewErr, Wander: p.Wander, Valid: true}}
}

func statePrior(p engine.Prior) *savedPrior {
	m := p.Mapping
	return &savedPrior{X0: p.Saved, Y0: m.Y0, Skew: m.Skew, W0: m.W0, SkewErr: m.SkewErr, Wander: m.Wander}
}

var bootIDRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// parseState decodes and validates a state file's content. Errors name the
// field.
func parseState(data []byte) (savedState, error) {
	var s savedState
	if len(data) > maxStateBytes {
		return s, fmt.Errorf("%d bytes, more than %d", len(data), maxStateBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return savedState{}, fmt.Errorf("not a state file: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return savedState{}, errors.New("trailing data after the JSON object")
	}
	bad := func(field string, format string, args ...any) (savedState, error) {
		return savedState{}, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Version != stateVersion:
		return bad("version", "%d, want %d", s.Version, stateVersion)
	case s.Node == 0:
		return bad("node", "missing or 0")
	case !bootIDRe.MatchString(s.BootID):
		return bad("boot_id", "%q is not a boot id (8-4-4-4-12 lower-case hex digits)", s.BootID)
	case s.Clock == "" || len(s.Clock) > 512:
		return bad("clock", "want a clock identity of 1..512 bytes, got %d", len(s.Clock))
	case s.Saved <= 0 || s.Saved >= engine.MaxMsgTime:
		return bad("saved_local_ns", "%d outside (0, 2^62)", s.Saved)
	case s.Reference == 0:
		return bad("reference", "missing or 0")
	}
	if c := s.Scale; c != nil {
		switch {
		case c.X0 <= -engine.MaxMsgTime || c.X0 >= engine.MaxMsgTime:
			return bad("scale.x0", "%d outside +-2^62 ns", c.X0)
		case c.Y0 <= -engine.MaxMsgTime || c.Y0 >= engine.MaxMsgTime:
			return bad("scale.y0", "%d outside +-2^62 ns", c.Y0)
		case math.IsNaN(c.Skew) || math.Abs(c.Skew) > engine.MaxMsgSkew:
			return bad("scale.skew", "%v: want |skew| <= %g", c.Skew, engine.MaxMsgSkew)
		}
	}
	if p := s.Prior; p != nil {
		if p.X0 <= 0 || p.X0 > s.Saved {
			return bad("prior.x0", "%d: want a local time in (0, saved_local_ns %d]", p.X0, s.Saved)
		}
		if err := engine.CheckPrior(p.enginePrior()); err != nil {
			return bad("prior", "%v", strings.TrimSuffix(err.Error(), ": "+engine.ErrConfig.Error()))
		}
	}
	return s, nil
}

// marshal encodes the state as the file holds it.
func (s savedState) marshal() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// bootIDPath is where the kernel's boot id is read (a variable for tests).
var bootIDPath = "/proc/sys/kernel/random/boot_id"

// bootID returns the kernel's boot id.
func bootID() (string, error) {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if !bootIDRe.MatchString(id) {
		return "", fmt.Errorf("%s: %q is not a boot id", bootIDPath, id)
	}
	return id, nil
}

// clockIdentity names the daemon's local clock: equal identities on the
// same boot are the same clock. An emulated clock without origin_raw
// starts at the daemon's start, a new clock every time: "" (no state is
// restored on it).
func clockIdentity(c ClockConfig) string {
	if c.Source == ClockRaw {
		return "raw"
	}
	m := c.Emulated
	if m.OriginRaw == 0 {
		return ""
	}
	b, err := json.Marshal(m)
	if err != nil {
		return ""
	}
	return "emulated " + string(b)
}

// usable says why a parsed state cannot be used by this daemon ("" if it
// can): another node, boot or clock, written in the local clock's future
// or too long ago.
func (s savedState) usable(node uint32, boot, clockID string, now int64, maxAge time.Duration) string {
	switch {
	case s.Node != node:
		return fmt.Sprintf("written by node %d, this is node %d", s.Node, node)
	case boot == "":
		return "this boot's id is unknown"
	case s.BootID != boot:
		return fmt.Sprintf("written during another boot (%s; now %s): the local clock restarted", s.BootID, boot)
	case clockID == "":
		return "the emulated clock has no origin_raw: it restarts with the daemon"
	case s.Clock != clockID:
		return "written on another clock configuration"
	case s.Saved > now:
		return fmt.Sprintf("written at local time %d, after now (%d)", s.Saved, now)
	case now-s.Saved > int64(maxAge):
		return fmt.Sprintf("written %v ago, more than state.max_age %v", time.Duration(now-s.Saved).Round(time.Millisecond), maxAge)
	}
	return ""
}

// errStateFilePerm is returned for a state file that someone other than
// the daemon's user (or root) owns or could have written.
var errStateFilePerm = errors.New("state file writable by others")

// readState reads and validates the state file at path; a missing file
// is (savedState{}, false, nil). As the key file (keyfile.Read), the state file
// must be a regular file (not a symbolic link) owned by the daemon's user
// or root and not writable by group or others: anything else may have
// been planted (issue 17: a planted file gave stale reads 5 ms off with
// 2.3 us bounds) and is refused with errStateFilePerm.
func readState(path string) (savedState, bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return savedState{}, false, nil
	}
	if errors.Is(err, syscall.ELOOP) {
		return savedState{}, false, fmt.Errorf("state file %s is a symbolic link: %w", path, errStateFilePerm)
	}
	if err != nil {
		return savedState{}, false, fmt.Errorf("state file: %w", err)
	}
	defer f.Close()
	if err := checkStateFile(f, path); err != nil {
		return savedState{}, false, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return savedState{}, false, fmt.Errorf("state file %s: %w", path, err)
	}
	s, err := parseState(b)
	if err != nil {
		return savedState{}, false, fmt.Errorf("state file %s: %w", path, err)
	}
	return s, true, nil
}

// checkStateFile refuses a state file that is not a regular file, is
// writable by group or others, or is owned by another user than the
// daemon's (root excepted).
func checkStateFile(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("state file %s: not a regular file (%v): %w", path, fi.Mode().Type(), errStateFilePerm)
	}
	if p := fi.Mode().Perm(); p&0o022 != 0 {
		return fmt.Errorf("state file %s: mode %04o, writable by group or others: %w (the daemon writes it 0600)", path, p, errStateFilePerm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
			return fmt.Errorf("state file %s: owned by uid %d, not by the daemon's uid %d or root: %w", path, st.Uid, uid, errStateFilePerm)
		}
	}
	return nil
}

// writeState writes s to path atomically: a temporary file in the same
// directory (mode 0600), fsync, rename over path, fsync of the directory.
// A crash at any point leaves the old file or the new one, never a part.
func writeState(path string, s savedState) error {
	b, err := s.marshal()
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("state file %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := f.Write(b); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("state file %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("state file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("state file %s: fsync of the directory: %w", path, err)
		}
	}
	return nil
}

// stateKeeper is the daemon's side of the state file.
type stateKeeper struct {
	path    string
	boot    string
	clockID string
	prior   *engine.Prior // the last prior taken (or restored), kept across unsynced spells
	ref     engine.NodeID // the reference it was taken under
}

// roundMargin is added to the saved round and period-change numbers on a
// restart: the rounds sent after the last save (at most one per 5 ms per
// child between two saves) stay below it, and it is far below the 4096
// a child accepts ahead of the last round (engine.MaxRoundJump).
const roundMargin = 1024

// restoreState reads the state file at start. It returns the state to
// restore (nil: none) and logs why a file is not used. An error means the
// file's directory cannot be made.
func (n *node) restoreState(now int64) (*savedState, error) {
	c := n.cfg.State
	if c.File == "" {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(c.File), 0o700); err != nil {
		return nil, fmt.Errorf("state.file: %w", err)
	}
	k := &stateKeeper{path: c.File, clockID: clockIdentity(n.cfg.Clock)}
	var err error
	if k.boot, err = bootID(); err != nil {
		n.log.Warn("no boot id: the state file will be written but never restored", "err", err)
	}
	n.state = k
	s, ok, err := readState(c.File)
	switch {
	case errors.Is(err, errStateFilePerm):
		n.log.Warn("state file refused: starting fresh (it is replaced at the first save)", "err", err)
		return nil, nil
	case err != nil:
		n.log.Warn("state file ignored", "err", err)
		return nil, nil
	case !ok:
		n.log.Info("no state file yet", "path", c.File)
		return nil, nil
	}
	if why := s.usable(n.cfg.Node.ID, k.boot, k.clockID, now, c.maxAge()); why != "" {
		n.log.Warn("state file ignored", "path", c.File, "why", why)
		return nil, nil
	}
	return &s, nil
}

// applyState seeds the view and, under the same reference, the engine
// with a restored state. Called before the engine's first Tick.
func (n *node) applyState(s *savedState, ref engine.NodeID, eng *engine.Node) {
	n.eng.SetNumbers(s.MaxRound+roundMargin, s.MaxSeq+roundMargin)
	if c := s.Scale; c != nil {
		if err := n.eng.RestoreScale(c.Term, estimate.Mapping{X0: c.X0, Y0: c.Y0, Skew: c.Skew, Valid: true}); err != nil {
			n.log.Warn("state file's scale refused", "err", err)
		}
	}
	rounds, _ := n.eng.Numbers()
	if s.Prior == nil || engine.NodeID(s.Reference) != ref || eng.IsReference() {
		n.log.Info("state restored", "path", n.state.path, "rounds_from", rounds, "prior", false,
			"age", time.Duration(n.clk.now()-s.Saved).Round(time.Millisecond))
		return
	}
	p := s.Prior.enginePrior()
	if err := eng.Restore(p); err != nil {
		n.log.Warn("state file's prior refused", "err", err)
		return
	}
	n.state.prior, n.state.ref = &p, ref
	n.log.Info("state restored", "path", n.state.path, "rounds_from", rounds, "prior", true,
		"prior_age", time.Duration(n.clk.now()-p.Saved).Round(time.Millisecond), "skew_ppm", p.Mapping.Skew*1e6)
}

// saveState writes the state file (no-op without state.file).
func (n *node) saveState() {
	k := n.state
	if k == nil {
		return
	}
	now := n.clk.now()
	n.mu.Lock()
	x := n.lockedLocal(now)
	if _, frozen := n.eng.Frozen(); !frozen {
		if p, ok := n.eng.Node().Prior(x); ok {
			k.prior, k.ref = &p, n.reference()
		}
	}
	s := savedState{Version: stateVersion, Node: n.cfg.Node.ID, BootID: k.boot, Clock: k.clockID, Saved: x,
		Reference: uint32(n.reference())}
	s.MaxRound, s.MaxSeq = n.eng.Numbers()
	if term, fm, ok := n.eng.Scale(); ok {
		s.Scale = &savedScale{Term: term, X0: fm.X0, Y0: fm.Y0, Skew: fm.Skew}
	}
	if k.prior != nil && k.ref == n.reference() {
		s.Prior = statePrior(*k.prior)
	}
	n.mu.Unlock()
	if s.BootID == "" || s.Clock == "" {
		return // could never be restored
	}
	if err := writeState(k.path, s); err != nil {
		n.log.Warn("cannot save the state", "err", err)
	}
}
