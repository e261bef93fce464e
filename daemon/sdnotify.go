package daemon

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gclock/gclock/engine"
)

// notifier speaks systemd's notify protocol (sd_notify(3)) when the
// service manager asked for it ($NOTIFY_SOCKET, Type=notify): READY=1 once
// the served time is synced (UTC with real_time, else global time: so that units ordered after gclockd, and
// `systemctl start`, wait for synced time), STATUS= with the status as it
// changes, WATCHDOG=1 from the main loop every half $WATCHDOG_USEC (a
// wedged loop stops the pings and systemd restarts the daemon), STOPPING=1
// at shutdown. Without $NOTIFY_SOCKET every method does nothing.
type notifier struct {
	mu       sync.Mutex
	addr     *net.UnixAddr
	conn     *net.UnixConn
	ready    bool
	status   string
	watchdog time.Duration // 0: no watchdog asked for
	lastPing time.Time
	err      error // the first send error, reported once
}

// newNotifier reads the service manager's environment. WATCHDOG_PID, when
// set, must be this process (sd_watchdog_enabled's rule).
func newNotifier(getenv func(string) string) (*notifier, error) {
	n := &notifier{}
	path := getenv("NOTIFY_SOCKET")
	if path == "" {
		return n, nil
	}
	if !strings.HasPrefix(path, "/") && !strings.HasPrefix(path, "@") {
		return nil, fmt.Errorf("NOTIFY_SOCKET %q: want an absolute path or an abstract socket (@name)", path)
	}
	if strings.HasPrefix(path, "@") {
		path = "\x00" + path[1:]
	}
	n.addr = &net.UnixAddr{Name: path, Net: "unixgram"}
	if us := getenv("WATCHDOG_USEC"); us != "" {
		pid := getenv("WATCHDOG_PID")
		if pid == "" || pid == strconv.Itoa(os.Getpid()) {
			v, err := strconv.ParseInt(us, 10, 64)
			if err != nil || v <= 0 {
				return nil, fmt.Errorf("WATCHDOG_USEC %q: want a positive number of microseconds", us)
			}
			n.watchdog = time.Duration(v) * time.Microsecond
		}
	}
	return n, nil
}

// send writes one notification datagram.
func (n *notifier) send(msg string) error {
	if n.addr == nil {
		return nil
	}
	if n.conn == nil {
		c, err := net.DialUnix("unixgram", nil, n.addr)
		if err != nil {
			return fmt.Errorf("sd_notify %s: %w", strings.TrimPrefix(n.addr.Name, "\x00"), err)
		}
		n.conn = c
	}
	if _, err := n.conn.Write([]byte(msg)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", strings.TrimPrefix(n.addr.Name, "\x00"), err)
	}
	return nil
}

// note records the first error; the caller logs it once.
func (n *notifier) note(err error) error {
	if err != nil && n.err == nil {
		n.err = err
		return err
	}
	return nil
}

// statusChanged sends STATUS= for a new served status (Snapshot.ServedState:
// st, what is served and why it is not), with global time's status when it
// differs, and READY=1 the first time the served time is synced: with
// real_time, UTC, not global time alone. It returns an error only the
// first time one happens.
func (n *notifier) statusChanged(st, what, reason string, global engine.Status, node, ref uint32) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	text := what + " " + st
	if reason != "" {
		text += ": " + reason
	}
	if what != "global time" && global.String() != st {
		text += "; global time " + global.String()
	}
	if n.addr == nil || text == n.status {
		return nil
	}
	n.status = text
	msg := fmt.Sprintf("STATUS=%s (node %d, reference %d)", text, node, ref)
	if st == engine.StatusSynced.String() && !n.ready {
		n.ready = true
		msg = "READY=1\n" + msg
	}
	return n.note(n.send(msg))
}

// ping sends WATCHDOG=1 unless one went less than a quarter of the
// watchdog interval ago.
func (n *notifier) ping(now time.Time) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	// The loop's ticker paces the pings at watchdog/2; this only keeps a
	// burst of calls from flooding (a tick may come a little early).
	if n.addr == nil || n.watchdog == 0 || now.Sub(n.lastPing) < n.watchdog/4 {
		return nil
	}
	n.lastPing = now
	return n.note(n.send("WATCHDOG=1"))
}

// pingEvery is how often the main loop must call ping (0: never).
func (n *notifier) pingEvery() time.Duration {
	if n.addr == nil || n.watchdog == 0 {
		return 0
	}
	return n.watchdog / 2
}

// stopping sends STOPPING=1 and closes the socket.
func (n *notifier) stopping() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.addr == nil {
		return
	}
	n.send("STOPPING=1")
	if n.conn != nil {
		n.conn.Close()
		n.conn = nil
	}
}
