// Package cmdmon asks a running chronyd for its tracking over chrony's
// command and monitoring protocol (candm.h, protocol version 6), as
// `chronyc tracking` does, but from the lab's own process: the lab stamps
// each question with the raw clock on both sides, so that a reading of a
// chronyd on an emulated clock is judged at the instant chronyd made it
// (to within the socket's round trip, tens of us), not whenever a chronyc
// process happened to start.
package cmdmon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"time"
)

// Protocol constants (candm.h).
const (
	protoVersion  = 6
	pktRequest    = 1
	pktReply      = 2
	reqTracking   = 33
	rpyTracking   = 5
	sttSuccess    = 0
	headerRequest = 20
	headerReply   = 28
	// trackingData is RPY_Tracking up to its EOR: ref_id, IPAddr (20),
	// stratum, leap_status, ref_time (12) and nine Floats.
	trackingData = 4 + 20 + 2 + 2 + 12 + 9*4
	// ReplyLen is a tracking reply's length; a request is padded to it
	// (chronyd refuses requests shorter than their reply: no amplification).
	ReplyLen = headerReply + trackingData
)

// LeapUnsynchronised is leap_status when chronyd has no reference.
const LeapUnsynchronised = 3

// Tracking is chronyd's RPY_Tracking: what `chronyc tracking` prints.
type Tracking struct {
	RefID      uint32
	Stratum    uint16
	LeapStatus uint16
	// Correction is how far the system clock is slow of NTP time, in s
	// (chronyc's "System time": "slow" when positive, "fast" when
	// negative).
	Correction                     float64
	LastOffset, RMSOffset          float64 // s
	FreqPPM, ResidFreqPPM, SkewPPM float64
	RootDelay, RootDispersion      float64 // s
	LastUpdateInterval             float64 // s
}

// Synced reports whether chronyd has a reference (chronyc's Reference ID
// not 0 and Leap status not "Not synchronised").
func (t Tracking) Synced() bool { return t.RefID != 0 && t.LeapStatus != LeapUnsynchronised }

// OffsetNs is the system clock minus NTP time as chronyd estimates it, in
// ns: positive when the clock is fast.
func (t Tracking) OffsetNs() int64 { return int64(math.Round(-t.Correction * 1e9)) }

// EncodeTrackingRequest is a REQ_TRACKING request with sequence seq.
func EncodeTrackingRequest(seq uint32) []byte {
	b := make([]byte, ReplyLen)
	b[0], b[1] = protoVersion, pktRequest
	binary.BigEndian.PutUint16(b[4:], reqTracking)
	binary.BigEndian.PutUint32(b[8:], seq)
	return b
}

// DecodeTrackingReply reads a reply to the request with sequence seq,
// with an error naming what is wrong with any other bytes.
func DecodeTrackingReply(b []byte, seq uint32) (Tracking, error) {
	var t Tracking
	if len(b) < headerReply {
		return t, fmt.Errorf("cmdmon: reply of %d bytes: shorter than its %d-byte header", len(b), headerReply)
	}
	switch {
	case b[0] != protoVersion:
		return t, fmt.Errorf("cmdmon: reply of protocol version %d, want %d", b[0], protoVersion)
	case b[1] != pktReply:
		return t, fmt.Errorf("cmdmon: packet type %d, want a reply (%d)", b[1], pktReply)
	}
	cmd, rpy, status := binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:]), binary.BigEndian.Uint16(b[8:])
	if got := binary.BigEndian.Uint32(b[16:]); got != seq {
		return t, fmt.Errorf("cmdmon: reply to sequence %d, want %d", got, seq)
	}
	if status != sttSuccess {
		return t, fmt.Errorf("cmdmon: chronyd answered status %d (command %d)", status, cmd)
	}
	if cmd != reqTracking || rpy != rpyTracking {
		return t, fmt.Errorf("cmdmon: reply %d to command %d, want tracking (%d to %d)", rpy, cmd, rpyTracking, reqTracking)
	}
	if len(b) < ReplyLen {
		return t, fmt.Errorf("cmdmon: tracking reply of %d bytes, want %d", len(b), ReplyLen)
	}
	d := b[headerReply:]
	t.RefID = binary.BigEndian.Uint32(d)
	t.Stratum = binary.BigEndian.Uint16(d[24:])
	t.LeapStatus = binary.BigEndian.Uint16(d[26:])
	fl := d[40:]
	f := func(i int) float64 { return DecodeFloat(binary.BigEndian.Uint32(fl[4*i:])) }
	t.Correction, t.LastOffset, t.RMSOffset = f(0), f(1), f(2)
	t.FreqPPM, t.ResidFreqPPM, t.SkewPPM = f(3), f(4), f(5)
	t.RootDelay, t.RootDispersion, t.LastUpdateInterval = f(6), f(7), f(8)
	return t, nil
}

// DecodeFloat reads chrony's 32-bit Float: a 7-bit signed exponent and a
// 25-bit signed coefficient, coef * 2^(exp-25).
func DecodeFloat(x uint32) float64 {
	exp := int(x >> 25)
	if exp >= 64 {
		exp -= 128
	}
	coef := int64(x & (1<<25 - 1))
	if coef >= 1<<24 {
		coef -= 1 << 25
	}
	return math.Ldexp(float64(coef), exp-25)
}

// EncodeFloat writes v as chrony's Float, to 24 bits of precision (what
// chronyd sends; the tests' fake chronyd uses it).
func EncodeFloat(v float64) uint32 {
	if v == 0 || math.IsNaN(v) {
		return 0
	}
	_, e := math.Frexp(v) // |v| = m * 2^e, m in [0.5, 1)
	exp := max(-64, min(63, e+1))
	coef := int64(math.Round(math.Ldexp(v, 25-exp)))
	coef = max(-(1 << 24), min(1<<24-1, coef))
	return uint32(exp&0x7f)<<25 | uint32(coef)&(1<<25-1)
}

// Client asks one chronyd over its Unix command socket.
type Client struct {
	conn   *net.UnixConn
	server *net.UnixAddr
	local  string
	seq    uint32
	buf    []byte
}

// Dial opens a client of the chronyd listening on the Unix socket server,
// with its own reply socket at local (removed by Close), as chronyc binds
// one: chronyd answers to the sender's address.
func Dial(server, local string) (*Client, error) {
	_ = os.Remove(local)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: local, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("cmdmon: reply socket %s: %w", local, err)
	}
	return &Client{conn: conn, server: &net.UnixAddr{Name: server, Net: "unixgram"}, local: local,
		seq: uint32(time.Now().UnixNano()), buf: make([]byte, 2048)}, nil
}

// Close closes the client and removes its socket.
func (c *Client) Close() error {
	err := c.conn.Close()
	_ = os.Remove(c.local)
	return err
}

// ErrTimeout is returned when chronyd does not answer in time.
var ErrTimeout = errors.New("cmdmon: no answer from chronyd")

// Tracking asks for chronyd's tracking, waiting at most timeout. Replies
// to earlier questions (late answers) are skipped.
func (c *Client) Tracking(timeout time.Duration) (Tracking, error) {
	c.seq++
	if _, err := c.conn.WriteToUnix(EncodeTrackingRequest(c.seq), c.server); err != nil {
		return Tracking{}, fmt.Errorf("cmdmon: asking %s: %w", c.server.Name, err)
	}
	deadline := time.Now().Add(timeout)
	if err := c.conn.SetReadDeadline(deadline); err != nil {
		return Tracking{}, err
	}
	for {
		n, _, err := c.conn.ReadFromUnix(c.buf)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return Tracking{}, fmt.Errorf("%w %s in %v", ErrTimeout, c.server.Name, timeout)
			}
			return Tracking{}, fmt.Errorf("cmdmon: reading %s's answer: %w", c.server.Name, err)
		}
		if n >= headerReply && binary.BigEndian.Uint32(c.buf[16:]) != c.seq {
			continue // a late answer to an earlier question
		}
		return DecodeTrackingReply(c.buf[:n], c.seq)
	}
}
