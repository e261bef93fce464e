package netlab

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gclock/gclock/wire"
)

// udpFrame builds an Ethernet frame carrying an IPv4 UDP datagram to port
// dport with payload.
func udpFrame(ihl int, proto byte, dport uint16, payload []byte) []byte {
	f := make([]byte, 14+ihl+8+len(payload))
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x40 | byte(ihl/4)
	ip[9] = proto
	udp := ip[ihl:]
	binary.BigEndian.PutUint16(udp[2:], dport)
	copy(udp[8:], payload)
	return f
}

func TestParseGclockFrame(t *testing.T) {
	hdr := make([]byte, wire.HeaderLen)
	binary.BigEndian.PutUint16(hdr, wire.Magic)
	hdr[3] = byte(wire.OpProbe)
	binary.BigEndian.PutUint32(hdr[4:], 7)
	binary.BigEndian.PutUint32(hdr[8:], 123456)
	arp := make([]byte, 60)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	tests := []struct {
		name        string
		frame       []byte
		op          uint8
		sender, seq uint32
		dport       uint16
	}{
		{"probe", udpFrame(20, 17, 3190, hdr), uint8(wire.OpProbe), 7, 123456, 3190},
		{"probe behind IP options", udpFrame(24, 17, 3190, hdr), uint8(wire.OpProbe), 7, 123456, 3190},
		{"chrony's NTP", udpFrame(20, 17, 123, make([]byte, 48)), 0, 0, 0, 123},
		{"short gclock header", udpFrame(20, 17, 3190, hdr[:10]), 0, 0, 0, 3190},
		{"TCP", udpFrame(20, 6, 3190, hdr), 0, 0, 0, 0},
		{"ARP", arp, 0, 0, 0, 0},
		{"runt", make([]byte, 20), 0, 0, 0, 0},
		{"bad IHL", udpFrame(20, 17, 3190, hdr)[:14+20+4], 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op, sender, seq, dport := parseGclockFrame(tt.frame)
			if op != tt.op || sender != tt.sender || seq != tt.seq || dport != tt.dport {
				t.Errorf("got op %d sender %d seq %d dport %d, want %d %d %d %d", op, sender, seq, dport, tt.op, tt.sender, tt.seq, tt.dport)
			}
		})
	}
}

func FuzzParseGclockFrame(f *testing.F) {
	hdr := make([]byte, wire.HeaderLen)
	binary.BigEndian.PutUint16(hdr, wire.Magic)
	f.Add(udpFrame(20, 17, 3190, hdr))
	f.Add(udpFrame(60, 17, 1, nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		parseGclockFrame(b) // must not panic on any frame
	})
}

// TestFrameLogFile: the records come out as CSV after the offsets line.
func TestFrameLogFile(t *testing.T) {
	var fl frameLog
	fl.start()
	buf := append(make([]byte, vnetHdrLen), udpFrame(20, 17, 3190, func() []byte {
		h := make([]byte, wire.HeaderLen)
		binary.BigEndian.PutUint16(h, wire.Magic)
		h[3] = byte(wire.OpProbeReply)
		binary.BigEndian.PutUint32(h[8:], 9)
		return h
	}())...)
	fl.add(release{at: 2000, rx: 1000, dir: [2]int{2, 0}}, buf, 2100, 2300)
	path := filepath.Join(t.TempDir(), "frames.csv")
	if err := fl.writeFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "# wall_minus_raw_ns start ") {
		t.Fatalf("file:\n%s", b)
	}
	if want := "2,0,1000,2000,2100,2300,2,0,9,3190"; lines[2] != want {
		t.Errorf("record %q, want %q", lines[2], want)
	}
}
