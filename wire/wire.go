package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
)

// Version is the format version written into every header. A decoder
// rejects any other version instead of guessing at its layout. Version 2
// pads requests to the size of their replies (no amplification) and
// checks the mapping's floats (docs/daemon.md, "Security"). Version 3
// carries the election's term in every engine message and the term,
// flags and heartbeat time in the status query and reply (engine
// member.go).
const Version = 3

// Magic is the first two bytes of every packet ("GC"): it rejects stray
// datagrams (a port scan, another protocol on the same port) cheaply.
const Magic uint16 = 0x4743

// HeaderLen is the size of the fixed header in bytes.
const HeaderLen = 14

// MaxPacket is the largest packet: the largest UDP payload over IPv4
// (65535 - 20 IP - 8 UDP). A buffer of this size fits every packet.
const MaxPacket = 65507

// MaxBody is the largest body after the header.
const MaxBody = MaxPacket - HeaderLen

// MaxSamples bounds the samples of one TimeDiff: the engine's own bound,
// engine.MaxMsgSamples, a round of engine.MaxPingsPerRound (Liao: 3; the
// precise profile 960) repeated once. 2000 samples of 32 bytes keep the
// packet, sealed (AuthLen), below MaxPacket (wire's tests check it).
const MaxSamples = engine.MaxMsgSamples

// PageHeaderLen is the page address in front of a GETPGRANT's data.
const PageHeaderLen = 8

// MaxPageData is the largest page a GETPGRANT can carry.
const MaxPageData = MaxBody - PageHeaderLen

// Op is the 8-bit op code: the low seven bits are the kind of message, the
// high bit is the reliable flag (Mocha's reliable_msg_flag).
type Op uint8

// ReliableFlag is the high bit of the op code: the receiver acknowledges the
// message with an OpAck carrying its sequence number, and the sender
// retransmits it until that ACK arrives.
const ReliableFlag Op = 0x80

// The op codes. The engine's messages keep the values of engine.MsgType so
// that Op(m.Type) is the op of an engine message.
const (
	OpProbe            = Op(engine.MsgProbe)        // request: a source probes a child
	OpProbeReply       = Op(engine.MsgProbeReply)   // reply to OpProbe
	OpTimeDiff         = Op(engine.MsgTimeDiff)     // one-way: the end of a round
	OpErrReport        = Op(engine.MsgErrReport)    // one-way, flagged: a child's error report
	OpPeriodChange     = Op(engine.MsgPeriodChange) // one-way, flagged: a source's new global period for a child
	OpAck           Op = 0x10                       // acknowledges a flagged message; body: the acknowledged op
	OpStatusQuery   Op = 0x11                       // request: ask a daemon for its status; no body
	OpStatusReply   Op = 0x12                       // reply to OpStatusQuery: a Status body
	OpGetPage       Op = 0x13                       // request (Mocha GETP): a page address
	OpPageGrant     Op = 0x14                       // reply to OpGetPage (Mocha GETPGRANT): address and data
	OpRealTimeQuery Op = 0x15                       // request: a node's clock rate vs the reference; asks for the real-time scale (daemon real_time modes)
	OpRealTimeInfo  Op = 0x16                       // reply to OpRealTimeQuery: the reference's real-time offset or mean-drift segment
	OpPut           Op = 0x17                       // one-way: application data in a Page body (Addr a tag, Data the payload); gclock measure's collectives
	OpAuthChallenge Op = 0x18                       // request: a random Nonce; the answer proves the peer's auth sequence fresh (transport, docs/daemon.md "Security")
	OpAuthResponse  Op = 0x19                       // reply to OpAuthChallenge: the same Nonce, sealed with the responder's current auth sequence
)

// Kind returns the op without the reliable flag.
func (o Op) Kind() Op { return o &^ ReliableFlag }

// Reliable reports whether the reliable flag is set.
func (o Op) Reliable() bool { return o&ReliableFlag != 0 }

// WithReliable returns the op with the reliable flag set to r.
func (o Op) WithReliable(r bool) Op {
	if r {
		return o | ReliableFlag
	}
	return o.Kind()
}

// Class is the role of a message kind in the messaging protocol.
type Class uint8

// Classes.
const (
	ClassUnknown Class = iota // not a known op
	ClassRequest              // answered by a reply, which is its acknowledgement
	ClassReply                // answers a request; carries the request's sequence number
	ClassOneWay               // needs no answer; acknowledged only when flagged
	ClassAck                  // acknowledges a flagged message
)

// Class returns the protocol role of the op's kind.
func (o Op) Class() Class {
	switch o.Kind() {
	case OpProbe, OpStatusQuery, OpGetPage, OpRealTimeQuery, OpAuthChallenge:
		return ClassRequest
	case OpProbeReply, OpStatusReply, OpPageGrant, OpRealTimeInfo, OpAuthResponse:
		return ClassReply
	case OpTimeDiff, OpErrReport, OpPeriodChange, OpPut:
		return ClassOneWay
	case OpAck:
		return ClassAck
	}
	return ClassUnknown
}

// ReplyOp returns the reply kind of a request kind (ok false otherwise).
func (o Op) ReplyOp() (Op, bool) {
	switch o.Kind() {
	case OpProbe:
		return OpProbeReply, true
	case OpStatusQuery:
		return OpStatusReply, true
	case OpGetPage:
		return OpPageGrant, true
	case OpRealTimeQuery:
		return OpRealTimeInfo, true
	case OpAuthChallenge:
		return OpAuthResponse, true
	}
	return 0, false
}

// String names the op, with a "+R" suffix when flagged.
func (o Op) String() string {
	var s string
	switch o.Kind() {
	case OpProbe:
		s = "probe"
	case OpProbeReply:
		s = "probe-reply"
	case OpTimeDiff:
		s = "timediff"
	case OpErrReport:
		s = "errreport"
	case OpPeriodChange:
		s = "periodchange"
	case OpAck:
		s = "ack"
	case OpStatusQuery:
		s = "status-query"
	case OpStatusReply:
		s = "status-reply"
	case OpGetPage:
		s = "getp"
	case OpPageGrant:
		s = "getpgrant"
	case OpRealTimeQuery:
		s = "realtime-query"
	case OpRealTimeInfo:
		s = "realtime-info"
	case OpPut:
		s = "put"
	case OpAuthChallenge:
		s = "auth-challenge"
	case OpAuthResponse:
		s = "auth-response"
	default:
		s = fmt.Sprintf("op(0x%02x)", uint8(o.Kind()))
	}
	if o.Reliable() {
		s += "+R"
	}
	return s
}

// Sentinel errors wrapped by DecodeError and EncodeError.
var (
	ErrShort    = errors.New("input too short")
	ErrMagic    = errors.New("bad magic")
	ErrVersion  = errors.New("unsupported version")
	ErrOp       = errors.New("unknown op")
	ErrLength   = errors.New("length mismatch")
	ErrValue    = errors.New("invalid value")
	ErrTooLarge = errors.New("too large")
	ErrBuffer   = errors.New("buffer too small")
)

// DecodeError says which field of a packet could not be decoded and where.
type DecodeError struct {
	Field  string // e.g. "header.magic", "timediff.count"
	Offset int    // byte offset of the field in the packet
	Err    error  // one of the sentinel errors
	Detail string // optional: the offending value
}

// Error formats the error as "wire: decode FIELD at offset N: ERR (DETAIL)".
func (e *DecodeError) Error() string {
	s := fmt.Sprintf("wire: decode %s at offset %d: %v", e.Field, e.Offset, e.Err)
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Unwrap returns the sentinel error.
func (e *DecodeError) Unwrap() error { return e.Err }

// Header is the fixed part of every packet.
type Header struct {
	Version uint8
	Op      Op
	Sender  uint32
	Seq     uint32
	Length  uint16 // body length
}

// ParseHeader decodes and checks the header at the start of b (magic,
// version, a known op, and a body length equal to what follows).
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderLen {
		return h, &DecodeError{Field: "header", Offset: 0, Err: ErrShort, Detail: fmt.Sprintf("%d bytes, need %d", len(b), HeaderLen)}
	}
	if m := binary.BigEndian.Uint16(b[0:]); m != Magic {
		return h, &DecodeError{Field: "header.magic", Offset: 0, Err: ErrMagic, Detail: fmt.Sprintf("0x%04x", m)}
	}
	h.Version = b[2]
	if h.Version != Version {
		return h, &DecodeError{Field: "header.version", Offset: 2, Err: ErrVersion, Detail: fmt.Sprintf("%d, want %d", h.Version, Version)}
	}
	h.Op = Op(b[3])
	if h.Op.Class() == ClassUnknown {
		return h, &DecodeError{Field: "header.op", Offset: 3, Err: ErrOp, Detail: fmt.Sprintf("0x%02x", uint8(h.Op))}
	}
	h.Sender = binary.BigEndian.Uint32(b[4:])
	h.Seq = binary.BigEndian.Uint32(b[8:])
	h.Length = binary.BigEndian.Uint16(b[12:])
	if int(h.Length) != len(b)-HeaderLen {
		return h, &DecodeError{Field: "header.length", Offset: 12, Err: ErrLength, Detail: fmt.Sprintf("header says %d, datagram holds %d", h.Length, len(b)-HeaderLen)}
	}
	return h, nil
}

// Status is the body of OpStatusReply: a daemon's global time read at its
// local instant Local.
type Status struct {
	Local int64 // responder's local clock at the read, ns
	Time  engine.Time
	// Reference is the node the responder currently takes as the
	// reference (daemon reference failover).
	Reference uint32
	// Term and Flags are the election's (engine.Message.Term and Flags),
	// on the query and on the reply. Flags outside engine.FlagsAll are
	// refused.
	Term  uint32
	Flags uint8
	// Sent is a heartbeat query's global send time
	// (engine.Message.Sent); the reply does not carry it.
	Sent int64
}

// Page is the body of OpGetPage (Addr only) and OpPageGrant (Addr and Data),
// Mocha's GETP and GETPGRANT.
type Page struct {
	Addr uint64
	Data []byte
}

// RealTime is the body of OpRealTimeQuery (Rate, RateErr) and of
// OpRealTimeInfo (the other fields): the daemon's real-time modes
// (Jezequel 5.4). Every float is finite and every error >= 0, else the
// encoder and the decoder refuse the packet.
type RealTime struct {
	// Query: the sender's clock rate relative to the reference's (d local /
	// d reference, about 1) and a bound on its error; Rate 0: no estimate
	// yet. After: the At of the newest mean-drift segment the sender knows
	// (math.MinInt64: none), so that the reference answers with the next.
	Rate, RateErr float64
	After         int64

	// Info: Mode (1 reference-realtime, 2 mean-drift, 0 nothing yet); At, a
	// reference (global) time; Offset, the value at At (reference-realtime:
	// CLOCK_REALTIME minus global time; mean-drift: the served time at At);
	// Slope, its rate per ns of global time (reference-realtime: d offset /
	// d global; mean-drift: d served / d global); Err and SlopeErr bound the
	// errors of Offset at At and of Slope. Prev (mean-drift): the At of the
	// segment this one follows, math.MinInt64 for the first.
	Mode     uint8
	At       int64
	Offset   int64
	Slope    float64
	Err      int64
	SlopeErr float64
	Prev     int64

	// Info, reference-realtime: the state of the reference's
	// CLOCK_REALTIME read with the model's sample (realtime.Upstream).
	// UpKnown false: not read, every other Up field zero. UpLeap is NTP's
	// leap indicator (0..2), UpStratum the upstream's stratum (0: not
	// known, at most 15); the errors are ns, >= 0.
	UpKnown, UpSynced                           bool
	UpLeap, UpStratum                           uint8
	UpRefID                                     uint32
	UpMaxErr, UpEstErr, UpRootDelay, UpRootDisp int64
}

// Packet is one datagram: the header fields and the body of its op. Only the
// body that belongs to Op is encoded: Msg for the engine ops, Status for
// OpStatusReply, Page for OpGetPage and OpPageGrant; AckOp for OpAck;
// OpStatusQuery has none; RealTime for OpRealTimeQuery and OpRealTimeInfo;
// Nonce for OpAuthChallenge and OpAuthResponse.
type Packet struct {
	Op     Op     // kind and reliable flag
	Sender uint32 // sender's node id; equals Msg.From for engine messages
	Seq    uint32 // sender's sequence number, or the answered one for replies and ACKs

	Msg    engine.Message
	Status Status
	Page   Page
	// RealTime is the body of OpRealTimeQuery and OpRealTimeInfo.
	RealTime RealTime
	// AckOp is the body of OpAck: the op of the acknowledged message, so
	// that ACKs of a reply and of a request with equal sequence numbers
	// are told apart.
	AckOp Op
	// Nonce is the body of OpAuthChallenge and OpAuthResponse: a random
	// number the challenger picked, echoed by the response.
	Nonce uint64
}

// Sizes of the bodies.
const (
	engineCommonLen = 16 // To, Round, Seq, Term
	probeReplyLen   = engineCommonLen + 16
	mappingLen      = 6*8 + 1
	timeDiffFixed   = engineCommonLen + 2 + mappingLen
	sampleLen       = 32
	errReportLen    = engineCommonLen + 8
	periodChangeLen = engineCommonLen + 8
	statusLen       = 5*8 + 1 + 4 + 4 + 1 // ... Reference, Term, Flags
	statusQueryLen  = 4 + 1 + 8           // Term, Flags, Sent
	rtQueryLen      = 3 * 8
	rtInfoLen       = 1 + 6*8 + rtUpLen
	// rtUpLen: flags (known, synced, leap<<2), stratum, reference id and
	// four errors.
	rtUpLen  = 1 + 1 + 4 + 4*8
	nonceLen = 8 // OpAuthChallenge and OpAuthResponse: equal sizes, no amplification

	// Requests are padded with zeros to the size of their replies, so
	// that no reply is larger than the request it answers: a forged
	// source address gets no amplification.
	probePad   = probeReplyLen - engineCommonLen
	statusPad  = statusLen - statusQueryLen
	rtQueryPad = rtInfoLen - rtQueryLen
)

// Size returns the encoded size of the packet, or an error when the packet
// cannot be encoded (unknown op, too many samples, page too large).
func (p *Packet) Size() (int, error) {
	b, err := p.bodyLen()
	return HeaderLen + b, err
}

func (p *Packet) bodyLen() (int, error) {
	switch p.Op.Kind() {
	case OpProbe:
		return engineCommonLen + probePad, nil
	case OpProbeReply:
		return probeReplyLen, nil
	case OpTimeDiff:
		if n := len(p.Msg.Samples); n > MaxSamples {
			return 0, fmt.Errorf("wire: encode timediff: %d samples, at most %d: %w", n, MaxSamples, ErrTooLarge)
		}
		return timeDiffFixed + sampleLen*len(p.Msg.Samples), nil
	case OpErrReport:
		return errReportLen, nil
	case OpPeriodChange:
		return periodChangeLen, nil
	case OpAck:
		return 1, nil
	case OpStatusQuery:
		return statusQueryLen + statusPad, nil
	case OpStatusReply:
		return statusLen, nil
	case OpGetPage:
		return PageHeaderLen, nil
	case OpPageGrant, OpPut:
		if n := len(p.Page.Data); n > MaxPageData {
			return 0, fmt.Errorf("wire: encode %v: %d bytes of page data, at most %d: %w", p.Op.Kind(), n, MaxPageData, ErrTooLarge)
		}
		return PageHeaderLen + len(p.Page.Data), nil
	case OpRealTimeQuery:
		return rtQueryLen + rtQueryPad, nil
	case OpRealTimeInfo:
		return rtInfoLen, nil
	case OpAuthChallenge, OpAuthResponse:
		return nonceLen, nil
	}
	return 0, fmt.Errorf("wire: encode: op 0x%02x: %w", uint8(p.Op), ErrOp)
}

// MarshalBinary encodes the packet into a new slice.
func (p *Packet) MarshalBinary() ([]byte, error) {
	n, err := p.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := p.MarshalBinaryTo(b); err != nil {
		return nil, err
	}
	return b, nil
}

// MarshalBinaryTo encodes the packet into buf without allocating and returns
// the number of bytes written. buf must hold Size() bytes (MaxPacket always
// does).
func (p *Packet) MarshalBinaryTo(buf []byte) (int, error) {
	body, err := p.bodyLen()
	if err != nil {
		return 0, err
	}
	n := HeaderLen + body
	if len(buf) < n {
		return 0, fmt.Errorf("wire: encode %v: need %d bytes, have %d: %w", p.Op, n, len(buf), ErrBuffer)
	}
	if p.Op.Kind() <= OpPeriodChange {
		if want := engine.MsgType(p.Op.Kind()); p.Msg.Type != want {
			return 0, fmt.Errorf("wire: encode %v: Msg.Type %d does not match the op: %w", p.Op, p.Msg.Type, ErrValue)
		}
		if uint32(p.Msg.From) != p.Sender {
			return 0, fmt.Errorf("wire: encode %v: Msg.From %d differs from Sender %d: %w", p.Op, p.Msg.From, p.Sender, ErrValue)
		}
	}
	if p.Op.Kind() == OpPeriodChange && p.Msg.Period <= 0 {
		return 0, fmt.Errorf("wire: encode %v: period %d, must be > 0: %w", p.Op, p.Msg.Period, ErrValue)
	}
	if p.Op.Kind() == OpStatusReply && !validStatus(p.Status.Time.Status) {
		return 0, fmt.Errorf("wire: encode status-reply: status %d: %w", p.Status.Time.Status, ErrValue)
	}
	if k := p.Op.Kind(); (k == OpStatusQuery || k == OpStatusReply) && p.Status.Flags&^engine.FlagsAll != 0 {
		return 0, fmt.Errorf("wire: encode %v: flags 0x%02x: %w", p.Op, p.Status.Flags, ErrValue)
	}
	if k := p.Op.Kind(); k == OpRealTimeQuery || k == OpRealTimeInfo {
		if field, v := p.RealTime.invalid(k); field != "" {
			return 0, fmt.Errorf("wire: encode %v: %s = %v: %w", p.Op, field, v, ErrValue)
		}
	}
	if field, v := invalidMsg(p.Op.Kind(), &p.Msg); field != "" {
		return 0, fmt.Errorf("wire: encode %v: %s = %v: %w", p.Op, field, v, ErrValue)
	}
	b := buf[:n]
	be := binary.BigEndian
	be.PutUint16(b[0:], Magic)
	b[2] = Version
	b[3] = byte(p.Op)
	be.PutUint32(b[4:], p.Sender)
	be.PutUint32(b[8:], p.Seq)
	be.PutUint16(b[12:], uint16(body))
	o := HeaderLen
	put64 := func(v uint64) { be.PutUint64(b[o:], v); o += 8 }
	put32 := func(v uint32) { be.PutUint32(b[o:], v); o += 4 }
	m := &p.Msg
	switch p.Op.Kind() {
	case OpProbe, OpProbeReply, OpTimeDiff, OpErrReport, OpPeriodChange:
		put32(uint32(m.To))
		put32(m.Round)
		put32(m.Seq)
		put32(m.Term)
	}
	pad := func(k int) { clear(b[o : o+k]); o += k }
	switch p.Op.Kind() {
	case OpProbe:
		pad(probePad)
	case OpStatusQuery:
		put32(p.Status.Term)
		b[o] = p.Status.Flags
		o++
		put64(uint64(p.Status.Sent))
		pad(statusPad)
	case OpProbeReply:
		put64(uint64(m.T2))
		put64(uint64(m.T3))
	case OpTimeDiff:
		be.PutUint16(b[o:], uint16(len(m.Samples)))
		o += 2
		for _, s := range m.Samples {
			put64(uint64(s.SrcSend))
			put64(uint64(s.LocRecv))
			put64(uint64(s.LocSend))
			put64(uint64(s.SrcRecv))
		}
		mp := &m.Mapping
		put64(uint64(mp.X0))
		put64(uint64(mp.Y0))
		put64(math.Float64bits(mp.Skew))
		put64(uint64(mp.W0))
		put64(math.Float64bits(mp.SkewErr))
		put64(math.Float64bits(mp.Wander))
		b[o] = 0
		if mp.Valid {
			b[o] = 1
		}
		if m.Unsure {
			b[o] |= 2 // the source's own time is not synced (engine.Message.Unsure)
		}
		if m.Check {
			b[o] |= 4 // a check exchange, no round (engine.Message.Check)
		}
		o++
	case OpErrReport:
		put64(math.Float64bits(m.Err))
	case OpPeriodChange:
		put64(uint64(m.Period))
	case OpStatusReply:
		s := &p.Status
		put64(uint64(s.Local))
		put64(uint64(s.Time.Est))
		put64(uint64(s.Time.Earliest))
		put64(uint64(s.Time.Latest))
		put64(uint64(s.Time.Mono))
		b[o] = byte(s.Time.Status)
		o++
		put32(s.Reference)
		put32(s.Term)
		b[o] = s.Flags
		o++
	case OpAck:
		if p.AckOp.Class() == ClassUnknown || p.AckOp.Kind() == OpAck {
			return 0, fmt.Errorf("wire: encode ack: acknowledged op 0x%02x: %w", uint8(p.AckOp), ErrValue)
		}
		b[o] = byte(p.AckOp)
		o++
	case OpGetPage:
		put64(p.Page.Addr)
	case OpPageGrant, OpPut:
		put64(p.Page.Addr)
		o += copy(b[o:], p.Page.Data)
	case OpRealTimeQuery:
		put64(math.Float64bits(p.RealTime.Rate))
		put64(math.Float64bits(p.RealTime.RateErr))
		put64(uint64(p.RealTime.After))
		pad(rtQueryPad)
	case OpRealTimeInfo:
		rt := &p.RealTime
		b[o] = rt.Mode
		o++
		put64(uint64(rt.At))
		put64(uint64(rt.Offset))
		put64(math.Float64bits(rt.Slope))
		put64(uint64(rt.Err))
		put64(math.Float64bits(rt.SlopeErr))
		put64(uint64(rt.Prev))
		var fl byte
		if rt.UpKnown {
			fl |= 1
		}
		if rt.UpSynced {
			fl |= 2
		}
		b[o], b[o+1] = fl|rt.UpLeap<<2, rt.UpStratum
		o += 2
		put32(rt.UpRefID)
		put64(uint64(rt.UpMaxErr))
		put64(uint64(rt.UpEstErr))
		put64(uint64(rt.UpRootDelay))
		put64(uint64(rt.UpRootDisp))
	case OpAuthChallenge, OpAuthResponse:
		put64(p.Nonce)
	}
	if o != n {
		// Unreachable unless bodyLen and the encoder disagree.
		return 0, fmt.Errorf("wire: encode %v: wrote %d bytes, sized %d: %w", p.Op, o, n, ErrLength)
	}
	return n, nil
}

// reader decodes big-endian fields and remembers the first error.
type reader struct {
	b   []byte
	o   int
	err error
}

func (r *reader) need(field string, n int) bool {
	if r.err != nil {
		return false
	}
	if len(r.b)-r.o < n {
		r.err = &DecodeError{Field: field, Offset: r.o, Err: ErrShort, Detail: fmt.Sprintf("need %d bytes, %d left", n, len(r.b)-r.o)}
		return false
	}
	return true
}

func (r *reader) u64(field string) uint64 {
	if !r.need(field, 8) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.o:])
	r.o += 8
	return v
}

func (r *reader) i64(field string) int64 { return int64(r.u64(field)) }

func (r *reader) f64(field string) float64 { return math.Float64frombits(r.u64(field)) }

func (r *reader) u32(field string) uint32 {
	if !r.need(field, 4) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.o:])
	r.o += 4
	return v
}

func (r *reader) u16(field string) uint16 {
	if !r.need(field, 2) {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.o:])
	r.o += 2
	return v
}

// zeros reads n bytes of padding, which must be zero (the encoding stays
// canonical and the padding carries nothing).
func (r *reader) zeros(field string, n int) {
	if !r.need(field, n) {
		return
	}
	for i, c := range r.b[r.o : r.o+n] {
		if c != 0 {
			r.err = &DecodeError{Field: field, Offset: r.o + i, Err: ErrValue, Detail: fmt.Sprintf("padding byte 0x%02x, want 0", c)}
			return
		}
	}
	r.o += n
}

func (r *reader) u8(field string) uint8 {
	if !r.need(field, 1) {
		return 0
	}
	v := r.b[r.o]
	r.o++
	return v
}

// flags reads the election's flags, refusing any outside engine.FlagsAll.
func (r *reader) flags(field string) uint8 {
	off := r.o
	v := r.u8(field)
	if r.err == nil && v&^engine.FlagsAll != 0 {
		r.err = &DecodeError{Field: field, Offset: off, Err: ErrValue, Detail: fmt.Sprintf("0x%02x, known 0x%02x", v, engine.FlagsAll)}
	}
	return v
}

// UnmarshalBinary decodes one packet that fills b exactly. It copies what it
// keeps (samples, page data), reusing p's slices when their capacity allows,
// so decoding into the same Packet again does not allocate. On error p is
// left in an unspecified state.
func (p *Packet) UnmarshalBinary(b []byte) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	p.Op, p.Sender, p.Seq = h.Op, h.Sender, h.Seq
	samples, data := p.Msg.Samples[:0], p.Page.Data[:0]
	p.Msg = engine.Message{}
	p.Status = Status{}
	p.Page = Page{}
	p.RealTime = RealTime{}
	p.AckOp = 0
	p.Nonce = 0
	r := reader{b: b, o: HeaderLen}
	kind := h.Op.Kind()
	if kind <= OpPeriodChange {
		m := &p.Msg
		m.Type = engine.MsgType(kind)
		m.From = engine.NodeID(h.Sender)
		m.To = engine.NodeID(r.u32("msg.to"))
		m.Round = r.u32("msg.round")
		m.Seq = r.u32("msg.seq")
		m.Term = r.u32("msg.term")
	}
	switch kind {
	case OpProbe:
		r.zeros("probe.pad", probePad)
	case OpStatusQuery:
		p.Status.Term = r.u32("status-query.term")
		p.Status.Flags = r.flags("status-query.flags")
		p.Status.Sent = r.i64("status-query.sent")
		r.zeros("status-query.pad", statusPad)
	case OpProbeReply:
		p.Msg.T2 = r.i64("probereply.t2")
		p.Msg.T3 = r.i64("probereply.t3")
	case OpTimeDiff:
		m := &p.Msg
		off := r.o
		n := int(r.u16("timediff.count"))
		if r.err == nil {
			if n > MaxSamples {
				r.err = &DecodeError{Field: "timediff.count", Offset: off, Err: ErrTooLarge, Detail: fmt.Sprintf("%d samples, at most %d", n, MaxSamples)}
			} else if left := len(b) - r.o - mappingLen; n*sampleLen > left {
				// Bound the count by what the datagram holds before allocating.
				r.err = &DecodeError{Field: "timediff.count", Offset: off, Err: ErrLength, Detail: fmt.Sprintf("%d samples need %d bytes, %d left", n, n*sampleLen, max(left, 0))}
			}
		}
		if r.err == nil && n > 0 {
			if cap(samples) >= n {
				samples = samples[:n]
			} else {
				samples = make([]estimate.Sample, n)
			}
			for i := range samples {
				s := &samples[i]
				s.SrcSend = r.i64("timediff.sample.srcsend")
				s.LocRecv = r.i64("timediff.sample.locrecv")
				s.LocSend = r.i64("timediff.sample.locsend")
				s.SrcRecv = r.i64("timediff.sample.srcrecv")
			}
			m.Samples = samples
		}
		mp := &m.Mapping
		mp.X0 = r.i64("timediff.mapping.x0")
		mp.Y0 = r.i64("timediff.mapping.y0")
		mp.Skew = r.f64("timediff.mapping.skew")
		mp.W0 = r.i64("timediff.mapping.w0")
		mp.SkewErr = r.f64("timediff.mapping.skewerr")
		mp.Wander = r.f64("timediff.mapping.wander")
		off = r.o
		switch v := r.u8("timediff.mapping.valid"); {
		case r.err != nil:
		case v > 7:
			r.err = &DecodeError{Field: "timediff.mapping.valid", Offset: off, Err: ErrValue, Detail: fmt.Sprintf("%d, want bit 0 (valid), bit 1 (source unsure) and bit 2 (check) only", v)}
		default:
			mp.Valid = v&1 == 1
			m.Unsure = v&2 != 0
			m.Check = v&4 != 0
		}
	case OpErrReport:
		p.Msg.Err = r.f64("errreport.err")
	case OpPeriodChange:
		off := r.o
		p.Msg.Period = r.i64("periodchange.period")
		if r.err == nil && p.Msg.Period <= 0 {
			r.err = &DecodeError{Field: "periodchange.period", Offset: off, Err: ErrValue, Detail: fmt.Sprintf("%d, must be > 0", p.Msg.Period)}
		}
	case OpStatusReply:
		s := &p.Status
		s.Local = r.i64("status.local")
		s.Time.Est = r.i64("status.est")
		s.Time.Earliest = r.i64("status.earliest")
		s.Time.Latest = r.i64("status.latest")
		s.Time.Mono = r.i64("status.mono")
		off := r.o
		v := r.u8("status.status")
		if r.err == nil && !validStatus(engine.Status(v)) {
			r.err = &DecodeError{Field: "status.status", Offset: off, Err: ErrValue, Detail: fmt.Sprintf("%d", v)}
		}
		s.Time.Status = engine.Status(v)
		s.Reference = r.u32("status.reference")
		s.Term = r.u32("status.term")
		s.Flags = r.flags("status.flags")
	case OpAck:
		off := r.o
		v := Op(r.u8("ack.op"))
		if r.err == nil && (v.Class() == ClassUnknown || v.Kind() == OpAck) {
			r.err = &DecodeError{Field: "ack.op", Offset: off, Err: ErrOp, Detail: fmt.Sprintf("0x%02x", uint8(v))}
		}
		p.AckOp = v
	case OpGetPage:
		p.Page.Addr = r.u64("getp.addr")
	case OpPageGrant, OpPut:
		field := "getpgrant.addr"
		if kind == OpPut {
			field = "put.addr"
		}
		p.Page.Addr = r.u64(field)
		if r.err == nil {
			// The length check in ParseHeader bounds the copy by the datagram.
			p.Page.Data = append(data, b[r.o:]...)
			r.o = len(b)
		}
	case OpRealTimeQuery, OpRealTimeInfo:
		rt := &p.RealTime
		off := r.o
		name := "realtime-query"
		if kind == OpRealTimeQuery {
			rt.Rate = r.f64("realtime-query.rate")
			rt.RateErr = r.f64("realtime-query.rate_err")
			rt.After = r.i64("realtime-query.after")
			r.zeros("realtime-query.pad", rtQueryPad)
		} else {
			name = "realtime-info"
			rt.Mode = r.u8("realtime-info.mode")
			rt.At = r.i64("realtime-info.at")
			rt.Offset = r.i64("realtime-info.offset")
			rt.Slope = r.f64("realtime-info.slope")
			rt.Err = r.i64("realtime-info.err")
			rt.SlopeErr = r.f64("realtime-info.slope_err")
			rt.Prev = r.i64("realtime-info.prev")
			fo := r.o
			fl := r.u8("realtime-info.up_flags")
			if r.err == nil && fl>>4 != 0 {
				r.err = &DecodeError{Field: "realtime-info.up_flags", Offset: fo, Err: ErrValue, Detail: fmt.Sprintf("%#x, want bits 0-3 only", fl)}
			}
			rt.UpKnown, rt.UpSynced, rt.UpLeap = fl&1 != 0, fl&2 != 0, fl>>2&3
			rt.UpStratum = r.u8("realtime-info.up_stratum")
			rt.UpRefID = r.u32("realtime-info.up_refid")
			rt.UpMaxErr = r.i64("realtime-info.up_max_err")
			rt.UpEstErr = r.i64("realtime-info.up_est_err")
			rt.UpRootDelay = r.i64("realtime-info.up_root_delay")
			rt.UpRootDisp = r.i64("realtime-info.up_root_disp")
		}
		if r.err == nil {
			if field, v := rt.invalid(kind); field != "" {
				r.err = &DecodeError{Field: name + "." + field, Offset: off, Err: ErrValue, Detail: fmt.Sprint(v)}
			}
		}
	case OpAuthChallenge, OpAuthResponse:
		p.Nonce = r.u64("auth.nonce")
	}
	if r.err == nil && kind <= OpPeriodChange {
		if field, v := invalidMsg(kind, &p.Msg); field != "" {
			r.err = &DecodeError{Field: field, Offset: HeaderLen, Err: ErrValue, Detail: fmt.Sprint(v)}
		}
	}
	if r.err != nil {
		return r.err
	}
	if r.o != len(b) {
		return &DecodeError{Field: "body", Offset: r.o, Err: ErrLength, Detail: fmt.Sprintf("%d trailing bytes after %v body", len(b)-r.o, h.Op)}
	}
	return nil
}

// invalid names the first field of a real-time body that no sender
// produces (a NaN, an infinity, a negative error, an unknown mode), or "".
func (rt *RealTime) invalid(kind Op) (string, any) {
	fin := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	if kind == OpRealTimeQuery {
		switch {
		case !fin(rt.Rate) || rt.Rate < 0:
			return "rate", rt.Rate
		case !fin(rt.RateErr) || rt.RateErr < 0:
			return "rate_err", rt.RateErr
		}
		return "", nil
	}
	switch {
	case rt.Mode > 2:
		return "mode", rt.Mode
	case !fin(rt.Slope):
		return "slope", rt.Slope
	case rt.Err < 0:
		return "err", rt.Err
	case !fin(rt.SlopeErr) || rt.SlopeErr < 0:
		return "slope_err", rt.SlopeErr
	case rt.UpLeap > 2:
		return "up_leap", rt.UpLeap
	case rt.UpStratum > 15:
		return "up_stratum", rt.UpStratum
	case rt.UpMaxErr < 0:
		return "up_max_err", rt.UpMaxErr
	case rt.UpEstErr < 0:
		return "up_est_err", rt.UpEstErr
	case rt.UpRootDelay < 0:
		return "up_root_delay", rt.UpRootDelay
	case rt.UpRootDisp < 0:
		return "up_root_disp", rt.UpRootDisp
	case !rt.UpKnown && (rt.UpSynced || rt.UpLeap != 0 || rt.UpStratum != 0 || rt.UpRefID != 0 ||
		rt.UpMaxErr != 0 || rt.UpEstErr != 0 || rt.UpRootDelay != 0 || rt.UpRootDisp != 0):
		return "up_known", false
	}
	return "", nil
}
