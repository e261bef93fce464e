package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/gclock/gclock/bench/transportbench"
)

func TestBenchTransportJSON(t *testing.T) {
	var out, errb bytes.Buffer
	err := benchTransport([]string{"-requests", "50", "-repeat", "1", "-loss", "0,5", "-rtt-probes", "20", "-rtt-interval", "0", "-min-rto", "5ms", "-json"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v (%s)", err, errb.String())
	}
	var rep transportbench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out.String())
	}
	if len(rep.Rows) != 4 {
		t.Fatalf("%d rows, want 4 (2 modes x 2 loss rates)", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if r.Failed != 0 || r.Requests != 50 {
			t.Errorf("%s at %v%%: %d done, %d failed", r.Mode, r.LossPct, r.Requests, r.Failed)
		}
		// Messages per request: 2 with ACK omission, 4 with an ACK per
		// message, plus retransmissions and (under loss) their ACKs.
		lo := 2.0
		if r.Mode == "ack-per-message" {
			lo = 4.0
		}
		if r.MessagesPerReq < lo || r.MessagesPerReq > lo*1.5 {
			t.Errorf("%s at %v%%: %.2f messages per request", r.Mode, r.LossPct, r.MessagesPerReq)
		}
		if r.Mode == "ack-omission" && r.Acks != 0 {
			t.Errorf("ack omission sent %d ACKs for requests and replies", r.Acks)
		}
	}
	if rep.RTT == nil || rep.RTT.Kernel.N == 0 || rep.RTT.Kernel.Min <= 0 || rep.RTT.User.Min < rep.RTT.Kernel.Min {
		t.Errorf("rtt %+v: want kernel stamps, kernel min below user min", rep.RTT)
	}
}

func TestBenchTransportFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-loss", "x"}, "-loss"},
		{[]string{"-loss", "100"}, "-loss"},
		{[]string{"-repeat", "0"}, "-repeat"},
		{[]string{"-dup", "-1"}, "-dup"},
		{[]string{"-serve", "127.0.0.1:0", "-peer", "127.0.0.1:1"}, "exclude"},
		{[]string{"-peer", "nowhere"}, "-peer"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"-requests", "0", "-loss", "0", "-rtt-probes", "0"}, "Requests"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		err := benchTransport(tt.args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tt.args, err, tt.want)
		}
	}
	var out, errb bytes.Buffer
	if err := benchTransport([]string{"-h"}, &out, &errb); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errb.String(), "-serve") {
		t.Errorf("-h: %v, usage %q", err, errb.String())
	}
}

func TestLabBenchTransportFlags(t *testing.T) {
	// Bad flags are refused before any lab is built (no root needed).
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-loss", "1,x"}, `"x" is not a percentage`},
		{[]string{"-loss", "100"}, `"100" is not a percentage`},
		{[]string{"-loss", "-1"}, `"-1" is not a percentage`},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-frag-time", "-1s"}, "-frag-time -1s"},
		{[]string{"-nope"}, "flag provided but not defined"},
	} {
		var out, errb bytes.Buffer
		err := runLabBenchTransport(tt.args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one containing %q", tt.args, err, tt.want)
		}
	}
}
