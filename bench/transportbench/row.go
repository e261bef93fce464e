package transportbench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gclock/gclock/bench/workload"
	"github.com/gclock/gclock/transport"
)

// Modes of a Row.
const (
	AckOmission   = "ack-omission"    // the reply is the request's ACK (Mocha)
	AckPerMessage = "ack-per-message" // every message is ACKed
)

// Row is one mode at one loss rate.
type Row struct {
	Mode           string  `json:"mode"` // AckOmission or AckPerMessage
	LossPct        float64 `json:"loss_pct"`
	Requests       int     `json:"requests"`
	Failed         int     `json:"failed"`
	Messages       uint64  `json:"messages"` // datagrams both endpoints wrote (measured part)
	MessagesPerReq float64 `json:"messages_per_request"`
	Acks           uint64  `json:"acks"`
	Retransmits    uint64  `json:"retransmits"`
	// RelayDropped: datagrams the loopback relay dropped (0 in the lab).
	RelayDropped uint64 `json:"relay_dropped"`
	// Frames and Dropped: Ethernet frames the lab's switch saw (an 8 KB
	// datagram is 6 IP fragments) and dropped by its link model (0 on
	// loopback).
	Frames    int64   `json:"switch_frames"`
	Dropped   int64   `json:"switch_dropped"`
	ElapsedS  float64 `json:"elapsed_seconds"`
	ReqPerSec float64 `json:"requests_per_second"`
	P50us     float64 `json:"latency_p50_us"`
	P99us     float64 `json:"latency_p99_us"`
	MaxUs     float64 `json:"latency_max_us"`
	// SpeedupPct, on the ack-omission row: elapsed time with an ACK per
	// message / elapsed with ACK omission - 1, same work.
	SpeedupPct float64 `json:"speedup_pct,omitempty"`
	// Runs is the repetitions of a loopback row, the row being the one of
	// median elapsed time (0 in the lab: one run).
	Runs int `json:"runs"`
}

// Report is gclock bench-transport's output (-json).
type Report struct {
	Command string               `json:"command"`
	Config  map[string]any       `json:"config,omitempty"`
	Rows    []Row                `json:"pages,omitempty"`
	RTT     *workload.RTTResult  `json:"rtt,omitempty"`
	Remote  *workload.PageResult `json:"remote,omitempty"` // Peer: the client's result
	Stats   *transport.Stats     `json:"stats,omitempty"`  // Peer: the client's counters
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// rowOf fills the timing part of a row from a page client's result.
func (r *Row) fill(mode bool, res workload.PageResult) {
	r.Mode = AckOmission
	if mode {
		r.Mode = AckPerMessage
	}
	r.Requests, r.Failed = res.Requests, res.Failed
	r.ElapsedS, r.ReqPerSec = res.Elapsed.Seconds(), res.ReqPerSec
	r.P50us, r.P99us, r.MaxUs = us(res.P50), us(res.P99), us(res.Max)
}

// medianRow returns the run of median elapsed time.
func medianRow(rows []Row) Row {
	s := slices.Clone(rows)
	slices.SortFunc(s, func(a, b Row) int { return cmp.Compare(a.ElapsedS, b.ElapsedS) })
	m := s[len(s)/2]
	m.Runs = len(rows)
	return m
}

// speedup sets the ack-omission row's SpeedupPct against the ack per
// message row of the same loss rate.
func speedup(base Row, omit *Row) {
	if omit.ElapsedS > 0 {
		omit.SpeedupPct = 100 * (base.ElapsedS/omit.ElapsedS - 1)
	}
}

// ParseLosses parses comma-separated percentages in [0, 100) (the -loss
// flag).
func ParseLosses(s string) ([]float64, error) {
	var rates []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 || v >= 100 {
			return nil, fmt.Errorf("-loss: %q is not a percentage in [0, 100)", f)
		}
		rates = append(rates, v)
	}
	return rates, nil
}

// WriteLoopback prints a loopback report: the page table and the round
// trips with user-space and kernel stamps.
func WriteLoopback(w io.Writer, rep Report) {
	fmt.Fprintf(w, "page transfer on loopback through a lossy relay (%v requests of %v bytes, concurrency %v; median of %v runs)\n",
		rep.Config["requests"], rep.Config["page_bytes"], rep.Config["concurrency"], rep.Config["repeat"])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tloss %\tmessages\tmsgs/req\tacks\tretrans\tfailed\treq/s\tp50 us\tp99 us\tmax us\tspeedup\t")
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.2f\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.0f\t%s\t\n",
			r.Mode, r.LossPct, r.Messages, r.MessagesPerReq, r.Acks, r.Retransmits, r.Failed,
			r.ReqPerSec, r.P50us, r.P99us, r.MaxUs, r.speedupText())
	}
	tw.Flush()
	fmt.Fprintln(w, "speedup: elapsed time with an ACK per message / with ACK omission - 1, same work (Mocha, 16-node MM: up to 92%)")
	if r := rep.RTT; r != nil {
		fmt.Fprintf(w, "\nprobe round trip minus responder hold time, loopback (%d probes; %d retried, %d without all kernel stamps)\n",
			r.User.N, r.Retried, r.Missing)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "stamps\tmin us\tp50 us\tp99 us\t")
		for _, s := range []struct {
			name string
			v    workload.RTTStats
		}{{"user space", r.User}, {"kernel (SO_TIMESTAMPING)", r.Kernel}} {
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t\n", s.name, float64(s.v.Min)/1e3, float64(s.v.P50)/1e3, float64(s.v.P99)/1e3)
		}
		tw.Flush()
		fmt.Fprintf(w, "kernel stamps converted realtime->raw with a clock sandwich of half-width <= %d ns\n", r.MaxHalfWidth)
	}
}

// WriteLab prints the rows of Lab: client is the workload, delay the
// one-way link delay.
func WriteLab(w io.Writer, rows []Row, client workload.PageClientConfig, delay time.Duration) {
	fmt.Fprintf(w, "page transfer between lab hosts through the switch (%d requests of %d bytes, concurrency %d, link %v each way)\n",
		client.Requests, client.PageSize, client.Concurrency, delay)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tloss %\tmessages\tmsgs/req\tacks\tretrans\tframes\tdropped\tfailed\treq/s\tp50 us\tp99 us\tmax us\tspeedup\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.2f\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.0f\t%s\t\n",
			r.Mode, r.LossPct, r.Messages, r.MessagesPerReq, r.Acks, r.Retransmits, r.Frames, r.Dropped, r.Failed,
			r.ReqPerSec, r.P50us, r.P99us, r.MaxUs, r.speedupText())
	}
	tw.Flush()
	fmt.Fprintln(w, "speedup: elapsed time with an ACK per message / with ACK omission - 1, same work, same lab (Mocha, 16-node MM: up to 92%)")
}

func (r Row) speedupText() string {
	if r.Mode != AckOmission {
		return ""
	}
	return fmt.Sprintf("%+.0f%%", r.SpeedupPct)
}
