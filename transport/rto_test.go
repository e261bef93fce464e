package transport

import (
	"net/netip"
	"testing"
	"time"
)

func TestRTOEstimator(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name        string
		samples     []time.Duration
		attempt     int
		srtt, rtvar time.Duration
		rto         time.Duration
	}{
		// RFC 6298 2.2: first sample R gives SRTT=R, RTTVAR=R/2, RTO=3R.
		{"first sample", []time.Duration{10 * ms}, 1, 10 * ms, 5 * ms, 30 * ms},
		{"no sample uses the initial RTO", nil, 1, 0, 0, 50 * ms},
		{"backoff doubles", nil, 3, 0, 0, 200 * ms},
		{"backoff capped", nil, 10, 0, 0, time.Second},
		{"floor", []time.Duration{10 * time.Microsecond}, 1, 10 * time.Microsecond, 5 * time.Microsecond, 2 * ms},
		// 2.3: RTTVAR = 3/4*5 + 1/4*|10-20| = 6.25, SRTT = 7/8*10 + 1/8*20 = 11.25.
		{"second sample", []time.Duration{10 * ms, 20 * ms}, 1, 11250 * time.Microsecond, 6250 * time.Microsecond, 36250 * time.Microsecond},
		{"non-positive ignored", []time.Duration{0, -ms}, 1, 0, 0, 50 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e rtoEstimator
			for _, s := range tt.samples {
				e.add(s)
			}
			if e.srtt != tt.srtt || e.rttvar != tt.rtvar {
				t.Errorf("srtt %v rttvar %v, want %v %v", e.srtt, e.rttvar, tt.srtt, tt.rtvar)
			}
			if got := e.rto(tt.attempt, 50*ms, 2*ms, time.Second); got != tt.rto {
				t.Errorf("rto %v, want %v", got, tt.rto)
			}
		})
	}
}

func TestRecent(t *testing.T) {
	t0 := time.Unix(1000, 0)
	k := func(seq uint32) msgKey {
		return msgKey{from: netip.MustParseAddrPort("10.0.0.1:1"), sender: 7, seq: seq}
	}
	r := newRecent(10*time.Second, 3)
	r.put(k(1), []byte("a"), t0)
	r.put(k(2), nil, t0.Add(time.Second))
	if e, ok := r.get(k(1), t0.Add(2*time.Second)); !ok || string(e.reply) != "a" {
		t.Fatalf("k1: %v %v", e, ok)
	}
	if _, ok := r.get(k(3), t0); ok {
		t.Fatal("unknown key found")
	}
	// Expiry: k1 is older than ttl at t0+10s, k2 is not.
	if _, ok := r.get(k(1), t0.Add(10*time.Second)); ok {
		t.Error("k1 not expired after ttl")
	}
	if _, ok := r.get(k(2), t0.Add(10*time.Second)); !ok {
		t.Error("k2 expired early")
	}
	// Size bound: the oldest goes first and is counted.
	now := t0.Add(10 * time.Second)
	for s := uint32(10); s < 13; s++ {
		r.put(k(s), nil, now)
	}
	if r.len() != 3 || r.evicted != 1 {
		t.Errorf("len %d evicted %d, want 3 and 1", r.len(), r.evicted)
	}
	if _, ok := r.get(k(2), now); ok {
		t.Error("oldest entry survived eviction")
	}
	// Same sequence number from another sender or address is another key.
	other := k(10)
	other.sender = 8
	if _, ok := r.get(other, now); ok {
		t.Error("keys of different senders collide")
	}
}
