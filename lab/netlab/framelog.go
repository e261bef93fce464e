package netlab

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"

	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/wire"
)

// frameRec is one released frame of the switch's frame log.
type frameRec struct {
	rx, at, start, end int64 // CLOCK_REALTIME ns: kernel arrival stamp, release time, write(2) start and end
	in, out            int8
	op                 uint8 // gclock header of a UDP datagram, 0 for other frames
	sender, seq        uint32
	udpDst             uint16
}

// frameLogCap bounds the records kept: 40 bytes each, 80 MB at most (a
// 60-s run releases about 30,000 frames).
const frameLogCap = 2 << 20

// frameLog keeps the switch's released frames in memory (the switch thread
// must not block on a file) and writes them out at the end, with the
// CLOCK_REALTIME - CLOCK_MONOTONIC_RAW offset sampled at start and end, so
// that the records can be put on the daemons' raw time base.
type frameLog struct {
	recs             []frameRec
	offStart, offEnd int64
	hwStart, hwEnd   int64
}

func (f *frameLog) start() {
	f.offStart, f.hwStart = rawclock.WallOffset()
	f.recs = make([]frameRec, 0, 1<<14)
}

// add records a frame released at start..end (buf holds the vnet header
// and the Ethernet frame).
func (f *frameLog) add(r release, buf []byte, start, end int64) {
	if len(f.recs) >= frameLogCap {
		return
	}
	rec := frameRec{rx: r.rx, at: r.at, start: start, end: end, in: int8(r.dir[0]), out: int8(r.dir[1])}
	rec.op, rec.sender, rec.seq, rec.udpDst = parseGclockFrame(buf[vnetHdrLen:])
	f.recs = append(f.recs, rec)
}

// parseGclockFrame reads the gclock header of an IPv4 UDP datagram in an
// Ethernet frame; zeros when the frame is something else.
func parseGclockFrame(eth []byte) (op uint8, sender, seq uint32, dport uint16) {
	if len(eth) < 14+20 || binary.BigEndian.Uint16(eth[12:]) != 0x0800 {
		return
	}
	ip := eth[14:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[9] != 17 || ihl < 20 || len(ip) < ihl+8 {
		return
	}
	udp := ip[ihl:]
	dport = binary.BigEndian.Uint16(udp[2:])
	b := udp[8:]
	if len(b) < wire.HeaderLen || binary.BigEndian.Uint16(b) != wire.Magic {
		return 0, 0, 0, dport
	}
	return b[3], binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:]), dport
}

// writeFile writes the log as CSV: a comment line with the wall clock's
// offset from the raw clock (wall_minus_raw_ns; files before 2026-11-27
// call it realtime_minus_raw_ns), then in,out,rx_ns,at_ns,start_ns,end_ns,op,sender,seq,dport.
func (f *frameLog) writeFile(path string) error {
	f.offEnd, f.hwEnd = rawclock.WallOffset()
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("frame log: %w", err)
	}
	w := bufio.NewWriterSize(fh, 1<<16)
	fmt.Fprintf(w, "# wall_minus_raw_ns start %d (+-%d) end %d (+-%d)\n", f.offStart, f.hwStart, f.offEnd, f.hwEnd)
	w.WriteString("in,out,rx_ns,at_ns,start_ns,end_ns,op,sender,seq,dport\n")
	var b []byte
	for _, r := range f.recs {
		b = b[:0]
		b = strconv.AppendInt(b, int64(r.in), 10)
		for _, v := range [...]int64{int64(r.out), r.rx, r.at, r.start, r.end, int64(r.op), int64(r.sender), int64(r.seq), int64(r.udpDst)} {
			b = append(b, ',')
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, '\n')
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		fh.Close()
		return fmt.Errorf("frame log %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("frame log %s: %w", path, err)
	}
	return nil
}
