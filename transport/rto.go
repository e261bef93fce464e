package transport

import "time"

// rtoEstimator keeps a smoothed round trip and its variation per peer, as
// TCP does (RFC 6298), and derives the retransmission timeout from them:
//
//	first sample R: SRTT = R, RTTVAR = R/2
//	later:          RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|, SRTT = 7/8 SRTT + 1/8 R
//	RTO = clamp(SRTT + 4 RTTVAR, min, max), doubled per retransmission
//
// Only samples of requests answered on their first transmission are fed in
// (Karn's rule): a reply to a retransmitted request could answer any copy.
type rtoEstimator struct {
	srtt, rttvar time.Duration
	samples      int
}

// add feeds one round-trip sample; non-positive samples are ignored.
func (e *rtoEstimator) add(r time.Duration) {
	if r <= 0 {
		return
	}
	if e.samples == 0 {
		e.srtt, e.rttvar = r, r/2
	} else {
		d := e.srtt - r
		if d < 0 {
			d = -d
		}
		e.rttvar = (3*e.rttvar + d) / 4
		e.srtt = (7*e.srtt + r) / 8
	}
	e.samples++
}

// rto returns the timeout for the given attempt (1 = first transmission).
func (e *rtoEstimator) rto(attempt int, initial, lo, hi time.Duration) time.Duration {
	t := initial
	if e.samples > 0 {
		t = e.srtt + 4*e.rttvar
	}
	t = min(max(t, lo), hi)
	for i := 1; i < attempt && t < hi; i++ {
		t *= 2
	}
	return min(t, hi)
}
