// Package chronycmd holds the part of chronyd's command protocol gclock
// speaks: the tracking request `chronyc tracking` sends and its reply.
//
// candm ("command and monitoring", chrony's candm.h) is chronyd's request
// and reply protocol on its command socket: datagrams, big-endian, over a
// Unix socket (/run/chrony/chronyd.sock, answered to root and chronyd's
// user, replied to the sender's socket path) or UDP port 323. This
// package speaks protocol version 6 and only REQ_TRACKING (33), a
// read-only request; the reply is RPY_TRACKING (5).
//
// The request (TrackingRequest) is a 20-byte header and nothing else:
//
//	0  version   6         1  type     1 (request)
//	2  res1      0         3  res2     0
//	4  command   33        6  attempt  0
//	8  sequence  (u32)     12 pad1, 16 pad2 (u32 each)
//
// padded with zeros to the length of its reply, 104 bytes: chronyd refuses
// a request shorter than the reply it would send (no amplification).
//
// The reply (ParseTracking) is a 28-byte header
//
//	0  version   6         1  type     2 (reply)
//	2  res1                3  res2
//	4  command   33        6  reply    5 (tracking)
//	8  status    0 (success; anything else is a refusal)
//	10 pad1, 12 pad2, 14 pad3 (u16 each)
//	16 sequence  (u32, the request's)
//	20 pad4, 24 pad5 (u32 each)
//
// followed by RPY_Tracking, 76 bytes up to its end-of-record marker; the
// offsets below are from the start of that body (add 28 for the
// datagram's):
//
//	0  ref_id (u32)        4  ip_addr (IPAddr: 16 address, u16 family, u16 pad)
//	24 stratum (u16)       26 leap_status (u16: 0 normal, 1 insert, 2 delete, 3 unsynchronised)
//	28 ref_time (Timespec: u32 seconds high, u32 seconds low, u32 ns)
//	40 current_correction  44 last_offset         48 rms_offset
//	52 freq_ppm            56 resid_freq_ppm      60 skew_ppm
//	64 root_delay          68 root_dispersion     72 last_update_interval
//
// where every field from 40 on is chrony's 32-bit Float (see Float), in
// seconds or ppm. current_correction is the `System time` of `chronyc
// tracking`: true time minus the system clock as chronyd estimates it, the
// correction it is applying (positive: the clock is slow).
//
// The daemon asks chronyd once per query from a fresh client socket
// (daemon/chrony.go); the lab keeps one client socket per chronyd and
// skips late replies (lab/chain.go, used by the chain and the peers in
// lab/peers.go). Both send TrackingRequest and decode
// with ParseTracking.
package chronycmd
