//go:build linux

package transport

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// cmsg builds one control message as the kernel lays it out.
func cmsg(level, typ int32, data []byte) []byte {
	h := unix.CmsgLen(len(data))
	b := make([]byte, unix.CmsgSpace(len(data)))
	binary.NativeEndian.PutUint64(b[0:], uint64(h))
	binary.NativeEndian.PutUint32(b[8:], uint32(level))
	binary.NativeEndian.PutUint32(b[12:], uint32(typ))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func TestParseTimestamping(t *testing.T) {
	ts := make([]byte, 48)
	binary.NativeEndian.PutUint64(ts[0:], 1700000000)
	binary.NativeEndian.PutUint64(ts[8:], 123456789)
	tests := []struct {
		name string
		oob  []byte
		want int64
		ok   bool
	}{
		{"software stamp", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, ts), 1700000000123456789, true},
		{"after another cmsg", append(cmsg(unix.SOL_IP, unix.IP_TTL, []byte{64, 0, 0, 0}), cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, ts)...), 1700000000123456789, true},
		{"empty", nil, 0, false},
		{"zero stamp", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, make([]byte, 48)), 0, false},
		{"short data", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, ts[:8]), 0, false},
		{"truncated header", []byte{1, 2, 3}, 0, false},
	}
	for _, tt := range tests {
		got, ok := parseTimestamping(tt.oob)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %d %v, want %d %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseTimestamping feeds arbitrary control-message bytes to the
// receive-stamp parser: it must never panic.
func FuzzParseTimestamping(f *testing.F) {
	ts := make([]byte, 48)
	binary.NativeEndian.PutUint64(ts[0:], 5)
	f.Add(cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, ts))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 0, 0, 0, 37, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		parseTimestamping(b)
	})
}

func errCmsg(origin uint8, info, key uint32) []byte {
	ee := make([]byte, 16)
	ee[4] = origin
	binary.NativeEndian.PutUint32(ee[8:], info)
	binary.NativeEndian.PutUint32(ee[12:], key)
	return cmsg(unix.SOL_IP, unix.IP_RECVERR, ee)
}

func TestParseErrQueue(t *testing.T) {
	ts := make([]byte, 48)
	binary.NativeEndian.PutUint64(ts[0:], 2)
	binary.NativeEndian.PutUint64(ts[8:], 5)
	stamp := cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, ts)
	tests := []struct {
		name string
		oob  []byte
		real int64
		key  uint32
		ok   bool
	}{
		{"stamp and key", append(append([]byte{}, stamp...), errCmsg(unix.SO_EE_ORIGIN_TIMESTAMPING, unix.SCM_TSTAMP_SND, 41)...), 2_000_000_005, 41, true},
		{"key first", append(errCmsg(unix.SO_EE_ORIGIN_TIMESTAMPING, unix.SCM_TSTAMP_SND, 7), stamp...), 2_000_000_005, 7, true},
		{"stamp only", stamp, 2_000_000_005, 0, false},
		{"not a timestamp error", append(append([]byte{}, stamp...), errCmsg(2, 0, 1)...), 2_000_000_005, 0, false},
		{"sched stamp, not send", append(append([]byte{}, stamp...), errCmsg(unix.SO_EE_ORIGIN_TIMESTAMPING, 1, 3)...), 2_000_000_005, 0, false},
		{"garbage", []byte{9, 9, 9}, 0, 0, false},
	}
	for _, tt := range tests {
		real, key, ok := parseErrQueue(tt.oob)
		if ok != tt.ok || (ok && (real != tt.real || key != tt.key)) {
			t.Errorf("%s: %d %d %v, want %d %d %v", tt.name, real, key, ok, tt.real, tt.key, tt.ok)
		}
	}
}

// FuzzParseErrQueue: arbitrary error-queue control bytes never panic.
func FuzzParseErrQueue(f *testing.F) {
	f.Add(errCmsg(unix.SO_EE_ORIGIN_TIMESTAMPING, unix.SCM_TSTAMP_SND, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseErrQueue(b)
	})
}
