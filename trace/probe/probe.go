// Package probe runs the sync exchanges of trace sessions over UDP: the
// reference process runs a Server, every other process gives its Recorder a
// Client as its trace.Prober.
//
// One exchange is a request (16 bytes) and a reply (32 bytes); the reply is
// the acknowledgement. A lost datagram costs a timeout and a retry with a new
// sequence number; a late or duplicate reply (an old sequence number) is
// ignored, and a duplicate request is answered again, which is harmless
// since every reply carries its own stamps. Stamps are user-space reads of
// each side's clock right after receiving and right before sending: they
// include the socket system calls, which widen the exchange's round trip
// but never move the truth outside it.
package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	magic       = 0x47435450 // "GCTP"
	version     = 1
	kindRequest = 1
	kindReply   = 2
	// RequestLen and ReplyLen are the datagram sizes.
	RequestLen = 16
	ReplyLen   = 32
)

// ErrPacket is wrapped by every decoding error.
var ErrPacket = errors.New("probe: bad packet")

// Request is a process's probe.
type Request struct{ Seq uint64 }

// Reply is the reference's answer: its clock when the request arrived and
// when the reply left.
type Reply struct {
	Seq     uint64
	SrcRecv int64
	SrcSend int64
}

func putHeader(b []byte, kind byte, seq uint64) {
	binary.BigEndian.PutUint32(b[0:4], magic)
	b[4] = version
	b[5] = kind
	b[6], b[7] = 0, 0
	binary.BigEndian.PutUint64(b[8:16], seq)
}

// AppendRequest appends r's encoding to b.
func AppendRequest(b []byte, r Request) []byte {
	var h [RequestLen]byte
	putHeader(h[:], kindRequest, r.Seq)
	return append(b, h[:]...)
}

// AppendReply appends r's encoding to b.
func AppendReply(b []byte, r Reply) []byte {
	var h [ReplyLen]byte
	putHeader(h[:], kindReply, r.Seq)
	binary.BigEndian.PutUint64(h[16:24], uint64(r.SrcRecv))
	binary.BigEndian.PutUint64(h[24:32], uint64(r.SrcSend))
	return append(b, h[:]...)
}

func header(b []byte, kind byte, want int) (uint64, error) {
	if len(b) != want {
		return 0, fmt.Errorf("%w: %d bytes, want %d", ErrPacket, len(b), want)
	}
	if m := binary.BigEndian.Uint32(b[0:4]); m != magic {
		return 0, fmt.Errorf("%w: magic %#08x at offset 0, want %#08x", ErrPacket, m, magic)
	}
	if b[4] != version {
		return 0, fmt.Errorf("%w: version %d at offset 4, want %d", ErrPacket, b[4], version)
	}
	if b[5] != kind {
		return 0, fmt.Errorf("%w: kind %d at offset 5, want %d", ErrPacket, b[5], kind)
	}
	if b[6] != 0 || b[7] != 0 {
		return 0, fmt.Errorf("%w: reserved bytes 6-7 not zero", ErrPacket)
	}
	return binary.BigEndian.Uint64(b[8:16]), nil
}

// DecodeRequest decodes a request datagram.
func DecodeRequest(b []byte) (Request, error) {
	seq, err := header(b, kindRequest, RequestLen)
	return Request{Seq: seq}, err
}

// DecodeReply decodes a reply datagram; it refuses a reply whose send stamp
// precedes its receive stamp.
func DecodeReply(b []byte) (Reply, error) {
	seq, err := header(b, kindReply, ReplyLen)
	if err != nil {
		return Reply{}, err
	}
	r := Reply{Seq: seq, SrcRecv: int64(binary.BigEndian.Uint64(b[16:24])), SrcSend: int64(binary.BigEndian.Uint64(b[24:32]))}
	if r.SrcSend < r.SrcRecv {
		return Reply{}, fmt.Errorf("%w: reply %d sent at %d before it was received at %d (offsets 16-31)", ErrPacket, seq, r.SrcSend, r.SrcRecv)
	}
	return r, nil
}
