package transport

import "testing"

// TestBestStamps: the kernel's stamp wins when there is one, else the
// user-space one.
func TestBestStamps(t *testing.T) {
	tests := []struct {
		name string
		in   Incoming
		tm   Timing
		recv int64 // Incoming.RecvStamp
		send int64 // Timing.SendStamp
	}{
		{"user stamps", Incoming{RecvUser: 50}, Timing{SendUser: 100, RecvUser: 900}, 50, 100},
		{"kernel stamps preferred", Incoming{RecvUser: 50, RecvKernel: 40}, Timing{SendUser: 100, SendKernel: 110, RecvUser: 900, RecvKernel: 880}, 40, 110},
		{"send kernel stamp only", Incoming{RecvUser: 50}, Timing{SendUser: 100, SendKernel: 110, RecvUser: 900}, 50, 110},
	}
	for _, tt := range tests {
		if got := tt.in.RecvStamp(); got != tt.recv {
			t.Errorf("%s: Incoming.RecvStamp = %d, want %d", tt.name, got, tt.recv)
		}
		if got := tt.tm.SendStamp(); got != tt.send {
			t.Errorf("%s: Timing.SendStamp = %d, want %d", tt.name, got, tt.send)
		}
	}
}
