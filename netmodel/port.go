package netmodel

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Ethernet's costs on the wire beside a frame's bytes (as a packet socket
// sees them: destination MAC to the end of the payload, no FCS).
const (
	// MinFrame is the shortest frame without its FCS: shorter ones are
	// padded to it.
	MinFrame = 60
	// WireOverhead is what every frame adds on the wire: FCS (4 bytes),
	// preamble and start delimiter (8) and the inter-frame gap (12).
	WireOverhead = 4 + 8 + 12
)

// WireBytes is how many byte times one frame of frameLen bytes (as a
// packet socket sees it) occupies a port: padded to MinFrame, plus
// WireOverhead. A 90-byte probe takes 114, a 1514-byte frame 1538.
func WireBytes(frameLen int) int {
	return max(frameLen, MinFrame) + WireOverhead
}

// SegmentedWireBytes is WireBytes for a GSO frame (one frame the kernel
// hands on whole and a NIC would cut into segments): hdrLen bytes of
// headers (Ethernet to TCP/UDP) followed by payload cut into segments of
// at most segSize bytes, each sent with its own copy of the headers. With
// segSize <= 0 or no payload it is one frame.
func SegmentedWireBytes(frameLen, hdrLen, segSize int) int {
	payload := frameLen - hdrLen
	if segSize <= 0 || hdrLen < 0 || payload <= segSize {
		return WireBytes(frameLen)
	}
	full, rest := payload/segSize, payload%segSize
	n := full * WireBytes(hdrLen+segSize)
	if rest > 0 {
		n += WireBytes(hdrLen + rest)
	}
	return n
}

// SerialisationNs is how long a port of rateBps bits per second takes to
// send wireBytes byte times, rounded up to the next nanosecond (0 for a
// rate of 0 or less: no port model).
func SerialisationNs(wireBytes int, rateBps int64) int64 {
	if rateBps <= 0 || wireBytes <= 0 {
		return 0
	}
	bits := int64(wireBytes) * 8 * 1e9
	return (bits + rateBps - 1) / rateBps
}

// Port is one egress port of a store-and-forward switch: a FIFO queue in
// front of a line of RateBps bits per second. A frame that is ready to
// leave (its link delay over) waits until the port has sent every frame
// that was ready before it, then takes its serialisation time on the line
// and is delivered at the end of it. The queue holds every frame (no
// drops, no priorities). Port reads no clock: the caller gives every
// frame's ready time, in non-decreasing order, in any unit of ns.
//
// The zero Port with RateBps 0 is no port at all: Enqueue returns the
// ready time.
type Port struct {
	RateBps int64 // line rate, bits per second; 0: infinitely fast

	free   int64 // when the line finishes the last frame queued
	busyNs int64 // sum of the serialisation times queued
	frames int64
	bytes  int64 // wire bytes queued
}

// Enqueue queues a frame of wireBytes byte times (WireBytes) that is ready
// to leave at ready and returns when its last bit leaves the port (its
// delivery) and how long it waited behind the frames before it.
func (p *Port) Enqueue(ready int64, wireBytes int) (depart, wait int64) {
	if p.RateBps <= 0 {
		return ready, 0
	}
	start := max(ready, p.free)
	ser := SerialisationNs(wireBytes, p.RateBps)
	p.free = start + ser
	p.busyNs += ser
	p.frames++
	p.bytes += int64(wireBytes)
	return p.free, start - ready
}

// Backlog is how long the line stays busy after at with the frames queued
// so far (0 when idle).
func (p *Port) Backlog(at int64) int64 { return max(0, p.free-at) }

// BusyNs is the total serialisation time of every frame queued so far; over
// an interval it gives the port's utilisation.
func (p *Port) BusyNs() int64 { return p.busyNs }

// Frames is the number of frames queued so far.
func (p *Port) Frames() int64 { return p.frames }

// Bytes is the number of wire bytes (WireBytes) queued so far.
func (p *Port) Bytes() int64 { return p.bytes }

// ResetCounters forgets BusyNs, Frames and Bytes (not the queue).
func (p *Port) ResetCounters() { p.busyNs, p.frames, p.bytes = 0, 0, 0 }

// ErrRateSyntax is wrapped by every ParseRate error.
var ErrRateSyntax = errors.New("bad rate")

// MaxRateBps bounds ParseRate: 400 Gbit/s, today's fastest Ethernet port.
const MaxRateBps = 400e9

// ParseRate reads a line rate in bits per second: a number with an
// optional suffix k, M or G (powers of 1000) and an optional "bit/s",
// "bps" or "b" after it: "1G", "1Gbit/s", "100M", "2.5G", "10000000". "0"
// (or "off") is no rate.
func ParseRate(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "off" || t == "0" {
		return 0, nil
	}
	for _, suf := range []string{"bit/s", "bps", "b"} {
		if v, ok := strings.CutSuffix(t, suf); ok {
			t = v
			break
		}
	}
	scale := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			scale, t = 1e3, t[:n-1]
		case 'M':
			scale, t = 1e6, t[:n-1]
		case 'G':
			scale, t = 1e9, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("%w %q: want e.g. 1G, 100M or 2.5Gbit/s", ErrRateSyntax, s)
	}
	v *= scale
	if !(v >= 1e3 && v <= MaxRateBps) {
		return 0, fmt.Errorf("%w %q: want 1k..400G bit/s (or 0 for none)", ErrRateSyntax, s)
	}
	return int64(v), nil
}

// FormatRate spells a rate as ParseRate reads it ("1G", "100M", "0").
func FormatRate(bps int64) string {
	switch {
	case bps <= 0:
		return "0"
	case bps%1e9 == 0:
		return strconv.FormatInt(bps/1e9, 10) + "G"
	case bps%1e6 == 0:
		return strconv.FormatInt(bps/1e6, 10) + "M"
	case bps%1e3 == 0:
		return strconv.FormatInt(bps/1e3, 10) + "k"
	}
	return strconv.FormatInt(bps, 10)
}
