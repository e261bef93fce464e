package netlab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gclock/gclock/internal/quantile"
	"github.com/gclock/gclock/netmodel"
	"golang.org/x/sys/unix"

	"github.com/gclock/gclock/internal/sockts"
)

// ValidateConfig says how to probe the link between two hosts.
type ValidateConfig struct {
	A, B     int           // the two hosts; probes go both ways at once
	Probes   int           // probes per direction
	Interval time.Duration // between probes of one direction
	Port     int           // UDP port on both hosts
	// Stagger starts B's probes half an interval after A's, so that the two
	// directions' frames never meet in the switch (false: both at once).
	Stagger bool
	// PingPong: only A sends probes; B answers each one at once, as a sync
	// daemon does, and the B>A direction is measured on the answers. The
	// two directions then differ by role (prober, responder) as well.
	PingPong bool
}

// DefaultValidateConfig probes h0<->h1 with 2000 probes each way, one every
// 2 ms (4 s): enough for a p99, slow enough that probes never queue.
func DefaultValidateConfig() ValidateConfig {
	return ValidateConfig{A: 0, B: 1, Probes: 2000, Interval: 2 * time.Millisecond, Port: 47001, Stagger: true}
}

// DirResult is what one direction of a link delivered, measured with kernel
// timestamps: the sender's software transmit stamp (SO_TIMESTAMPING) and
// the receiver's receive stamp (SO_TIMESTAMPNS), on the one kernel clock
// every namespace shares, so each difference is a true one-way delay.
type DirResult struct {
	From       int     `json:"from"`
	To         int     `json:"to"`
	Link       string  `json:"link"`       // the configured model of this direction
	Sent       int     `json:"sent"`       // probes sent with a transmit timestamp
	Received   int     `json:"received"`   // distinct probes received
	Duplicates int     `json:"duplicates"` // extra copies received
	Reordered  int     `json:"reordered"`  // probes that arrived after a later-sent one
	LossRate   float64 `json:"loss_rate"`  // 1 - Received/Sent
	DupRate    float64 `json:"dup_rate"`   // Duplicates/Received

	// Measured one-way delay, ns.
	MinNs int64 `json:"min_ns"`
	P50Ns int64 `json:"p50_ns"`
	P99Ns int64 `json:"p99_ns"`
	MaxNs int64 `json:"max_ns"`
	// The configured model's delay quantiles, ns (0 for a direct link).
	CfgMinNs int64 `json:"cfg_min_ns"`
	CfgP50Ns int64 `json:"cfg_p50_ns"`
	CfgP99Ns int64 `json:"cfg_p99_ns"`
	// The switch's own release lateness in this direction, ns (its part of
	// the excess over the configured delay); zero for a direct link.
	SwitchLateP50Ns int64 `json:"switch_late_p50_ns"`
	SwitchLateP99Ns int64 `json:"switch_late_p99_ns"`
	// How long the switch's write(2) took (the receiving host's stack runs
	// inside it, after that host's receive stamp): not part of the delay.
	SwitchWriteP50Ns int64 `json:"switch_write_p50_ns"`
	SwitchWriteP99Ns int64 `json:"switch_write_p99_ns"`
}

// Validate sends UDP probes both ways between two hosts of the lab and
// returns what each direction delivered next to what was configured.
func (l *Lab) Validate(ctx context.Context, vc ValidateConfig) ([]DirResult, error) {
	if err := vc.check(l.cfg.Hosts); err != nil {
		return nil, err
	}
	sa, err := openProbe(l.HostNS(vc.A), HostAddr(vc.A).As4(), vc.Port)
	if err != nil {
		return nil, fmt.Errorf("lab: validate: host %d: %w", vc.A, err)
	}
	defer unix.Close(sa)
	sb, err := openProbe(l.HostNS(vc.B), HostAddr(vc.B).As4(), vc.Port)
	if err != nil {
		return nil, fmt.Errorf("lab: validate: host %d: %w", vc.B, err)
	}
	defer unix.Close(sb)
	// Warm up until each side has heard the other, so that ARP is resolved
	// (through a lossy link too) before the first probe.
	warmA, warmB, err := warmUp(sa, sb, HostAddr(vc.A).As4(), HostAddr(vc.B).As4(), vc.Port)
	if err != nil {
		return nil, fmt.Errorf("lab: validate: h%d<->h%d: %w", vc.A, vc.B, err)
	}
	drainSocket(sa)
	drainSocket(sb)
	if l.sw != nil {
		l.sw.ResetStats()
	}

	ab := newProbeDir(vc.Probes, warmA)
	ba := newProbeDir(vc.Probes, warmB)
	stop := make(chan struct{})
	var rw sync.WaitGroup
	rw.Add(2)
	var echo func(seq uint64)
	if vc.PingPong {
		// B answers probe seq with echo seq; its k-th answer has OPT_ID
		// warmB+k, so ba maps ids to sequence numbers.
		dst := &unix.SockaddrInet4{Port: vc.Port, Addr: HostAddr(vc.A).As4()}
		payload := make([]byte, 16)
		copy(payload[8:], "gclabech")
		echo = func(seq uint64) {
			binary.BigEndian.PutUint64(payload, seq)
			if unix.Sendto(sb, payload, 0, dst) == nil {
				ba.idSeq = append(ba.idSeq, int(seq))
			}
			ba.collectTx(sb, false)
		}
	}
	go func() { defer rw.Done(); ab.receive(sb, "gclabprb", echo, stop) }()
	go func() {
		defer rw.Done()
		ba.receive(sa, map[bool]string{true: "gclabech", false: "gclabprb"}[vc.PingPong], nil, stop)
	}()
	var sw sync.WaitGroup
	errs := make([]error, 2)
	sw.Add(2)
	go func() { defer sw.Done(); errs[0] = ab.send(ctx, sa, HostAddr(vc.B).As4(), vc) }()
	go func() {
		defer sw.Done()
		if vc.PingPong {
			return
		}
		if vc.Stagger {
			time.Sleep(vc.Interval / 2)
		}
		errs[1] = ba.send(ctx, sb, HostAddr(vc.A).As4(), vc)
	}()
	sw.Wait()
	time.Sleep(300 * time.Millisecond) // the slowest probe's delay, with a wide margin
	close(stop)
	rw.Wait()
	if vc.PingPong {
		ba.collectTx(sb, true)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("lab: validate: %w", err)
	}
	var lat []DirStats
	if l.sw != nil {
		lat = l.sw.Stats()
	}
	out := []DirResult{ab.result(vc.A, vc.B, l.cfg.Link, lat), ba.result(vc.B, vc.A, l.cfg.Link, lat)}
	return out, nil
}

// check reports the first field of vc a lab of hosts hosts cannot probe.
func (vc ValidateConfig) check(hosts int) error {
	if vc.A == vc.B || vc.A < 0 || vc.B < 0 || vc.A >= hosts || vc.B >= hosts {
		return fmt.Errorf("lab: validate: hosts %d,%d: want two different hosts in 0..%d", vc.A, vc.B, hosts-1)
	}
	if vc.Probes < 10 || vc.Probes > 1_000_000 {
		return fmt.Errorf("lab: validate: probes %d: want 10..1000000", vc.Probes)
	}
	if vc.Interval <= 0 || vc.Interval > time.Second {
		return fmt.Errorf("lab: validate: interval %v: want (0,1s]", vc.Interval)
	}
	if vc.Port <= 0 || vc.Port > 65535 {
		return fmt.Errorf("lab: validate: port %d: want 1..65535", vc.Port)
	}
	return nil
}

type probeDir struct {
	idBase          uint32  // OPT_ID of probe 0: the sends before it were warm-ups
	idSeq           []int   // ping-pong answers: the k-th send's sequence number (nil: k itself)
	tx              []int64 // by seq, 0 = no stamp
	mu              sync.Mutex
	rx              []int64 // first arrival, by seq
	dups, reordered int
	maxSeq          int
}

func newProbeDir(n int, idBase uint32) *probeDir {
	return &probeDir{idBase: idBase, tx: make([]int64, n), rx: make([]int64, n), maxSeq: -1}
}

// warmUp sends small datagrams both ways every 20 ms until each side has
// received one (at most 3 s), and returns how many each side sent.
func warmUp(sa, sb int, a, b [4]byte, port int) (sentA, sentB uint32, err error) {
	buf := make([]byte, 64)
	gotA, gotB := false, false
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if !gotB {
			if unix.Sendto(sa, []byte("warm"), 0, &unix.SockaddrInet4{Port: port, Addr: b}) == nil {
				sentA++
			}
		}
		if !gotA {
			if unix.Sendto(sb, []byte("warm"), 0, &unix.SockaddrInet4{Port: port, Addr: a}) == nil {
				sentB++
			}
		}
		time.Sleep(20 * time.Millisecond)
		if _, _, err := unix.Recvfrom(sb, buf, unix.MSG_DONTWAIT); err == nil {
			gotB = true
		}
		if _, _, err := unix.Recvfrom(sa, buf, unix.MSG_DONTWAIT); err == nil {
			gotA = true
		}
		if gotA && gotB {
			return sentA, sentB, nil
		}
	}
	return 0, 0, fmt.Errorf("no datagram crossed the link in 3 s (received: a %v, b %v)", gotA, gotB)
}

func openProbe(ns string, addr [4]byte, port int) (int, error) {
	var fd int
	err := inNetns(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("udp socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: addr}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind %v:%d: %w", addr, port, err)
		}
		return nil
	})
	if err != nil {
		return -1, err
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("SO_TIMESTAMPNS", err)
	}
	flags := unix.SOF_TIMESTAMPING_TX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE |
		unix.SOF_TIMESTAMPING_OPT_ID | unix.SOF_TIMESTAMPING_OPT_TSONLY
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags); err != nil {
		return fail("SO_TIMESTAMPING", err)
	}
	tv := unix.Timeval{Usec: 50000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail("SO_RCVTIMEO", err)
	}
	return fd, nil
}

func drainSocket(fd int) {
	buf := make([]byte, 2048)
	for {
		if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err != nil {
			break
		}
	}
	for {
		if _, _, _, _, err := unix.Recvmsg(fd, buf, buf, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT); err != nil {
			break
		}
	}
}

// send sends the probes and collects their transmit stamps from the error
// queue. The OPT_ID counter starts at 0 with the first send after
// SO_TIMESTAMPING was set; the warm-ups took the first idBase ids, so
// probe seq has id idBase+seq.
func (d *probeDir) send(ctx context.Context, fd int, to [4]byte, vc ValidateConfig) error {
	dst := &unix.SockaddrInet4{Port: vc.Port, Addr: to}
	payload := make([]byte, 16)
	copy(payload[8:], "gclabprb")
	next := time.Now()
	for seq := range d.tx {
		if err := ctx.Err(); err != nil {
			return err
		}
		binary.BigEndian.PutUint64(payload, uint64(seq))
		if err := unix.Sendto(fd, payload, 0, dst); err != nil {
			return fmt.Errorf("probe %d to %v: %w", seq, to, err)
		}
		d.collectTx(fd, false)
		next = next.Add(vc.Interval)
		time.Sleep(time.Until(next))
	}
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if d.collectTx(fd, true) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// collectTx reads the transmit stamps waiting on fd's error queue.
func (d *probeDir) collectTx(fd int, once bool) int {
	var oob [256]byte
	got := 0
	for {
		_, oobn, _, _, err := unix.Recvmsg(fd, nil, oob[:], unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if err != nil {
			return got
		}
		id, ts, ok := parseTxStamp(oob[:oobn])
		if !ok || id < d.idBase {
			continue
		}
		k := int(id - d.idBase)
		if d.idSeq != nil {
			if k >= len(d.idSeq) {
				continue
			}
			k = d.idSeq[k]
		}
		if k < len(d.tx) {
			d.tx[k] = ts
			got++
		}
	}
}

// parseTxStamp reads a transmit timestamp notification: the software stamp
// of SCM_TIMESTAMPING and the OPT_ID counter of the sock_extended_err.
func parseTxStamp(oob []byte) (id uint32, ts int64, ok bool) {
	st, err := sockts.Parse(oob)
	if err != nil || st.Software == 0 || !st.HasTxKey {
		return 0, 0, false
	}
	return st.TxKey, st.Software, true
}

// receive records the arrivals of datagrams tagged tag; echo, if not nil,
// is called with each new sequence number at once (ping-pong answers).
func (d *probeDir) receive(fd int, tag string, echo func(seq uint64), stop <-chan struct{}) {
	buf := make([]byte, 2048)
	oob := make([]byte, 256)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if err != nil {
			continue
		}
		if n != 16 || string(buf[8:16]) != tag {
			continue
		}
		rx := rxTimestamp(oob[:oobn])
		seq := binary.BigEndian.Uint64(buf)
		if rx == 0 || seq >= uint64(len(d.rx)) {
			continue
		}
		d.mu.Lock()
		first := d.rx[seq] == 0
		d.mu.Unlock()
		if first && echo != nil {
			echo(seq)
		}
		d.mu.Lock()
		if !first {
			d.dups++
		} else {
			d.rx[seq] = rx
			if int(seq) < d.maxSeq {
				d.reordered++
			}
		}
		if int(seq) > d.maxSeq {
			d.maxSeq = int(seq)
		}
		d.mu.Unlock()
	}
}

func (d *probeDir) result(from, to int, link netmodel.Link, lat []DirStats) DirResult {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := DirResult{From: from, To: to, Duplicates: d.dups, Reordered: d.reordered}
	var owd []int64
	for i, tx := range d.tx {
		if tx == 0 {
			continue
		}
		r.Sent++
		if d.rx[i] != 0 {
			r.Received++
			owd = append(owd, d.rx[i]-tx)
		}
	}
	if r.Sent > 0 {
		r.LossRate = 1 - float64(r.Received)/float64(r.Sent)
	}
	if r.Received > 0 {
		r.DupRate = float64(r.Duplicates) / float64(r.Received)
	}
	q := quantile.Of(owd, 0, 0.5, 0.99, 1)
	r.MinNs, r.P50Ns, r.P99Ns, r.MaxNs = q[0], q[1], q[2], q[3]
	if link.Direct {
		r.Link = "direct"
	} else {
		m := link.Model(from, to)
		r.Link = m.String()
		c := m.Quantiles(200000, 1, 0, 0.5, 0.99)
		r.CfgMinNs, r.CfgP50Ns, r.CfgP99Ns = c[0], c[1], c[2]
	}
	for _, s := range lat {
		if s.In == from && s.Out == to {
			r.SwitchLateP50Ns, r.SwitchLateP99Ns = s.LatenessP50Ns, s.LatenessP99Ns
			r.SwitchWriteP50Ns, r.SwitchWriteP99Ns = s.WriteP50Ns, s.WriteP99Ns
		}
	}
	return r
}

// PrintValidation writes results as a table.
func PrintValidation(w io.Writer, rs []DirResult) {
	fmt.Fprintf(w, "%-6s %-24s %6s %6s %6s %6s %8s %8s %8s %8s | %8s %8s %8s | %9s %9s %9s\n",
		"dir", "configured", "sent", "loss%", "dup%", "reord%",
		"min_us", "p50_us", "p99_us", "max_us", "cfgmin", "cfgp50", "cfgp99", "late_p50", "late_p99", "write_p50")
	us := func(ns int64) string { return fmt.Sprintf("%.1f", float64(ns)/1e3) }
	pct := func(a, b int) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", 100*float64(a)/float64(b))
	}
	for _, r := range rs {
		fmt.Fprintf(w, "%-6s %-24s %6d %6.2f %6s %6s %8s %8s %8s %8s | %8s %8s %8s | %9s %9s %9s\n",
			fmt.Sprintf("h%d>h%d", r.From, r.To), r.Link, r.Sent, 100*r.LossRate, pct(r.Duplicates, r.Received),
			pct(r.Reordered, r.Received), us(r.MinNs), us(r.P50Ns), us(r.P99Ns), us(r.MaxNs),
			us(r.CfgMinNs), us(r.CfgP50Ns), us(r.CfgP99Ns), us(r.SwitchLateP50Ns), us(r.SwitchLateP99Ns), us(r.SwitchWriteP50Ns))
	}
}
