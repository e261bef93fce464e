package daemon

// chronyd's tracking report, read over its command socket as `chronyc
// tracking` does (chrony's candm protocol, version 6; the protocol is
// internal/chronycmd): the stratum, reference id, root delay and
// dispersion of what disciplines the reference's CLOCK_REALTIME, which
// the kernel's adjtimex does not say. Only REQ_TRACKING is sent: a
// read-only request chronyd answers on its Unix socket
// (/run/chrony/chronyd.sock) to root and its own user.

import (
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/internal/chronycmd"
)

// DefaultChronySocket is chronyd's command socket on Debian, Ubuntu and
// Fedora (real_time.chrony_socket).
const DefaultChronySocket = "/run/chrony/chronyd.sock"

var chronySeq atomic.Uint32

// queryChronyTracking asks chronyd at the Unix socket path for its
// tracking report, from a client socket in clientDir that chronyd's group
// may write to (chronyclient.go; chronyd answers the sender's path; it
// does not answer an abstract one); the client socket is removed after.
func queryChronyTracking(path, clientDir string, timeout time.Duration) (chronycmd.Tracking, error) {
	if _, err := os.Stat(path); err != nil {
		return chronycmd.Tracking{}, fmt.Errorf("chronyd command socket: %w", err)
	}
	lp := filepath.Join(clientDir, fmt.Sprintf("gclock-chronyc.%d.%d.sock", os.Getpid(), chronySeq.Add(1)))
	local := &net.UnixAddr{Name: lp, Net: "unixgram"}
	c, err := net.DialUnix("unixgram", local, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return chronycmd.Tracking{}, fmt.Errorf("chronyd command socket %s: %w", path, err)
	}
	defer os.Remove(lp)
	defer c.Close()
	if err := shareWithChronyd(lp, path); err != nil {
		return chronycmd.Tracking{}, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	seq := chronySeq.Add(1)
	if _, err := c.Write(chronycmd.TrackingRequest(seq)); err != nil {
		return chronycmd.Tracking{}, fmt.Errorf("chronyd command socket %s: %w", path, err)
	}
	buf := make([]byte, 1024)
	n, err := c.Read(buf)
	if err != nil {
		return chronycmd.Tracking{}, fmt.Errorf("chronyd command socket %s: %w", path, err)
	}
	t, err := chronycmd.ParseTracking(buf[:n], seq)
	if err != nil {
		return chronycmd.Tracking{}, fmt.Errorf("chronyd command socket %s: %w", path, err)
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
func withChrony(u realtime.Upstream, t chronycmd.Tracking) realtime.Upstream {
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
