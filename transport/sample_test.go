package transport

import (
	"testing"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
)

func TestProbeSample(t *testing.T) {
	reply := &engine.Message{Type: engine.MsgProbeReply, T2: 5000, T3: 5200}
	tests := []struct {
		name  string
		tm    Timing
		reply *engine.Message
		want  estimate.Sample
		ok    bool
	}{
		{"user stamps", Timing{Attempts: 1, SendUser: 100, RecvUser: 900}, reply, estimate.Sample{SrcSend: 100, LocRecv: 5000, LocSend: 5200, SrcRecv: 900}, true},
		{"kernel stamps preferred", Timing{Attempts: 1, SendUser: 100, SendKernel: 110, RecvUser: 900, RecvKernel: 880}, reply, estimate.Sample{SrcSend: 110, LocRecv: 5000, LocSend: 5200, SrcRecv: 880}, true},
		{"retried", Timing{Attempts: 2, SendUser: 100, RecvUser: 900}, reply, estimate.Sample{}, false},
		{"not a reply", Timing{Attempts: 1}, &engine.Message{Type: engine.MsgProbe}, estimate.Sample{}, false},
		{"nil reply", Timing{Attempts: 1}, nil, estimate.Sample{}, false},
		{"reversed source stamps", Timing{Attempts: 1, SendUser: 900, RecvUser: 100}, reply, estimate.Sample{}, false},
		{"reversed child stamps", Timing{Attempts: 1, SendUser: 100, RecvUser: 900}, &engine.Message{Type: engine.MsgProbeReply, T2: 9, T3: 8}, estimate.Sample{}, false},
	}
	for _, tt := range tests {
		got, ok := ProbeSample(tt.tm, tt.reply)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("%s: %+v %v, want %+v %v", tt.name, got, ok, tt.want, tt.ok)
		}
		if ok && got.RTT() != (900-100)-(5200-5000) && tt.name == "user stamps" {
			t.Errorf("%s: RTT %d", tt.name, got.RTT())
		}
	}
	in := &Incoming{RecvUser: 50}
	if in.RecvStamp() != 50 {
		t.Error("RecvStamp without kernel stamp")
	}
	in.RecvKernel = 40
	if in.RecvStamp() != 40 {
		t.Error("RecvStamp ignores the kernel stamp")
	}
}
