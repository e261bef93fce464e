package netlab

import (
	"encoding/binary"

	"github.com/gclock/gclock/netmodel"
	"golang.org/x/sys/unix"
)

// frameWireBytes is the wire size (netmodel.WireBytes) of a frame read with
// its vnet header: a GSO frame (TCP or UDP over IPv4 or IPv6) counts as the
// segments a NIC would send, each with its own headers.
func frameWireBytes(b []byte) int {
	frame := b[vnetHdrLen:]
	gsoType := b[1] &^ 0x80 // without VIRTIO_NET_HDR_GSO_ECN
	gsoSize := int(binary.NativeEndian.Uint16(b[4:6]))
	if gsoType == 0 || gsoSize == 0 {
		return netmodel.WireBytes(len(frame))
	}
	hdr, ok := l4HeaderEnd(frame)
	if !ok {
		return netmodel.WireBytes(len(frame))
	}
	return netmodel.SegmentedWireBytes(len(frame), hdr, gsoSize)
}

// l4HeaderEnd is the offset of the first payload byte of an IPv4 or IPv6
// TCP or UDP frame (no VLAN tag, no IPv6 extension headers).
func l4HeaderEnd(f []byte) (int, bool) {
	if len(f) < 14 {
		return 0, false
	}
	var off int
	var proto byte
	switch binary.BigEndian.Uint16(f[12:14]) {
	case 0x0800:
		if len(f) < 14+20 {
			return 0, false
		}
		off, proto = 14+int(f[14]&0x0f)*4, f[14+9]
	case 0x86dd:
		if len(f) < 14+40 {
			return 0, false
		}
		off, proto = 14+40, f[14+6]
	default:
		return 0, false
	}
	switch proto {
	case unix.IPPROTO_TCP:
		if len(f) < off+20 {
			return 0, false
		}
		return off + int(f[off+12]>>4)*4, true
	case unix.IPPROTO_UDP:
		return off + 8, len(f) >= off+8
	}
	return 0, false
}
