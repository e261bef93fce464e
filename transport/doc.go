// Package transport is gclock's messaging layer over UDP, after Mocha (Kise
// et al., seed 004): request/reply traffic needs no acknowledgement because
// the reply is the acknowledgement.
//
// An Endpoint sends and serves over one PacketConn (ListenUDP for a real
// socket; tests use an in-memory network):
//
//	conn, _ := transport.ListenUDP("127.0.0.1:9000", transport.UDPOptions{Timestamps: true})
//	ep, _ := transport.New(transport.Config{ID: 1, Conn: conn, Handler: h, Logger: log})
//	go ep.Run(ctx)
//	reply, timing, err := ep.Request(ctx, peer, &wire.Packet{Op: wire.OpGetPage, Page: wire.Page{Addr: 7}})
//	_, err = ep.Send(ctx, peer, &wire.Packet{Op: wire.OpErrReport | wire.ReliableFlag, Msg: m})
//
// The protocol:
//
//   - Request sends a request (probe, status query, GETP) and waits for its
//     reply. Without a reply it retransmits the same bytes after a timeout
//     derived from the measured round trip (TCP's SRTT + 4 RTTVAR, clamped
//     to [MinRTO, MaxRTO], doubled per retry; only first-try answers are
//     measured, Karn's rule), at most MaxAttempts times.
//   - The responder remembers each request by (address, sender, sequence
//     number) for RecentTTL with its encoded reply: a repeated request gets
//     the same reply bytes again and the handler runs once.
//   - A reply carries the request's sequence number; a reply nobody waits
//     for (late, or a duplicate) is counted in Stats.Stale and dropped.
//   - One-way messages (TimeDiff, ErrReport) are sent once, unless flagged
//     with wire.ReliableFlag: then the receiver answers every copy with an
//     ACK, the sender retransmits until the ACK comes, and the receiver
//     delivers the message to its handler exactly once.
//   - Config.AckEvery is Mocha's baseline for comparison: every message is
//     flagged and acknowledged, requests and replies included.
//
// Authentication (auth.go): with Config.Keyring every datagram written is
// sealed for its destination node with a truncated HMAC-SHA256 tag and a
// fresh sequence number from that destination's counter, and every
// datagram read is opened before it is decoded; Config.Peers binds sender
// ids to source addresses; a per-sender replay window drops copies and
// refuses jumps, and a peer's window is set by a challenge (after a start,
// a jump or a replay) so that nothing captured before a restart is
// accepted after it. Stats counts the drops by reason (DropReasons).
//
// Timestamps: every exchange reports a Timing on the local clock, user-space
// stamps always and kernel stamps when the connection is a StampedConn.
// UDPConn asks the kernel for software receive and transmit stamps
// (SO_TIMESTAMPING; transmit stamps come back on the error queue, matched by
// OPT_ID) and converts them from CLOCK_REALTIME to CLOCK_MONOTONIC_RAW with
// an offset sampled right after each packet (internal/rawclock.WallOffset).
//
// PageServer is the responder of the paper's page-transfer workload
// (measure's communication test serves pages with it). The benchmark
// itself (the page client, the lossy Relay, the RTT measurement) lives in
// bench/workload, and `gclock bench-transport` prints it through
// bench/transportbench. See docs/transport.md for the figures.
package transport
