package netlab

import (
	"encoding/binary"
	"testing"

	"github.com/gclock/gclock/netmodel"
)

// vnetFrame builds a frame as the switch reads it: a vnet header (GSO type
// and segment size) and an Ethernet frame of total length n whose IPv4 or
// IPv6 header carries proto with a TCP header of tcpLen bytes.
func vnetFrame(gsoType byte, gsoSize uint16, ipv6 bool, proto byte, tcpLen, n int) []byte {
	b := make([]byte, vnetHdrLen+n)
	b[1] = gsoType
	binary.NativeEndian.PutUint16(b[4:6], gsoSize)
	f := b[vnetHdrLen:]
	l4 := 14 + 20
	if ipv6 {
		binary.BigEndian.PutUint16(f[12:14], 0x86dd)
		f[14+6] = proto
		l4 = 14 + 40
	} else {
		binary.BigEndian.PutUint16(f[12:14], 0x0800)
		f[14] = 0x45
		f[14+9] = proto
	}
	if proto == 6 && len(f) > l4+12 {
		f[l4+12] = byte(tcpLen/4) << 4
	}
	return b
}

func TestFrameWireBytes(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want int
	}{
		{"udp probe", vnetFrame(0, 0, false, 17, 0, 90), netmodel.WireBytes(90)},
		{"arp runt", vnetFrame(0, 0, false, 0, 0, 42), 84},
		{"tcp gso v4, 3 segments", vnetFrame(1, 1448, false, 6, 32, 66+3*1448), 3 * 1538},
		{"tcp gso v4, 2.5 segments", vnetFrame(1|0x80, 1448, false, 6, 32, 66+2*1448+724), 2*1538 + 66 + 724 + 24},
		{"tcp gso v6", vnetFrame(4, 1428, true, 6, 32, 86+2*1428), 2 * (86 + 1428 + 24)},
		{"udp gso", vnetFrame(5, 1472, false, 17, 0, 42+4*1472), 4 * 1538},
		{"gso of an unknown protocol: one frame", vnetFrame(1, 1448, false, 47, 0, 3000), 3024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := frameWireBytes(tt.b); got != tt.want {
				t.Fatalf("frameWireBytes = %d, want %d", got, tt.want)
			}
		})
	}
}

// FuzzFrameWireBytes: any frame the switch may read (at least a vnet
// header and an Ethernet header) has a wire size at least its own, and no
// frame makes the parser read out of bounds.
func FuzzFrameWireBytes(f *testing.F) {
	f.Add(vnetFrame(1, 1448, false, 6, 32, 66+3*1448))
	f.Add(vnetFrame(4, 1428, true, 6, 32, 200))
	f.Add(vnetFrame(5, 1, false, 17, 0, 60))
	f.Add(make([]byte, vnetHdrLen+14))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < vnetHdrLen+14 {
			return
		}
		got := frameWireBytes(b)
		if got < netmodel.WireBytes(len(b)-vnetHdrLen) {
			t.Fatalf("wire bytes %d below the frame's own %d", got, netmodel.WireBytes(len(b)-vnetHdrLen))
		}
	})
}
