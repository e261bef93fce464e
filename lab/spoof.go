package lab

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/wire"
	"github.com/gclock/gclock/wire/keyfile"
)

// The spoofer (docs/daemon.md, "Security"; `gclock lab spoof`): a process
// in its own host namespace that sends the daemons forged datagrams from
// forged source addresses through a raw IP socket: probes, probe replies,
// time diffs (far rounds, NaN and 1e300 floats, and, given captured
// traffic, copies of real time diffs with the next round numbers and the
// source's time moved by a millisecond), error reports, period changes,
// status and real-time queries (from peers' addresses and from its own
// with made-up sender ids), unsolicited replies, and copies of captured
// datagrams as they were. With a key id it appends a trailer under that
// id with a random tag: it does not have the key.
//
// An insider (KeyFile: it holds the cluster key, issue 17) sends only what
// a key holder sends to wedge a node rather than to lie about time: probes
// sealed as one peer to another with an auth sequence of 2^63 or more,
// probes sealed just beyond the jump limit above the last number it saw,
// the captured datagrams as they were, and captured datagrams sent to
// another peer than their destination.

// spoofSendConfig is what the spoofer process is given (as a JSON file).
type spoofSendConfig struct {
	Peers    map[uint32]string `json:"peers"`     // id -> host:port of each daemon
	Own      string            `json:"own"`       // the spoofer's own host:port (replies to it are counted)
	KeyID    uint32            `json:"key_id"`    // the cluster's key id; 0: the cluster has no key
	Rate     int               `json:"rate"`      // datagrams per second
	Duration time.Duration     `json:"duration"`  // how long to send
	Capture  string            `json:"capture"`   // file of captured datagrams (writeCapture); empty: none
	Seed     uint64            `json:"seed"`      // of the choices
	Report   string            `json:"report"`    // where to write the spoofSendStats (JSON)
	MaxDrift float64           `json:"max_drift"` // the daemons' sync.max_drift (real-time rate lies stay within it)
	// KeyFile makes the spoofer an insider: it seals with the cluster
	// key in this file (key KeyID) and sends insiderKinds only.
	KeyFile string `json:"key_file,omitempty"`
}

// spoofSendStats counts what the spoofer sent and what came back to it.
type spoofSendStats struct {
	Sent          uint64            `json:"sent"`
	SentBytes     uint64            `json:"sent_bytes"`
	ByKind        map[string]uint64 `json:"by_kind"`
	OwnQueries    uint64            `json:"own_queries"`     // queries sent from its own address
	OwnQueryBytes uint64            `json:"own_query_bytes"` // their bytes (UDP payload)
	Answers       uint64            `json:"answers"`         // datagrams that came back to its own address
	AnswerBytes   uint64            `json:"answer_bytes"`    // their bytes (UDP payload)
	SendErrors    uint64            `json:"send_errors"`
	Captured      int               `json:"captured"`   // captured datagrams available for replays
	Late          float64           `json:"late_share"` // share of send slots that ran late (the rate was not met)
}

// capturedDatagram is one datagram seen on the wire.
type capturedDatagram struct {
	From, To netip.AddrPort
	Payload  []byte
}

// writeCapture writes datagrams as records: from (4+2), to (4+2), length
// (2), payload, all big-endian, IPv4 only.
func writeCapture(w io.Writer, cs []capturedDatagram) error {
	bw := bufio.NewWriter(w)
	for _, c := range cs {
		var h [14]byte
		f, t := c.From.Addr().As4(), c.To.Addr().As4()
		copy(h[0:], f[:])
		binary.BigEndian.PutUint16(h[4:], c.From.Port())
		copy(h[6:], t[:])
		binary.BigEndian.PutUint16(h[10:], c.To.Port())
		binary.BigEndian.PutUint16(h[12:], uint16(len(c.Payload)))
		bw.Write(h[:])
		bw.Write(c.Payload)
	}
	return bw.Flush()
}

// readCapture reads what writeCapture wrote.
func readCapture(r io.Reader) ([]capturedDatagram, error) {
	br := bufio.NewReader(r)
	var out []capturedDatagram
	for {
		var h [14]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("capture record %d: %w", len(out), err)
		}
		c := capturedDatagram{
			From: netip.AddrPortFrom(netip.AddrFrom4([4]byte(h[0:4])), binary.BigEndian.Uint16(h[4:])),
			To:   netip.AddrPortFrom(netip.AddrFrom4([4]byte(h[6:10])), binary.BigEndian.Uint16(h[10:])),
		}
		c.Payload = make([]byte, binary.BigEndian.Uint16(h[12:]))
		if _, err := io.ReadFull(br, c.Payload); err != nil {
			return nil, fmt.Errorf("capture record %d payload: %w", len(out), err)
		}
		out = append(out, c)
	}
}

// forger makes forged datagrams.
type forger struct {
	rng      *rand.Rand
	peers    []uint32
	addrs    map[uint32]netip.AddrPort
	own      netip.AddrPort
	keyID    uint32
	maxDrift float64
	captured []capturedDatagram
	diffs    []capturedDatagram // captured time diffs
	seq      uint32
	// An insider's keyring (nil: an outsider), and the highest auth
	// sequence seen in the capture from each peer.
	keys *wire.Keyring
	top  map[uint32]uint64
}

// insiderKinds names what an insider sends, in the order of
// forgeInsider's cases.
var insiderKinds = []string{"insider_seq_2^63", "insider_seq_beyond_jump", "replay", "replay_misaddressed"}

// spoofKinds names what the forger sends, in the order of forge's cases.
var spoofKinds = []string{"probe", "probe_reply", "timediff_far_round", "timediff_bad_floats", "timediff_shifted_copy",
	"err_report", "period_change", "status_query_peer", "status_query_own", "realtime_query_peer", "realtime_query_own",
	"status_reply", "realtime_info", "replay"}

func newForger(c spoofSendConfig, captured []capturedDatagram) (*forger, error) {
	f := &forger{rng: rand.New(rand.NewPCG(c.Seed, 0x73706f6f66)), addrs: map[uint32]netip.AddrPort{},
		keyID: c.KeyID, maxDrift: c.MaxDrift, captured: captured}
	for id, a := range c.Peers {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || !ap.Addr().Is4() {
			return nil, fmt.Errorf("spoof: peer %d: %q is not an IPv4 host:port", id, a)
		}
		f.peers = append(f.peers, id)
		f.addrs[id] = ap
	}
	if len(f.peers) < 2 {
		return nil, errors.New("spoof: need at least two peers")
	}
	slices.Sort(f.peers)
	own, err := netip.ParseAddrPort(c.Own)
	if err != nil || !own.Addr().Is4() {
		return nil, fmt.Errorf("spoof: own address %q is not an IPv4 host:port", c.Own)
	}
	f.own = own
	if c.KeyFile != "" {
		if f.keys, err = insiderKeyring(c.KeyFile, c.KeyID); err != nil {
			return nil, err
		}
		f.top = map[uint32]uint64{}
		for _, cp := range captured {
			if len(cp.Payload) >= wire.HeaderLen+wire.AuthLen {
				if _, tr, err := f.keys.Open(cp.Payload); err == nil {
					id := binary.BigEndian.Uint32(cp.Payload[4:])
					f.top[id] = max(f.top[id], tr.Seq)
				}
			}
		}
	}
	for _, cp := range captured {
		if p, ok := f.open(cp.Payload); ok && p.Op.Kind() == wire.OpTimeDiff {
			f.diffs = append(f.diffs, cp)
		}
	}
	return f, nil
}

// open decodes a captured payload, its trailer (if the cluster has a key)
// stripped unchecked.
func (f *forger) open(b []byte) (wire.Packet, bool) {
	if f.keyID != 0 {
		if len(b) < wire.AuthLen {
			return wire.Packet{}, false
		}
		b = b[:len(b)-wire.AuthLen]
	}
	var p wire.Packet
	return p, p.UnmarshalBinary(b) == nil
}

// seal appends a trailer with the cluster's key id and a random tag.
func (f *forger) seal(b []byte) []byte {
	if f.keyID == 0 {
		return b
	}
	t := make([]byte, wire.AuthLen)
	binary.BigEndian.PutUint32(t, f.keyID)
	for i := 4; i < len(t); i++ {
		t[i] = byte(f.rng.Uint32())
	}
	return append(b, t...)
}

func (f *forger) pick() (victim, claimed uint32) {
	v := f.rng.IntN(len(f.peers))
	c := (v + 1 + f.rng.IntN(len(f.peers)-1)) % len(f.peers)
	return f.peers[v], f.peers[c]
}

// insiderKeyring reads key id's secret from a key file (keyfile.Parse's
// format) for the insider: the cluster key a compromised host holds.
func insiderKeyring(path string, id uint32) (*wire.Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("spoof: insider key: %w", err)
	}
	defer f.Close()
	keys, err := keyfile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("spoof: insider key %s: %w", path, err)
	}
	for _, k := range keys {
		if k.ID == id {
			return wire.NewKeyring(id, []wire.Key{k})
		}
	}
	return nil, fmt.Errorf("spoof: insider key %s: no key id %d", path, id)
}

// forgeInsider is forge for an insider (f.keys set).
func (f *forger) forgeInsider() (from, to netip.AddrPort, b []byte, kind int) {
	victim, claimed := f.pick()
	from, to = f.addrs[claimed], f.addrs[victim]
	f.seq++
	kind = f.rng.IntN(len(insiderKinds))
	if (kind >= 2 && len(f.captured) == 0) || (kind == 1 && f.top[claimed] == 0) {
		kind = 0
	}
	switch kind {
	case 0, 1:
		p := wire.Packet{Op: wire.OpProbe, Sender: claimed, Seq: f.seq}
		p.Msg = engine.Message{Type: engine.MsgProbe, From: engine.NodeID(claimed), To: engine.NodeID(victim), Round: f.rng.Uint32(), Seq: f.rng.Uint32()}
		pb, err := p.MarshalBinary()
		if err != nil {
			panic(fmt.Sprintf("spoof: forging an insider probe: %v", err)) // a bug of this file
		}
		seq := uint64(1)<<63 | f.rng.Uint64()
		if kind == 1 {
			// Just beyond the jump limit above the last number seen from
			// the claimed peer (the capture's; the peer's counter toward
			// this victim is near it or lower).
			seq = f.top[claimed] + wire.MaxSeqJump + 1 + uint64(f.rng.IntN(1<<20))
		}
		return from, to, f.keys.Seal(pb, victim, seq), kind
	case 2:
		c := f.captured[f.rng.IntN(len(f.captured))]
		return c.From, c.To, c.Payload, kind
	default:
		c := f.captured[f.rng.IntN(len(f.captured))]
		for _, id := range f.peers {
			if a := f.addrs[id]; a != c.To && a != c.From {
				return c.From, a, c.Payload, kind
			}
		}
		return c.From, c.To, c.Payload, 2
	}
}

// kinds names what this forger sends.
func (f *forger) kinds() []string {
	if f.keys != nil {
		return insiderKinds
	}
	return spoofKinds
}

// forge returns one forged datagram: its source, destination, payload
// and kind (an index into f.kinds()).
// Its length is the catalogue of spoofKinds, one case each, kept in one
// switch so that a kind's index and its datagram sit side by side.
func (f *forger) forge() (from, to netip.AddrPort, b []byte, kind int) {
	if f.keys != nil {
		return f.forgeInsider()
	}
	victim, claimed := f.pick()
	from, to = f.addrs[claimed], f.addrs[victim]
	f.seq++
	kind = f.rng.IntN(len(spoofKinds))
	if (kind == 4 && len(f.diffs) == 0) || (kind == 13 && len(f.captured) == 0) {
		kind = 2
	}
	now := int64(f.rng.Uint64() >> 2) // any time: the spoofer does not know the victims' clocks
	m := engine.Message{From: engine.NodeID(claimed), To: engine.NodeID(victim), Round: f.rng.Uint32(), Seq: f.rng.Uint32()}
	p := wire.Packet{Sender: claimed, Seq: f.seq}
	switch kind {
	case 0:
		m.Type, p.Op = engine.MsgProbe, wire.OpProbe
	case 1:
		m.Type, p.Op = engine.MsgProbeReply, wire.OpProbeReply
		m.T2 = now % (1 << 60)
		m.T3 = m.T2 + 1000
	case 2, 3:
		m.Type, p.Op = engine.MsgTimeDiff, wire.OpTimeDiff
		m.Round = 1 << 31
		t := now % (1 << 60)
		for i := range 3 {
			s := int64(i) * 1e6
			m.Samples = append(m.Samples, estimate.Sample{SrcSend: t + s, LocRecv: t + s + 1e12, LocSend: t + s + 1e12 + 1000, SrcRecv: t + s + 5000})
		}
		m.Mapping = estimate.Mapping{X0: t, Y0: t - 1e12, Skew: 1e-6, W0: 1000, SkewErr: 1e-9, Valid: true}
	case 4:
		c := f.diffs[f.rng.IntN(len(f.diffs))]
		q, _ := f.open(c.Payload)
		q.Seq = f.seq
		q.Msg.Round += 1 + uint32(f.rng.IntN(8)) // the next rounds
		const lie = int64(time.Millisecond)      // the source's time moved by 1 ms
		for i := range q.Msg.Samples {
			q.Msg.Samples[i].SrcSend += lie
			q.Msg.Samples[i].SrcRecv += lie
		}
		q.Msg.Mapping.Y0 += lie
		b, err := q.MarshalBinary()
		if err != nil {
			return f.forge()
		}
		return c.From, c.To, f.seal(b), kind
	case 5:
		m.Type, p.Op = engine.MsgErrReport, wire.OpErrReport|wire.ReliableFlag
		m.Err = 1e6
	case 6:
		m.Type, p.Op = engine.MsgPeriodChange, wire.OpPeriodChange|wire.ReliableFlag
		m.Period = 1 + f.rng.Int64N(1e6)
	case 7:
		p.Op = wire.OpStatusQuery
	case 8, 10:
		from, p.Sender = f.own, 1000+uint32(f.rng.IntN(200)) // made-up ids
		p.Op = wire.OpStatusQuery
		if kind == 10 {
			p.Op = wire.OpRealTimeQuery
			p.RealTime = wire.RealTime{Rate: 1 + (2*f.rng.Float64()-1)*f.maxDrift, RateErr: 1e-9, After: math.MinInt64}
		}
	case 9:
		p.Op = wire.OpRealTimeQuery
		p.RealTime = wire.RealTime{Rate: 1 + f.maxDrift, RateErr: 1e-9, After: math.MinInt64}
	case 11:
		p.Op = wire.OpStatusReply
		p.Status = wire.Status{Local: now, Time: engine.Time{Est: now + 1e12, Earliest: now + 1e12 - 10, Latest: now + 1e12 + 10, Status: engine.StatusSynced}, Reference: claimed}
	case 12:
		p.Op = wire.OpRealTimeInfo
		p.RealTime = wire.RealTime{Mode: 2, At: now, Offset: now + 1e12, Slope: 1.001, Prev: math.MinInt64}
	case 13:
		c := f.captured[f.rng.IntN(len(f.captured))]
		return c.From, c.To, c.Payload, kind // as it was, trailer and all
	}
	if p.Op.Kind() <= wire.OpPeriodChange {
		p.Msg = m
	}
	b, err := p.MarshalBinary()
	if err != nil {
		panic(fmt.Sprintf("spoof: forging %s: %v", spoofKinds[kind], err)) // a bug of this file
	}
	if kind == 3 {
		// NaN skew and 1e300 skew error: bytes no encoder writes.
		o := len(b) - 1 // the valid byte; before it wander, skew error, w0, skew
		binary.BigEndian.PutUint64(b[o-4*8:], math.Float64bits(math.NaN()))
		binary.BigEndian.PutUint64(b[o-2*8:], math.Float64bits(1e300))
	}
	return from, to, f.seal(b), kind
}

// ipUDP builds an IPv4+UDP datagram (UDP checksum 0: none, allowed over
// IPv4; the kernel fills in the IP checksum and id).
func ipUDP(from, to netip.AddrPort, payload []byte) []byte {
	b := make([]byte, 28+len(payload))
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	b[8] = 64
	b[9] = unix.IPPROTO_UDP
	f, t := from.Addr().As4(), to.Addr().As4()
	copy(b[12:], f[:])
	copy(b[16:], t[:])
	binary.BigEndian.PutUint16(b[20:], from.Port())
	binary.BigEndian.PutUint16(b[22:], to.Port())
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload)))
	copy(b[28:], payload)
	return b
}

// spoofSend runs the spoofer: Rate forged datagrams a second for
// Duration, from a raw socket (root, in the spoofer's own namespace).
func spoofSend(ctx context.Context, c spoofSendConfig) (spoofSendStats, error) {
	st := spoofSendStats{ByKind: map[string]uint64{}}
	var captured []capturedDatagram
	if c.Capture != "" {
		fh, err := os.Open(c.Capture)
		if err != nil {
			return st, fmt.Errorf("spoof: %w", err)
		}
		captured, err = readCapture(fh)
		fh.Close()
		if err != nil {
			return st, fmt.Errorf("spoof: %s: %w", c.Capture, err)
		}
	}
	st.Captured = len(captured)
	f, err := newForger(c, captured)
	if err != nil {
		return st, err
	}
	if c.Rate < 1 || c.Rate > 1e6 {
		return st, fmt.Errorf("spoof: rate %d: want 1..1000000 datagrams/s", c.Rate)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return st, fmt.Errorf("spoof: raw socket (root?): %w", err)
	}
	defer unix.Close(fd)
	// Replies to the spoofer's own address: counted, to measure what an
	// outsider gets back for what it sends.
	lc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(f.own))
	if err != nil {
		return st, fmt.Errorf("spoof: listen on %v: %w", f.own, err)
	}
	defer lc.Close()
	answers := make(chan [2]uint64, 1)
	go countAnswers(lc, answers)
	sendForged(ctx, fd, f, c, &st)
	time.Sleep(200 * time.Millisecond) // the last answers
	lc.Close()
	a := <-answers
	st.Answers, st.AnswerBytes = a[0], a[1]
	if c.Report != "" {
		b, _ := json.MarshalIndent(st, "", "  ")
		if err := os.WriteFile(c.Report, b, 0o644); err != nil {
			return st, fmt.Errorf("spoof: report: %w", err)
		}
	}
	return st, nil
}

// countAnswers counts the datagrams and bytes lc receives until it is
// closed, then sends both on answers.
func countAnswers(lc *net.UDPConn, answers chan<- [2]uint64) {
	var n, bytes uint64
	buf := make([]byte, wire.MaxPacket)
	for {
		k, _, err := lc.ReadFromUDPAddrPort(buf)
		if err != nil {
			answers <- [2]uint64{n, bytes}
			return
		}
		n++
		bytes += uint64(k)
	}
}

// sendForged sends f's datagrams on the raw socket fd at c.Rate for
// c.Duration (a millisecond's worth at a time), counting into st.
func sendForged(ctx context.Context, fd int, f *forger, c spoofSendConfig, st *spoofSendStats) {
	const slot = time.Millisecond
	perSlot := float64(c.Rate) * slot.Seconds()
	start := time.Now()
	end := start.Add(c.Duration)
	due, slots, late := 0.0, 0, 0
	for now := start; now.Before(end) && ctx.Err() == nil; now = time.Now() {
		slots++
		due += perSlot
		for ; due >= 1; due-- {
			from, to, b, kind := f.forge()
			sa := &unix.SockaddrInet4{Addr: to.Addr().As4()}
			if err := unix.Sendto(fd, ipUDP(from, to, b), 0, sa); err != nil {
				st.SendErrors++
				continue
			}
			st.Sent++
			st.SentBytes += uint64(len(b))
			st.ByKind[f.kinds()[kind]]++
			if from == f.own {
				st.OwnQueries++
				st.OwnQueryBytes += uint64(len(b))
			}
		}
		next := start.Add(time.Duration(slots) * slot)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		} else {
			late++
		}
	}
	if slots > 0 {
		st.Late = float64(late) / float64(slots)
	}
}

// SpoofSendFile runs spoofSend with the JSON config in path, until ctx
// ends or the duration is over (the spoofer process's main).
func SpoofSendFile(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("spoof: %w", err)
	}
	var c spoofSendConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("spoof: %s: %w", path, err)
	}
	_, err = spoofSend(ctx, c)
	return err
}

// capture records the UDP datagrams to or from port that host's eth0
// sees for d (AF_PACKET, in the host's namespace): a tap on the wire.
func (l *Lab) capture(ctx context.Context, host int, port uint16, d time.Duration) ([]capturedDatagram, error) {
	var fd int
	err := l.InHost(host, func() error {
		var err error
		// ETH_P_ALL: the kernel shows a tap the host's outgoing frames
		// only on an all-protocols socket.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("capture on host %d: %w", host, err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	var out []capturedDatagram
	buf := make([]byte, 65536)
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue // timeout
		}
		b := buf[:n]
		if n < 28 || b[0]>>4 != 4 || b[9] != unix.IPPROTO_UDP {
			continue
		}
		ihl := int(b[0]&0xf) * 4
		if n < ihl+8 {
			continue
		}
		u := b[ihl:]
		sp, dp := binary.BigEndian.Uint16(u[0:]), binary.BigEndian.Uint16(u[2:])
		if sp != port && dp != port {
			continue
		}
		ulen := int(binary.BigEndian.Uint16(u[4:]))
		if ulen < 8 || ulen > len(u) {
			continue
		}
		out = append(out, capturedDatagram{
			From:    netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[12:16])), sp),
			To:      netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[16:20])), dp),
			Payload: append([]byte(nil), u[8:ulen]...),
		})
	}
	return out, nil
}

// htons puts a 16-bit value in network byte order.
func htons(v uint16) uint16 { return v<<8 | v>>8 }
