package tracegen

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// TruthMagic opens a truth file.
const TruthMagic = "GCLKTRU1"

// maxTruth bounds the event count a truth file may claim (2^32 events, 32
// GiB of truth) so that a corrupt count cannot make ReadTruth allocate
// without limit: the slice grows as data actually arrives.
const maxTruth = 1 << 32

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadTruth is wrapped by every ReadTruth error about the content.
var ErrBadTruth = errors.New("bad truth file")

// WriteTruth writes the truth of one process: "GCLKTRU1", u32 proc, u64
// count, count int64 true global times, and the CRC-32C of all of it.
func WriteTruth(w io.Writer, proc uint32, truth []int64) error {
	bw := bufio.NewWriter(w)
	h := crc32.New(castagnoli)
	mw := io.MultiWriter(bw, h)
	var b [12]byte
	binary.LittleEndian.PutUint32(b[0:], proc)
	binary.LittleEndian.PutUint64(b[4:], uint64(len(truth)))
	if _, err := io.WriteString(mw, TruthMagic); err != nil {
		return fmt.Errorf("write truth: %w", err)
	}
	if _, err := mw.Write(b[:]); err != nil {
		return fmt.Errorf("write truth: %w", err)
	}
	var v [8]byte
	for _, t := range truth {
		binary.LittleEndian.PutUint64(v[:], uint64(t))
		if _, err := mw.Write(v[:]); err != nil {
			return fmt.Errorf("write truth: %w", err)
		}
	}
	binary.LittleEndian.PutUint32(b[:4], h.Sum32())
	if _, err := bw.Write(b[:4]); err != nil {
		return fmt.Errorf("write truth: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write truth: %w", err)
	}
	return nil
}

// ReadTruth reads a truth file written by WriteTruth; name is used in
// errors.
func ReadTruth(r io.Reader, name string) (uint32, []int64, error) {
	br := bufio.NewReader(r)
	h := crc32.New(castagnoli)
	tr := io.TeeReader(br, h)
	var head [8 + 12]byte
	if _, err := io.ReadFull(tr, head[:]); err != nil {
		return 0, nil, fmt.Errorf("%s: offset 0: truth header: %w: %w", name, ErrBadTruth, err)
	}
	if string(head[:8]) != TruthMagic {
		return 0, nil, fmt.Errorf("%s: offset 0: magic %q, want %q: %w", name, head[:8], TruthMagic, ErrBadTruth)
	}
	proc := binary.LittleEndian.Uint32(head[8:])
	n := binary.LittleEndian.Uint64(head[12:])
	if n > maxTruth {
		return 0, nil, fmt.Errorf("%s: offset 12: count %d exceeds %d: %w", name, n, uint64(maxTruth), ErrBadTruth)
	}
	out := make([]int64, 0, min(n, 1<<16))
	var v [8]byte
	for i := uint64(0); i < n; i++ {
		if _, err := io.ReadFull(tr, v[:]); err != nil {
			return 0, nil, fmt.Errorf("%s: offset %d: truth %d of %d: %w: %w", name, 20+8*i, i, n, ErrBadTruth, err)
		}
		out = append(out, int64(binary.LittleEndian.Uint64(v[:])))
	}
	sum := h.Sum32()
	var c [4]byte
	if _, err := io.ReadFull(br, c[:]); err != nil {
		return 0, nil, fmt.Errorf("%s: offset %d: checksum: %w: %w", name, 20+8*n, ErrBadTruth, err)
	}
	if got := binary.LittleEndian.Uint32(c[:]); got != sum {
		return 0, nil, fmt.Errorf("%s: offset %d: checksum %#08x, computed %#08x: %w", name, 20+8*n, got, sum, ErrBadTruth)
	}
	return proc, out, nil
}
