// Package wire is gclock's binary format on the network: one UDP datagram
// carries one Packet, a fixed 14-byte header followed by a body whose layout
// depends on the op code.
//
// The header (all integers big-endian):
//
//	offset size field
//	0      2    magic "GC"
//	2      1    version (1)
//	3      1    op: low 7 bits the kind, high bit the reliable flag
//	4      4    sender id
//	8      4    sequence number (a reply and an ACK carry the sequence
//	            number of the message they answer; an ACK's one-byte body
//	            is the op it acknowledges)
//	12     2    body length in bytes
//
// The op codes follow Mocha (Kise et al., seed 004): the low seven bits name
// the message and the high bit (ReliableFlag) says that the receiver must
// acknowledge it with an OpAck. Request/reply pairs (probe and probe reply,
// status query and reply, GETP and GETPGRANT) need no flag: the reply is the
// acknowledgement. Only one-way messages that must not be lost (error
// reports) carry the flag; the Mocha baseline flags everything.
//
// Encoding:
//
//	p := wire.Packet{Op: wire.OpProbe, Sender: 1, Seq: 7, Msg: msg}
//	n, err := p.MarshalBinaryTo(buf) // no allocation; buf of MaxPacket bytes always fits
//	b, err := p.MarshalBinary()      // allocates
//
// Decoding never panics and never allocates more than the input can hold:
// counts are checked against the remaining length before anything is made.
// Errors are *DecodeError values naming the field and its offset, wrapping
// one of the sentinel errors (ErrShort, ErrMagic, ErrVersion, ErrOp,
// ErrLength, ErrValue), so callers can use errors.Is.
//
// The encoding is canonical: a packet that decodes re-encodes to the same
// bytes. Fields of engine.Message that its type does not use (T2 on a probe,
// say) are not carried and come back as zero.
package wire
