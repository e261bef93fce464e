package netlab

import "github.com/gclock/gclock/internal/quantile"

// latenessCap bounds the lateness samples kept per direction.
const latenessCap = 1 << 20

// DirStats counts what the switch did to frames from one port to another.
type DirStats struct {
	In         int   `json:"in"`         // ingress port (host index)
	Out        int   `json:"out"`        // egress port
	Frames     int64 `json:"frames"`     // frames that arrived for this direction
	Dropped    int64 `json:"dropped"`    // lost by the link model
	Duplicated int64 `json:"duplicated"` // delivered twice
	Reordered  int64 `json:"reordered"`  // released without delay (reorder)
	// Partitioned counts the frames dropped by Partition (also in Dropped).
	Partitioned int64 `json:"partitioned,omitempty"`
	SendErrors  int64 `json:"send_errors"`
	// Bytes is the frames' size as the switch read them (GSO frames whole).
	Bytes     int64   `json:"bytes"`
	lateness  []int32 // release lateness samples, ns
	writeCost []int32 // write(2) durations, ns
	queueWait []int32 // port queue waits of small frames, ns
	// Filled by Stats: how late write(2) was called after the frame's
	// release time, ns.
	LatenessP50Ns   int64 `json:"lateness_p50_ns"`
	LatenessP99Ns   int64 `json:"lateness_p99_ns"`
	LatenessMaxNs   int64 `json:"lateness_max_ns"`
	LatenessSamples int   `json:"lateness_samples"`
	// How long write(2) took: the receiving host's softirq work runs inside
	// it, after the host's receive stamp was taken.
	WriteP50Ns int64 `json:"write_p50_ns"`
	WriteP99Ns int64 `json:"write_p99_ns"`
	// With a port model (switchConfig.PortRate): how long the small frames
	// (at most smallFrame bytes: probes, replies, ACKs) of this direction
	// waited in the egress port's queue behind the frames before them.
	SmallQueueP50Ns   int64 `json:"small_queue_p50_ns,omitempty"`
	SmallQueueP99Ns   int64 `json:"small_queue_p99_ns,omitempty"`
	SmallQueueMaxNs   int64 `json:"small_queue_max_ns,omitempty"`
	SmallQueueSamples int   `json:"small_queue_samples,omitempty"`
}

// smallFrame is the largest frame whose queue wait DirStats reports: the
// daemons' probes and replies, PTP and NTP messages and TCP ACKs are
// smaller, bulk data is not.
const smallFrame = 256

// PortStats is what one egress port's queue (switchConfig.PortRate) sent
// since the switch started or its stats were reset.
type PortStats struct {
	Port      int     `json:"port"` // egress port (host index)
	RateBps   int64   `json:"rate_bps"`
	Frames    int64   `json:"frames"`
	WireBytes int64   `json:"wire_bytes"` // netmodel.WireBytes of every frame
	BusyNs    int64   `json:"busy_ns"`    // the frames' serialisation time
	ElapsedNs int64   `json:"elapsed_ns"`
	Util      float64 `json:"utilisation"` // BusyNs / ElapsedNs
}

func (s *Switch) dirStats(d [2]int) *DirStats {
	st := s.stats[d]
	if st == nil {
		st = &DirStats{In: d[0], Out: d[1]}
		s.stats[d] = st
	}
	return st
}

// Stats returns a snapshot of per-direction counters and release lateness
// quantiles, ordered by ingress then egress port.
func (s *Switch) Stats() []DirStats {
	s.statMu.Lock()
	defer s.statMu.Unlock()
	var out []DirStats
	for i := range s.ports {
		for j := range s.ports {
			st := s.stats[[2]int{i, j}]
			if st == nil {
				continue
			}
			c := *st
			c.lateness = nil
			v := make([]int64, len(st.lateness))
			for k, x := range st.lateness {
				v[k] = int64(x)
			}
			q := quantile.Of(v, 0.5, 0.99, 1)
			c.LatenessP50Ns, c.LatenessP99Ns, c.LatenessMaxNs = q[0], q[1], q[2]
			c.LatenessSamples = len(v)
			c.writeCost = nil
			w := make([]int64, len(st.writeCost))
			for k, x := range st.writeCost {
				w[k] = int64(x)
			}
			q = quantile.Of(w, 0.5, 0.99)
			c.WriteP50Ns, c.WriteP99Ns = q[0], q[1]
			c.queueWait = nil
			if len(st.queueWait) > 0 {
				v := make([]int64, len(st.queueWait))
				for k, x := range st.queueWait {
					v[k] = int64(x)
				}
				q = quantile.Of(v, 0.5, 0.99, 1)
				c.SmallQueueP50Ns, c.SmallQueueP99Ns, c.SmallQueueMaxNs = q[0], q[1], q[2]
				c.SmallQueueSamples = len(v)
			}
			out = append(out, c)
		}
	}
	return out
}

// warmUps is how many warm-up writes the switch made (see WarmAfter).
func (s *Switch) warmUps() int64 { return s.warmups.Load() }

// PortStats returns every egress port's counters (nil without a port
// model).
func (s *Switch) PortStats() []PortStats {
	if s.cfg.PortRate <= 0 {
		return nil
	}
	s.statMu.Lock()
	defer s.statMu.Unlock()
	el := nowWall() - s.statsSince
	out := make([]PortStats, len(s.egress))
	for i := range s.egress {
		p := &s.egress[i]
		out[i] = PortStats{Port: i, RateBps: p.RateBps, Frames: p.Frames(), WireBytes: p.Bytes(), BusyNs: p.BusyNs(), ElapsedNs: el}
		if el > 0 {
			out[i].Util = float64(p.BusyNs()) / float64(el)
		}
	}
	return out
}

// ResetStats forgets every counter and lateness sample (and the ports'
// counters, not their queues).
func (s *Switch) ResetStats() {
	s.statMu.Lock()
	s.stats = map[[2]int]*DirStats{}
	for i := range s.egress {
		s.egress[i].ResetCounters()
	}
	s.statsSince = nowWall()
	s.statMu.Unlock()
}
