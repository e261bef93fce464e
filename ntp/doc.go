// Package ntp is the NTPv4 (RFC 5905) packet format and a server's answer
// to a client request, as a pure function: the daemon hands Respond the
// request bytes, its readings of global time (UTC, with an error bound) at
// the request's arrival and at the reply's departure, and what it says
// about itself (synchronised or not, stratum, reference id, precision).
// Respond reads no clock and opens no socket, so every field of the reply
// is tested without a network (see ntp_test.go).
//
// Only client requests (mode 3, version 3 or 4, at least 48 bytes) are
// answered, and the answer is the 48-byte header: never larger than the
// request, so the server cannot amplify a spoofed request. Extension
// fields and MACs in a request are ignored (the reply is unauthenticated).
//
// The error bound goes into root dispersion: a client's root distance
// (root delay/2 + root dispersion + its own path's delay/2 and dispersion)
// then bounds its offset error, as RFC 5905 intends. Root delay is 0: the
// bound already covers every delay upstream of this server.
//
// A Responder answers only the networks of its Policy's allow list (the
// daemon's default: DefaultAllow, loopback and private ranges) and can
// limit each source's answers (RateLimit, as chrony's ratelimit, and off
// by default as chrony's: a burst, then one per interval; beyond, one
// request in 2^leak still answered, a kiss-o'-death RATE for one in 2^kod
// of the others, nothing for the rest; a fixed table whose least recently
// seen source a newcomer replaces); Stats count the denied, limited and
// KoD.
//
// Responder runs Respond on a socket (transport.UDPConn: kernel receive
// stamps) for a Source, the daemon's served time (daemon/ntp.go, the
// `ntp` config section); Query is a minimal SNTP client for tests. Stock
// clients (ntpdig, ntpdate -q, chronyd) are tested against both in the lab
// package (docs/daemon.md, "NTP and chrony").
package ntp
