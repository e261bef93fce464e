package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/ntp"
	"github.com/gclock/gclock/transport"
)

// fixedSource serves CLOCK_REALTIME + 2 ms with a 100 us bound, stratum 2.
type fixedSource struct{}

func (fixedSource) At(raw int64) ntp.Reading {
	off, _ := rawclock.WallOffset()
	return ntp.Reading{Time: raw + off + 2_000_000, MaxErr: 100_000, OK: true}
}

func (fixedSource) Self() ntp.Server {
	return ntp.Server{Synced: true, Stratum: 2, RefID: 0x0a4d0001, Precision: -20, RefTime: 1_764_000_000_000_000_000}
}

func TestNTPQuery(t *testing.T) {
	conn, err := transport.ListenUDP("127.0.0.1:0", transport.UDPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := ntp.NewResponder(conn, fixedSource{}, gtime.RawNow, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Serve(ctx)
	addr := conn.LocalAddr().String()

	var out, errb bytes.Buffer
	if err := runNTPQuery([]string{"-n", "3", "-json", addr}, &out, &errb); err != nil {
		t.Fatalf("%v (%s)", err, errb.String())
	}
	var ss []ntpSample
	if err := json.Unmarshal(out.Bytes(), &ss); err != nil || len(ss) != 3 {
		t.Fatalf("JSON %q: %v", out.String(), err)
	}
	for _, s := range ss {
		if e := s.OffsetNs - 2_000_000; e > s.DelayNs/2+1000 || -e > s.DelayNs/2+1000 {
			t.Errorf("offset %d ns, want 2 ms within half the delay %d", s.OffsetNs, s.DelayNs)
		}
		if s.Stratum != 2 || s.RefID != "10.77.0.1" || s.RootDispNs < 100_000 || s.BoundNs < s.RootDispNs+s.DelayNs/2 {
			t.Errorf("sample %+v", s)
		}
	}
	out.Reset()
	if err := runNTPQuery([]string{"-n", "1", addr}, &out, &errb); err != nil || !strings.Contains(out.String(), "ahead of") {
		t.Errorf("text output %q, %v", out.String(), err)
	}
	for _, args := range [][]string{{}, {"-n", "0", addr}, {"a", "b"}, {"-timeout", "0s", addr}} {
		if err := runNTPQuery(args, &out, &errb); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if ss := refIDString(ntp.Packet{Stratum: 1, RefID: ntp.RefIDString("GCLK")}); ss != "GCLK" {
		t.Errorf("refid %q", ss)
	}
}
