package transport

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
