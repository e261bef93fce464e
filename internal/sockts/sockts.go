//go:build linux

// Package sockts reads the kernel's socket timestamps out of the control
// data (oob) of recvmsg: the receive stamps of SO_TIMESTAMPING
// (SCM_TIMESTAMPING, three struct timespec) and SO_TIMESTAMPNS
// (SCM_TIMESTAMPNS), and the transmit stamps read back from MSG_ERRQUEUE,
// where the stamp comes with a sock_extended_err of origin
// SO_EE_ORIGIN_TIMESTAMPING whose data is the SOF_TIMESTAMPING_OPT_ID key
// of the datagram.
//
// Parse is the one entry point for most uses:
//
//	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
//	st, err := sockts.Parse(oob[:oobn])
//	if err == nil && st.Software != 0 { ... } // CLOCK_REALTIME ns
//
// It does not allocate unless the control data is malformed, so the lab's
// switch can call it per frame. Every error wraps ErrMalformed.
package sockts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// ErrMalformed is wrapped by every error of the package: the control data
// is not what the kernel writes.
var ErrMalformed = errors.New("malformed socket control message")

// Stamps are the timestamps found in one message's control data. A zero
// stamp means none: the kernel leaves a stamp it did not take zero.
type Stamps struct {
	// Software is SCM_TIMESTAMPING's software stamp (its first timespec),
	// CLOCK_REALTIME ns.
	Software int64
	// Hardware is SCM_TIMESTAMPING's raw hardware stamp (its third
	// timespec), on the NIC's clock.
	Hardware int64
	// NS is SO_TIMESTAMPNS's stamp (SCM_TIMESTAMPNS), CLOCK_REALTIME ns.
	NS int64
	// TxKey is the SOF_TIMESTAMPING_OPT_ID key of a transmit (SCM_TSTAMP_SND)
	// stamp from the error queue; HasTxKey says whether there was one.
	TxKey    uint32
	HasTxKey bool
}

// Layout of the control data on 64-bit Linux.
const (
	hdrLen      = 16 // struct cmsghdr: size_t len, int level, int type
	align       = 8  // CMSG_ALIGN
	timespecLen = 16 // struct timespec: two 64-bit words
	extErrLen   = 16 // struct sock_extended_err
)

// Timespec decodes a native struct timespec from the start of b into ns.
// It fails when b is shorter than a timespec or the value is not a time the
// kernel writes (nanoseconds outside [0, 1e9), or ns beyond int64).
func Timespec(b []byte) (int64, error) {
	if len(b) < timespecLen {
		return 0, fmt.Errorf("sockts: timespec: %d bytes, want %d: %w", len(b), timespecLen, ErrMalformed)
	}
	sec := int64(binary.NativeEndian.Uint64(b[0:8]))
	nsec := int64(binary.NativeEndian.Uint64(b[8:16]))
	if nsec < 0 || nsec >= 1e9 || sec < 0 || sec > (math.MaxInt64-nsec)/1e9 {
		return 0, fmt.Errorf("sockts: timespec {%d s, %d ns} is not a valid time: %w", sec, nsec, ErrMalformed)
	}
	return sec*1e9 + nsec, nil
}

// Parse returns the stamps in oob. When a kind of stamp appears more than
// once, the first nonzero one counts. A malformed header, a stamp message
// too short for its timespec, an invalid timespec or a short extended error
// gives an error; Stamps then holds what was found before, which a caller
// should not trust.
func Parse(oob []byte) (Stamps, error) {
	var st Stamps
	var first error
	// Fewer than hdrLen trailing bytes are padding, not an error (as for
	// unix.ParseSocketControlMessage).
	for off := 0; len(oob)-off >= hdrLen; {
		b := oob[off:]
		l := binary.NativeEndian.Uint64(b[0:8])
		if l < hdrLen || l > uint64(len(b)) {
			return st, fmt.Errorf("sockts: control message at byte %d: length %d outside [%d, %d]: %w", off, l, hdrLen, len(b), ErrMalformed)
		}
		level, typ := int32(binary.NativeEndian.Uint32(b[8:12])), int32(binary.NativeEndian.Uint32(b[12:16]))
		if err := st.add(level, typ, b[hdrLen:l]); err != nil && first == nil {
			first = fmt.Errorf("sockts: control message at byte %d: %w", off, err)
		}
		next := (l + align - 1) &^ (align - 1) // CMSG_ALIGN
		if next >= uint64(len(b)) {
			break
		}
		off += int(next)
	}
	return st, first
}

// add records one control message.
func (st *Stamps) add(level, typ int32, data []byte) error {
	switch {
	case level == unix.SOL_SOCKET && typ == unix.SCM_TIMESTAMPING:
		sw, err := Timespec(data)
		if err != nil {
			return fmt.Errorf("SCM_TIMESTAMPING: %w", err)
		}
		if st.Software == 0 {
			st.Software = sw
		}
		if len(data) >= 3*timespecLen {
			hw, err := Timespec(data[2*timespecLen:])
			if err != nil {
				return fmt.Errorf("SCM_TIMESTAMPING hardware stamp: %w", err)
			}
			if st.Hardware == 0 {
				st.Hardware = hw
			}
		}
	case level == unix.SOL_SOCKET && typ == unix.SCM_TIMESTAMPNS:
		ns, err := Timespec(data)
		if err != nil {
			return fmt.Errorf("SCM_TIMESTAMPNS: %w", err)
		}
		if st.NS == 0 {
			st.NS = ns
		}
	case (level == unix.SOL_IP && typ == unix.IP_RECVERR) || (level == unix.SOL_IPV6 && typ == unix.IPV6_RECVERR):
		if len(data) < extErrLen {
			return fmt.Errorf("sock_extended_err: %d bytes, want %d: %w", len(data), extErrLen, ErrMalformed)
		}
		// struct sock_extended_err: u32 errno; u8 origin, type, code, pad; u32 info, data.
		origin, info, key := data[4], binary.NativeEndian.Uint32(data[8:12]), binary.NativeEndian.Uint32(data[12:16])
		if origin == unix.SO_EE_ORIGIN_TIMESTAMPING && info == unix.SCM_TSTAMP_SND && !st.HasTxKey {
			st.TxKey, st.HasTxKey = key, true
		}
	}
	return nil
}
