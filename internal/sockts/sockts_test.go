//go:build linux

package sockts

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"golang.org/x/sys/unix"
)

// cmsg builds one control message as the kernel lays it out.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	binary.NativeEndian.PutUint64(b[0:], uint64(unix.CmsgLen(len(data))))
	binary.NativeEndian.PutUint32(b[8:], uint32(level))
	binary.NativeEndian.PutUint32(b[12:], uint32(typ))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

// timespecs lays out n struct timespec, the i-th at sec[i] s + nsec[i] ns.
func timespecs(v ...[2]int64) []byte {
	b := make([]byte, 16*len(v))
	for i, t := range v {
		binary.NativeEndian.PutUint64(b[16*i:], uint64(t[0]))
		binary.NativeEndian.PutUint64(b[16*i+8:], uint64(t[1]))
	}
	return b
}

// extErr is a struct sock_extended_err.
func extErr(origin uint8, info, key uint32) []byte {
	ee := make([]byte, 16)
	ee[4] = origin
	binary.NativeEndian.PutUint32(ee[8:], info)
	binary.NativeEndian.PutUint32(ee[12:], key)
	return ee
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func TestParse(t *testing.T) {
	rx := cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, timespecs([2]int64{1700000000, 123456789}, [2]int64{}, [2]int64{}))
	hw := cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, timespecs([2]int64{2, 5}, [2]int64{}, [2]int64{3, 7}))
	ns := cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, timespecs([2]int64{2, 7}))
	snd := cmsg(unix.SOL_IP, unix.IP_RECVERR, extErr(unix.SO_EE_ORIGIN_TIMESTAMPING, unix.SCM_TSTAMP_SND, 41))
	snd6 := cmsg(unix.SOL_IPV6, unix.IPV6_RECVERR, extErr(unix.SO_EE_ORIGIN_TIMESTAMPING, unix.SCM_TSTAMP_SND, 42))
	sched := cmsg(unix.SOL_IP, unix.IP_RECVERR, extErr(unix.SO_EE_ORIGIN_TIMESTAMPING, unix.SCM_TSTAMP_SCHED, 3))
	icmp := cmsg(unix.SOL_IP, unix.IP_RECVERR, extErr(unix.SO_EE_ORIGIN_ICMP, 0, 1))
	ttl := cmsg(unix.SOL_IP, unix.IP_TTL, []byte{64, 0, 0, 0})
	bad := func(oob []byte, at int, v uint64) []byte {
		oob = append([]byte(nil), oob...)
		binary.NativeEndian.PutUint64(oob[at:], v)
		return oob
	}
	tests := []struct {
		name string
		oob  []byte
		want Stamps
		err  bool
	}{
		{"empty", nil, Stamps{}, false},
		{"receive stamp", rx, Stamps{Software: 1700000000123456789}, false},
		{"after another message", cat(ttl, rx), Stamps{Software: 1700000000123456789}, false},
		{"hardware stamp", hw, Stamps{Software: 2_000_000_005, Hardware: 3_000_000_007}, false},
		{"software only (16 bytes)", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, timespecs([2]int64{1, 1})), Stamps{Software: 1_000_000_001}, false},
		{"SO_TIMESTAMPNS", ns, Stamps{NS: 2_000_000_007}, false},
		{"zero stamp is none", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, make([]byte, 48)), Stamps{}, false},
		{"first nonzero counts", cat(cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, make([]byte, 48)), rx, hw), Stamps{Software: 1700000000123456789, Hardware: 3_000_000_007}, false},
		{"tx stamp and key", cat(hw, snd), Stamps{Software: 2_000_000_005, Hardware: 3_000_000_007, TxKey: 41, HasTxKey: true}, false},
		{"key first", cat(snd, rx), Stamps{Software: 1700000000123456789, TxKey: 41, HasTxKey: true}, false},
		{"IPv6 key", snd6, Stamps{TxKey: 42, HasTxKey: true}, false},
		{"sched stamp is not a send stamp", cat(rx, sched), Stamps{Software: 1700000000123456789}, false},
		{"ICMP error is not a stamp", icmp, Stamps{}, false},
		{"trailing padding", cat(rx, []byte{1, 2, 3}), Stamps{Software: 1700000000123456789}, false},
		{"truncated header only", []byte{1, 2, 3}, Stamps{}, false},
		{"short stamp", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, make([]byte, 8)), Stamps{}, true},
		{"short SO_TIMESTAMPNS", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, make([]byte, 15)), Stamps{}, true},
		{"short extended error", cmsg(unix.SOL_IP, unix.IP_RECVERR, make([]byte, 8)), Stamps{}, true},
		{"nanoseconds out of range", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, timespecs([2]int64{1, 1e9})), Stamps{}, true},
		{"negative seconds", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, timespecs([2]int64{-1, 0})), Stamps{}, true},
		{"seconds overflow", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, timespecs([2]int64{math.MaxInt64 / 1_000_000_000, 999999999})), Stamps{}, true},
		{"largest time", cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, timespecs([2]int64{math.MaxInt64 / 1_000_000_000, 854775807})), Stamps{NS: math.MaxInt64}, false},
		{"length below header", bad(rx, 0, 15), Stamps{}, true},
		{"length zero", bad(rx, 0, 0), Stamps{}, true},
		{"length past the end", bad(rx, 0, uint64(len(rx)+1)), Stamps{}, true},
		{"huge length", bad(rx, 0, math.MaxUint64), Stamps{}, true},
		{"second header malformed", cat(rx, bad(ns, 0, 1000)), Stamps{Software: 1700000000123456789}, true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.oob)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("%s: Parse = %+v, %v; want %+v, error %v", tt.name, got, err, tt.want, tt.err)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error %v does not wrap ErrMalformed", tt.name, err)
		}
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	oob := cat(cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, timespecs([2]int64{2, 7})),
		cmsg(unix.SOL_IP, unix.IP_RECVERR, extErr(unix.SO_EE_ORIGIN_TIMESTAMPING, unix.SCM_TSTAMP_SND, 1)))
	if n := testing.AllocsPerRun(100, func() { _, _ = Parse(oob) }); n != 0 {
		t.Fatalf("Parse allocates %.0f times per call, want 0", n)
	}
}

// FuzzParse feeds arbitrary bytes to Parse: it must not panic, must agree
// with unix.ParseSocketControlMessage on which buffers are well formed, and
// must report every stamp that message list holds.
func FuzzParse(f *testing.F) {
	f.Add(cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, timespecs([2]int64{5, 0}, [2]int64{}, [2]int64{6, 1})))
	f.Add(cat(cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPING, timespecs([2]int64{2, 5})), cmsg(unix.SOL_IP, unix.IP_RECVERR, extErr(unix.SO_EE_ORIGIN_TIMESTAMPING, unix.SCM_TSTAMP_SND, 9))))
	f.Add(cmsg(unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS, timespecs([2]int64{2, 7})))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 0, 0, 0, 37, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Parse(b)
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		msgs, uerr := unix.ParseSocketControlMessage(b)
		if uerr != nil {
			if err == nil {
				t.Fatalf("unix.ParseSocketControlMessage fails (%v), Parse does not", uerr)
			}
			return
		}
		if err != nil {
			return // a short or invalid stamp inside well-formed headers
		}
		var want Stamps
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPING && want.Software == 0 {
				want.Software, _ = Timespec(m.Data)
			}
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && want.NS == 0 {
				want.NS, _ = Timespec(m.Data)
			}
		}
		if st.Software != want.Software || st.NS != want.NS {
			t.Fatalf("Parse = %+v, the unix message list holds software %d, ns %d", st, want.Software, want.NS)
		}
	})
}
