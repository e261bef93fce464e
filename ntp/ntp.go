package ntp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// HeaderLen is the size of an NTP header without extension fields.
const HeaderLen = 48

// Modes (RFC 5905, figure 10).
const (
	ModeClient = 3
	ModeServer = 4
)

// Leap indicators.
const (
	LeapNone    = 0
	LeapInsert  = 1 // the last minute of the day has 61 seconds
	LeapDelete  = 2 // the last minute of the day has 59 seconds
	LeapUnsync  = 3 // clock unsynchronised (alarm)
	MaxStratum  = 16
	unixToNTP   = 2208988800 // seconds from 1900-01-01 to 1970-01-01
	nsPerSecond = 1_000_000_000
)

// Packet is an NTP header. Timestamps are the raw 64-bit NTP format
// (seconds since 1900 in the high half, era 0 or 1); RootDelay and
// RootDispersion are NTP short format (16.16 seconds).
type Packet struct {
	Leap, Version, Mode uint8
	Stratum             uint8
	Poll, Precision     int8
	RootDelay           uint32
	RootDispersion      uint32
	RefID               uint32
	RefTime             uint64
	Origin              uint64
	Receive             uint64
	Transmit            uint64
}

// Errors of UnmarshalBinary and Respond (wrapped with details).
var (
	ErrShort   = errors.New("ntp: packet shorter than 48 bytes")
	ErrMode    = errors.New("ntp: not a client request (mode 3)")
	ErrVersion = errors.New("ntp: version not 3 or 4")
)

// MarshalBinaryTo writes the 48-byte header into b, which must hold
// HeaderLen bytes, and returns HeaderLen. It does not allocate.
func (p *Packet) MarshalBinaryTo(b []byte) (int, error) {
	if len(b) < HeaderLen {
		return 0, fmt.Errorf("ntp: marshal: buffer of %d bytes: %w", len(b), ErrShort)
	}
	if p.Leap > 3 || p.Version > 7 || p.Mode > 7 {
		return 0, fmt.Errorf("ntp: marshal: leap %d, version %d, mode %d: out of their bit fields", p.Leap, p.Version, p.Mode)
	}
	b[0] = p.Leap<<6 | p.Version<<3 | p.Mode
	b[1] = p.Stratum
	b[2] = byte(p.Poll)
	b[3] = byte(p.Precision)
	binary.BigEndian.PutUint32(b[4:], p.RootDelay)
	binary.BigEndian.PutUint32(b[8:], p.RootDispersion)
	binary.BigEndian.PutUint32(b[12:], p.RefID)
	binary.BigEndian.PutUint64(b[16:], p.RefTime)
	binary.BigEndian.PutUint64(b[24:], p.Origin)
	binary.BigEndian.PutUint64(b[32:], p.Receive)
	binary.BigEndian.PutUint64(b[40:], p.Transmit)
	return HeaderLen, nil
}

// MarshalBinary returns the 48-byte header.
func (p *Packet) MarshalBinary() ([]byte, error) {
	b := make([]byte, HeaderLen)
	_, err := p.MarshalBinaryTo(b)
	return b, err
}

// UnmarshalBinary reads the header of b; bytes after the first 48
// (extension fields, a MAC) are ignored.
func (p *Packet) UnmarshalBinary(b []byte) error {
	if len(b) < HeaderLen {
		return fmt.Errorf("%w (%d bytes)", ErrShort, len(b))
	}
	*p = Packet{
		Leap: b[0] >> 6, Version: b[0] >> 3 & 7, Mode: b[0] & 7,
		Stratum: b[1], Poll: int8(b[2]), Precision: int8(b[3]),
		RootDelay:      binary.BigEndian.Uint32(b[4:]),
		RootDispersion: binary.BigEndian.Uint32(b[8:]),
		RefID:          binary.BigEndian.Uint32(b[12:]),
		RefTime:        binary.BigEndian.Uint64(b[16:]),
		Origin:         binary.BigEndian.Uint64(b[24:]),
		Receive:        binary.BigEndian.Uint64(b[32:]),
		Transmit:       binary.BigEndian.Uint64(b[40:]),
	}
	return nil
}

// Timestamp converts ns since the Unix epoch to the NTP timestamp format
// (wrapping into era 1 after 2036, as the format does), rounding to the
// nearest 2^-32 s.
func Timestamp(unixNs int64) uint64 {
	sec := unixNs / nsPerSecond
	ns := unixNs % nsPerSecond
	if ns < 0 {
		sec--
		ns += nsPerSecond
	}
	frac := (uint64(ns)<<32 + nsPerSecond/2) / nsPerSecond
	return uint64(sec+unixToNTP)<<32 + frac // wraps at 2^64: the era
}

// UnixNs converts an NTP timestamp back to ns since the Unix epoch, taking
// the era closest to pivot (ns since the Unix epoch), as clients do. It is
// within a nanosecond of the inverse of Timestamp.
func UnixNs(ts uint64, pivot int64) int64 {
	d := int64(ts - Timestamp(pivot)) // signed, in 2^-32 s, modulo one era
	sec, frac := d>>32, d&0xffffffff
	return pivot + sec*nsPerSecond + (frac*nsPerSecond+1<<31)>>32
}

// Short converts a non-negative duration in ns to NTP short format (16.16
// seconds), rounding up so that a bound stays a bound; it saturates.
func Short(ns int64) uint32 {
	if ns <= 0 {
		return 0
	}
	if ns >= 65536*nsPerSecond {
		return math.MaxUint32
	}
	v := (uint64(ns)<<16 + nsPerSecond - 1) / nsPerSecond
	return uint32(min(v, math.MaxUint32))
}

// ShortNs converts NTP short format to ns (exact to the ns below).
func ShortNs(s uint32) int64 { return int64(uint64(s) * nsPerSecond >> 16) }

// RefIDString packs a 4-character reference id ("GCLK").
func RefIDString(s string) uint32 {
	var b [4]byte
	copy(b[:], s)
	return binary.BigEndian.Uint32(b[:])
}

// Reading is the server's global time (UTC, ns since the Unix epoch) at one
// instant, with MaxErr bounding |Time - true UTC|. OK false: no bounded
// reading (unsynchronised).
type Reading struct {
	Time   int64
	MaxErr int64
	OK     bool
}

// Server is what a server says about itself in every reply.
type Server struct {
	// Synced false sets leap indicator 3 and stratum 16: clients must not
	// use the time.
	Synced    bool
	Stratum   uint8  // 1..15 when synced
	RefID     uint32 // "GCLK" for a primary, else the IPv4 address of its source
	Precision int8   // log2 seconds of the clock's reading precision
	RefTime   int64  // ns since the Unix epoch of the last update (0: unknown)
	// Leap is the leap second announced for the end of the UTC day
	// (LeapNone, LeapInsert, LeapDelete), passed on from the upstream.
	Leap uint8
	// RootDelay is the round-trip delay to the primary source (ns; 0 for a
	// primary). The readings' MaxErr includes half of it: root dispersion
	// is MaxErr - RootDelay/2, so that root distance (RFC 5905: root delay
	// / 2 + root dispersion) is the readings' bound.
	RootDelay int64
}

// parseRequest decodes a client request and refuses what a server does
// not answer: too short (ErrShort), not mode 3 (ErrMode), not version 3 or
// 4 (ErrVersion).
func parseRequest(req []byte) (Packet, error) {
	var q Packet
	if err := q.UnmarshalBinary(req); err != nil {
		return q, err
	}
	if q.Mode != ModeClient {
		return q, fmt.Errorf("%w: mode %d", ErrMode, q.Mode)
	}
	if q.Version != 3 && q.Version != 4 {
		return q, fmt.Errorf("%w: version %d", ErrVersion, q.Version)
	}
	return q, nil
}

// Respond answers the client request req with a server reply written into
// out (at least HeaderLen bytes) and returns its length (HeaderLen, which
// is never more than len(req)). rx is the server's reading at the
// request's arrival and tx at the reply's departure (taken as late as
// possible). Requests that are too short, not mode 3 or not version 3 or 4
// are refused with an error wrapping ErrShort, ErrMode or ErrVersion: the
// caller drops them silently.
func Respond(out, req []byte, rx, tx Reading, srv Server) (int, error) {
	q, err := parseRequest(req)
	if err != nil {
		return 0, err
	}
	p := Packet{
		Leap: LeapNone, Version: q.Version, Mode: ModeServer,
		Stratum: srv.Stratum, Poll: q.Poll, Precision: srv.Precision,
		RefID:  srv.RefID,
		Origin: q.Transmit,
	}
	if rx.OK {
		p.Receive = Timestamp(rx.Time)
	}
	if tx.OK {
		p.Transmit = Timestamp(tx.Time)
	}
	if srv.RefTime != 0 {
		p.RefTime = Timestamp(srv.RefTime)
	}
	if !srv.Synced || !rx.OK || !tx.OK || srv.Stratum == 0 || srv.Stratum >= MaxStratum || srv.Leap >= LeapUnsync {
		p.Leap, p.Stratum = LeapUnsync, MaxStratum
		p.RootDispersion = math.MaxUint32
	} else {
		// Each timestamp is within its MaxErr of UTC; the precision's
		// half-step and the ns rounding of the NTP format are below 1 ns
		// of the rounding up in Short. Root delay / 2 is part of MaxErr.
		d := max(srv.RootDelay, 0)
		p.Leap, p.RootDelay = srv.Leap, Short(d)
		p.RootDispersion = Short(max(max(rx.MaxErr, tx.MaxErr)+1-d/2, 1))
	}
	return p.MarshalBinaryTo(out)
}
