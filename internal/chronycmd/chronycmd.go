package chronycmd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Protocol constants (chrony's candm.h).
const (
	version     = 6
	typeRequest = 1 // PKT_TYPE_CMD_REQUEST
	typeReply   = 2 // PKT_TYPE_CMD_REPLY
	reqTracking = 33
	rpyTracking = 5

	// replyHeaderLen is the reply header, version .. pad5.
	replyHeaderLen = 28
	// trackingLen is RPY_Tracking up to its end-of-record marker (ref_id
	// 4, IPAddr 20, stratum 2, leap 2, ref_time 12, nine Floats 36).
	trackingLen = 76
	// TrackingReplyLen is the length of a tracking reply, and of the
	// request, padded to it.
	TrackingReplyLen = replyHeaderLen + trackingLen

	seqOffset = 16 // the reply's sequence field
)

// Offsets in RPY_Tracking (from the end of the reply header).
const (
	offRefID      = 0
	offStratum    = 24
	offLeap       = 26
	offCorrection = 40
	offRootDelay  = 64
	offRootDisp   = 68
)

// Tracking is what gclock takes from chronyd's tracking reply.
type Tracking struct {
	RefID   uint32
	Stratum uint16
	// Leap is chronyd's leap status: 0 normal, 1 insert, 2 delete, 3
	// unsynchronised.
	Leap uint16
	// Correction is chronyd's current correction (s): true time minus
	// the system clock as it estimates it, the `System time` of
	// `chronyc tracking` (positive: the clock is slow).
	Correction float64
	// RootDelay and RootDisp are chronyd's root delay and dispersion (s).
	RootDelay, RootDisp float64
}

// ErrRefused is wrapped by every error of ParseTracking.
var ErrRefused = errors.New("chronyd tracking reply refused")

// TrackingRequest is REQ_TRACKING with sequence seq, padded to the reply's
// length (TrackingReplyLen).
func TrackingRequest(seq uint32) []byte {
	b := make([]byte, TrackingReplyLen)
	b[0], b[1] = version, typeRequest
	binary.BigEndian.PutUint16(b[4:], reqTracking)
	binary.BigEndian.PutUint32(b[8:], seq)
	return b
}

// ReplySequence is the sequence number in the header of the reply b; ok
// false when b is too short to hold one. It lets a client that keeps its
// socket tell a late reply to an earlier request from a bad one.
func ReplySequence(b []byte) (seq uint32, ok bool) {
	if len(b) < seqOffset+4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[seqOffset:]), true
}

// Float decodes chrony's 32-bit float (UTI_FloatNetworkToHost): a 7-bit
// signed exponent and a 25-bit signed coefficient, the value coef *
// 2^(exp - 25).
func Float(x uint32) float64 {
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

// ParseTracking decodes chronyd's reply b to the tracking request seq. A
// reply longer than TrackingReplyLen is accepted (the rest is ignored);
// every error wraps ErrRefused and names the field and its byte offset in
// the datagram.
func ParseTracking(b []byte, seq uint32) (Tracking, error) {
	bad := func(format string, a ...any) (Tracking, error) {
		return Tracking{}, fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
	}
	if len(b) < TrackingReplyLen {
		return bad("%d bytes, want at least %d (a %d-byte header and %d of tracking)", len(b), TrackingReplyLen, replyHeaderLen, trackingLen)
	}
	be := binary.BigEndian
	switch {
	case b[0] != version || b[1] != typeReply:
		return bad("version %d type %d (bytes 0-1), want %d %d", b[0], b[1], version, typeReply)
	case be.Uint16(b[4:]) != reqTracking || be.Uint16(b[6:]) != rpyTracking:
		return bad("command %d reply %d (bytes 4-7), want %d %d", be.Uint16(b[4:]), be.Uint16(b[6:]), reqTracking, rpyTracking)
	case be.Uint16(b[8:]) != 0:
		return bad("status %d (bytes 8-9; chronyd refused the request)", be.Uint16(b[8:]))
	case be.Uint32(b[seqOffset:]) != seq:
		return bad("sequence %d (bytes 16-19), want %d", be.Uint32(b[seqOffset:]), seq)
	}
	d := b[replyHeaderLen:]
	t := Tracking{
		RefID:      be.Uint32(d[offRefID:]),
		Stratum:    be.Uint16(d[offStratum:]),
		Leap:       be.Uint16(d[offLeap:]),
		Correction: Float(be.Uint32(d[offCorrection:])),
		RootDelay:  Float(be.Uint32(d[offRootDelay:])),
		RootDisp:   Float(be.Uint32(d[offRootDisp:])),
	}
	at := func(off int) string { return fmt.Sprintf("byte %d", replyHeaderLen+off) }
	switch {
	case t.Leap > 3:
		return bad("leap status %d (%s), want 0-3", t.Leap, at(offLeap))
	case t.Stratum > 16:
		return bad("stratum %d (%s), want 0-16", t.Stratum, at(offStratum))
	case !(math.Abs(t.Correction) < 1e6):
		return bad("current correction %g s (%s), want under 1e6 s", t.Correction, at(offCorrection))
	case !(t.RootDelay >= 0 && t.RootDelay < 1000):
		return bad("root delay %g s (%s), want [0, 1000)", t.RootDelay, at(offRootDelay))
	case !(t.RootDisp >= 0 && t.RootDisp < 1000):
		return bad("root dispersion %g s (%s), want [0, 1000)", t.RootDisp, at(offRootDisp))
	}
	return t, nil
}
