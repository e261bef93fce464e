package transport

import "testing"

// TestBestStamps: the kernel's stamp wins when there is one, else the
// user-space one.
func TestBestStamps(t *testing.T) {
	tests := []struct {
		name       string
		in         Incoming
		tm         Timing
		recv       int64 // Incoming.RecvStamp
		send, back int64 // Timing.SendStamp, Timing.RecvStamp
	}{
		{"user stamps", Incoming{RecvUser: 50}, Timing{SendUser: 100, RecvUser: 900}, 50, 100, 900},
		{"kernel stamps preferred", Incoming{RecvUser: 50, RecvKernel: 40}, Timing{SendUser: 100, SendKernel: 110, RecvUser: 900, RecvKernel: 880}, 40, 110, 880},
		{"send kernel stamp only", Incoming{RecvUser: 50}, Timing{SendUser: 100, SendKernel: 110, RecvUser: 900}, 50, 110, 900},
	}
	for _, tt := range tests {
		if got := tt.in.RecvStamp(); got != tt.recv {
			t.Errorf("%s: Incoming.RecvStamp = %d, want %d", tt.name, got, tt.recv)
		}
		if got := tt.tm.SendStamp(); got != tt.send {
			t.Errorf("%s: Timing.SendStamp = %d, want %d", tt.name, got, tt.send)
		}
		if got := tt.tm.RecvStamp(); got != tt.back {
			t.Errorf("%s: Timing.RecvStamp = %d, want %d", tt.name, got, tt.back)
		}
	}
}
