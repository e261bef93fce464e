package transport

import (
	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
)

// Every stamp this package gives lies on the safe side of the event it
// stands for, which is what the hull bounds need (estimate.Sample):
//
//   - send stamps are taken before the datagram leaves: user space before
//     sendmsg, the kernel's software stamp when the driver takes the packet;
//   - receive stamps are taken after it arrived: the kernel's when the
//     packet enters the stack, user space after recvmsg returns.
//
// So a send time recorded early and a receive time recorded late only widen
// an exchange; kernel stamps are the tightest safe values.

// RecvStamp returns the best receive stamp of in: the kernel's when present,
// else the user-space one.
func (in *Incoming) RecvStamp() int64 {
	if in.RecvKernel != 0 {
		return in.RecvKernel
	}
	return in.RecvUser
}

// SendStamp returns the best stamp of the last transmission: the kernel's
// when present, else the user-space one.
func (t Timing) SendStamp() int64 {
	if t.SendKernel != 0 {
		return t.SendKernel
	}
	return t.SendUser
}

// RecvStamp returns the best stamp of the answer's arrival.
func (t Timing) RecvStamp() int64 {
	if t.RecvKernel != 0 {
		return t.RecvKernel
	}
	return t.RecvUser
}

// ProbeSample turns a probe exchange started by the source (Liao: node 0
// starts every exchange) into a sample in the child's orientation:
// SrcSend = T1 and SrcRecv = T4 from the source's Timing, LocRecv = T2 and
// LocSend = T3 from the child's reply, which should carry
// Incoming.RecvStamp as T2 and a clock read just before replying as T3.
// ok is false when the probe was retransmitted (the reply may answer an
// earlier copy) or the stamps are out of order.
func ProbeSample(tm Timing, reply *engine.Message) (s estimate.Sample, ok bool) {
	if tm.Attempts != 1 || reply == nil || reply.Type != engine.MsgProbeReply {
		return s, false
	}
	s = estimate.Sample{SrcSend: tm.SendStamp(), LocRecv: reply.T2, LocSend: reply.T3, SrcRecv: tm.RecvStamp()}
	if s.SrcRecv < s.SrcSend || s.LocSend < s.LocRecv {
		return s, false
	}
	return s, true
}
