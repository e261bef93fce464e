// Package probe runs the sync exchanges of trace sessions over UDP with the
// daemon's protocol: package wire's OpProbe request and OpProbeReply reply,
// carried by a transport.Endpoint. The reference process runs a Server,
// every other process gives its Recorder a Client as its trace.Prober.
//
// One exchange is a probe and its reply; the reply is the acknowledgement
// (transport: no ACKs). A lost datagram costs a timeout and a retry with a
// new sequence number, so that a reply always answers the one copy sent; a
// late or duplicate reply (an old sequence number) is dropped by the
// transport, and a duplicate request is answered from its reply cache. The
// reply's T2 and T3 are the reference's clock when the probe arrived and
// just before the reply left; the client's stamps are its clock just before
// the send and when the reply was read. Stamps are user-space reads: they
// include the socket system calls, which widen the exchange's round trip
// but never move the truth outside it.
package probe
