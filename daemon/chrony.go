package daemon

// chronyd's tracking report, read over its command socket as `chronyc
// tracking` does (chrony's candm protocol, version 6): the stratum,
// reference id, root delay and dispersion of what disciplines the
// reference's CLOCK_REALTIME, which the kernel's adjtimex does not say.
// Only REQ_TRACKING is sent: a read-only request chronyd answers on its
// Unix socket (/run/chrony/chronyd.sock) to root and its own user.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/gclock/gclock/engine/realtime"
)

// DefaultChronySocket is chronyd's command socket on Debian, Ubuntu and
// Fedora (real_time.chrony_socket).
const DefaultChronySocket = "/run/chrony/chronyd.sock"

// candm protocol constants (chrony's candm.h).
const (
	candmVersion     = 6
	candmRequest     = 1 // PKT_TYPE_CMD_REQUEST
	candmReply       = 2 // PKT_TYPE_CMD_REPLY
	candmReqTracking = 33
	candmRpyTracking = 5
	candmReqHeader   = 20 // version .. pad2
	candmRpyHeader   = 28 // version .. pad5
	// candmTrackingLen: RPY_Tracking up to its EOR (ref_id 4, IPAddr 20,
	// stratum 2, leap 2, ref_time 12, nine Floats 36).
	candmTrackingLen = 76
	// A request is padded to its reply's length (chrony refuses shorter
	// ones: no amplification).
	candmTrackingReqLen = candmRpyHeader + candmTrackingLen
)

// chronyTracking is what the upstream takes from chronyd's tracking.
type chronyTracking struct {
	RefID   uint32
	Stratum uint16
	// Leap is chronyd's leap status: 0 normal, 1 insert, 2 delete, 3
	// unsynchronised.
	Leap                uint16
	RootDelay, RootDisp float64 // s
}

// chronyTrackingRequest is REQ_TRACKING with sequence seq.
func chronyTrackingRequest(seq uint32) []byte {
	b := make([]byte, candmTrackingReqLen)
	b[0], b[1] = candmVersion, candmRequest
	binary.BigEndian.PutUint16(b[4:], candmReqTracking)
	binary.BigEndian.PutUint32(b[8:], seq)
	return b
}

// chronyFloat decodes chrony's 32-bit float: a 7-bit signed exponent and
// a 25-bit signed coefficient, value coef * 2^(exp - 25).
func chronyFloat(x uint32) float64 {
	exp := int(x >> 25)
	if exp >= 64 {
		exp -= 128
	}
	coef := int32(x & (1<<25 - 1))
	if coef >= 1<<24 {
		coef -= 1 << 25
	}
	return math.Ldexp(float64(coef), exp-25)
}

// errChrony is wrapped by the errors of parseChronyTracking.
var errChrony = errors.New("chronyd tracking reply refused")

// parseChronyTracking decodes chronyd's reply to the tracking request seq.
func parseChronyTracking(b []byte, seq uint32) (chronyTracking, error) {
	bad := func(format string, a ...any) (chronyTracking, error) {
		return chronyTracking{}, fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), errChrony)
	}
	if len(b) < candmRpyHeader+candmTrackingLen {
		return bad("%d bytes, want %d", len(b), candmRpyHeader+candmTrackingLen)
	}
	be := binary.BigEndian
	switch {
	case b[0] != candmVersion || b[1] != candmReply:
		return bad("version %d type %d, want %d %d", b[0], b[1], candmVersion, candmReply)
	case be.Uint16(b[4:]) != candmReqTracking || be.Uint16(b[6:]) != candmRpyTracking:
		return bad("command %d reply %d, want %d %d", be.Uint16(b[4:]), be.Uint16(b[6:]), candmReqTracking, candmRpyTracking)
	case be.Uint16(b[8:]) != 0:
		return bad("status %d (chronyd refused the request)", be.Uint16(b[8:]))
	case be.Uint32(b[16:]) != seq:
		return bad("sequence %d, want %d", be.Uint32(b[16:]), seq)
	}
	d := b[candmRpyHeader:]
	t := chronyTracking{RefID: be.Uint32(d[0:]), Stratum: be.Uint16(d[24:]), Leap: be.Uint16(d[26:]),
		RootDelay: chronyFloat(be.Uint32(d[40+6*4:])), RootDisp: chronyFloat(be.Uint32(d[40+7*4:]))}
	switch {
	case t.Leap > 3:
		return bad("leap status %d", t.Leap)
	case t.Stratum > 16:
		return bad("stratum %d", t.Stratum)
	case !(t.RootDelay >= 0 && t.RootDelay < 1000):
		return bad("root delay %g s", t.RootDelay)
	case !(t.RootDisp >= 0 && t.RootDisp < 1000):
		return bad("root dispersion %g s", t.RootDisp)
	}
	return t, nil
}

var chronySeq atomic.Uint32

// queryChronyTracking asks chronyd at the Unix socket path for its
// tracking report, from a client socket in clientDir that chronyd's group
// may write to (chronyclient.go; chronyd answers the sender's path; it
// does not answer an abstract one); the client socket is removed after.
func queryChronyTracking(path, clientDir string, timeout time.Duration) (chronyTracking, error) {
	if _, err := os.Stat(path); err != nil {
		return chronyTracking{}, fmt.Errorf("chronyd command socket: %w", err)
	}
	lp := filepath.Join(clientDir, fmt.Sprintf("gclock-chronyc.%d.%d.sock", os.Getpid(), chronySeq.Add(1)))
	local := &net.UnixAddr{Name: lp, Net: "unixgram"}
	c, err := net.DialUnix("unixgram", local, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return chronyTracking{}, fmt.Errorf("chronyd command socket %s: %w", path, err)
	}
	defer os.Remove(lp)
	defer c.Close()
	if err := shareWithChronyd(lp, path); err != nil {
		return chronyTracking{}, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	seq := chronySeq.Add(1)
	if _, err := c.Write(chronyTrackingRequest(seq)); err != nil {
		return chronyTracking{}, fmt.Errorf("chronyd command socket %s: %w", path, err)
	}
	buf := make([]byte, 1024)
	n, err := c.Read(buf)
	if err != nil {
		return chronyTracking{}, fmt.Errorf("chronyd command socket %s: %w", path, err)
	}
	t, err := parseChronyTracking(buf[:n], seq)
	if err != nil {
		return chronyTracking{}, fmt.Errorf("chronyd command socket %s: %w", path, err)
	}
	return t, nil
}

// withChrony completes the kernel's upstream with chronyd's tracking:
// chronyd's stratum (the reference serves one more), its reference id,
// root delay and dispersion; unsynchronised if chronyd says so (leap
// status 3) even when the kernel does not; chronyd's leap announcement
// when the kernel has none (chronyd's leapsecmode slew announces without
// STA_INS). maxerror stays the kernel's: chronyd sets it to its root
// distance, and it grows in the kernel between updates.
func withChrony(u realtime.Upstream, t chronyTracking) realtime.Upstream {
	if t.Leap == 3 || t.Stratum == 0 || t.Stratum > 15 {
		u.Synced = false
		return u
	}
	u.Stratum, u.RefID = uint8(t.Stratum), t.RefID
	u.RootDelay = min(int64(math.Ceil(t.RootDelay*1e9)), 1<<40)
	u.RootDisp = min(int64(math.Ceil(t.RootDisp*1e9)), 1<<40)
	if u.Leap == realtime.LeapNone && (t.Leap == 1 || t.Leap == 2) {
		u.Leap = uint8(t.Leap)
	}
	return u
}
