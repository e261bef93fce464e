// Package clockbound writes AWS ClockBound's shared-memory segment,
// protocol version 2 (clock-bound's docs/PROTOCOL.md), so that programs
// linked with ClockBound's client libraries (YugabyteDB, others) read the
// bound gclock serves on CLOCK_REALTIME unchanged.
//
// The segment is 80 bytes in the CPU's native byte order (little-endian
// on x86-64 and arm64):
//
//	 0  magic             8 bytes 0x41 0x4D 0x5A 0x4E 0x43 0x42 0x02 0x00
//	 8  segment size      u32 (80)
//	12  version           u16 (2)
//	14  generation        u16: odd while written, even when complete; 0 is never used again
//	16  as-of             i64 s, i64 ns: CLOCK_MONOTONIC_COARSE when the bound was computed
//	32  void-after        i64 s, i64 ns: CLOCK_MONOTONIC_COARSE after which it is not to be trusted
//	48  bound             i64 ns: |CLOCK_REALTIME - true time| at as-of, at most
//	56  disruption marker u64 (0: gclock reads no VMClock)
//	64  max drift         u32 ppb: how fast the bound may grow after as-of
//	68  clock status      i32: 0 unknown, 1 synchronized, 2 free running, 3 disrupted
//	72  disruption support u8 (0), then padding to 80
//
// A client reads the generation, copies the segment, and reads the
// generation again; it uses the copy only when both are the same and
// even, and computes the bound at a later instant t as bound + (t - as-of)
// x max drift, refusing it after void-after.
package clockbound

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Size is the segment's size in bytes (protocol version 2).
const Size = 80

// Version is the protocol version written.
const Version = 2

// magic is the segment's signature, as 8 bytes in memory.
var magic = [8]byte{0x41, 0x4D, 0x5A, 0x4E, 0x43, 0x42, 0x02, 0x00}

// Status is ClockBound's clock status.
type Status int32

// The clock statuses of the protocol.
const (
	StatusUnknown      Status = 0
	StatusSynchronized Status = 1
	StatusFreeRunning  Status = 2
	StatusDisrupted    Status = 3
)

// Bound is one update of the segment. Times are CLOCK_MONOTONIC_COARSE
// nanoseconds.
type Bound struct {
	AsOf, VoidAfter int64
	BoundNs         int64
	MaxDriftPPB     uint32
	Status          Status
}

// Writer owns one segment file, mapped shared.
type Writer struct {
	path string
	mem  []byte
	gen  uint16
}

// Create writes a fresh segment at path (status unknown, void at once):
// the file is made complete beside it and renamed over path, so that a
// client never maps a short file. Mode 0644: every user reads it.
func Create(path string) (*Writer, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("clockbound: %q: want an absolute path", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".clockbound-*")
	if err != nil {
		return nil, fmt.Errorf("clockbound: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing
	defer tmp.Close()
	init := make([]byte, Size)
	copy(init, magic[:])
	*(*uint32)(unsafe.Pointer(&init[8])) = Size
	*(*uint16)(unsafe.Pointer(&init[12])) = Version
	if _, err := tmp.Write(init); err != nil {
		return nil, fmt.Errorf("clockbound: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return nil, fmt.Errorf("clockbound: %w", err)
	}
	mem, err := unix.Mmap(int(tmp.Fd()), 0, Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("clockbound: map %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("clockbound: %w", err)
	}
	return &Writer{path: path, mem: mem}, nil
}

func (w *Writer) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&w.mem[off])) }

// setGen stores the version and generation words together (one aligned
// 32-bit word: version low, generation high, little-endian).
func (w *Writer) setGen(g uint16) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&w.mem[12])), uint32(Version)|uint32(g)<<16)
}

// Write publishes b: the generation is made odd, the fields stored, the
// generation made even (after 65535, 2: never 0).
func (w *Writer) Write(b Bound) error {
	if w.mem == nil {
		return errors.New("clockbound: writer closed")
	}
	w.gen++
	if w.gen%2 == 0 { // a fresh segment starts at 0: the first update is 1 -> 2
		w.gen++
	}
	w.setGen(w.gen)
	st := func(off int, v uint64) { atomic.StoreUint64(w.word(off), v) }
	st(16, uint64(b.AsOf/1e9))
	st(24, uint64(b.AsOf%1e9))
	st(32, uint64(b.VoidAfter/1e9))
	st(40, uint64(b.VoidAfter%1e9))
	st(48, uint64(b.BoundNs))
	st(56, 0)
	st(64, uint64(b.MaxDriftPPB)|uint64(uint32(b.Status))<<32)
	st(72, 0)
	if w.gen == 1<<16-1 {
		w.gen = 2
	} else {
		w.gen++
	}
	w.setGen(w.gen)
	return nil
}

// Close unmaps the segment; the file stays (its void-after ends it).
func (w *Writer) Close() error {
	if w.mem == nil {
		return nil
	}
	err := unix.Munmap(w.mem)
	w.mem = nil
	return err
}
