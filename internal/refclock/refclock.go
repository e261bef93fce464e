package refclock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"unsafe"
)

// Magic is SOCK_MAGIC.
const Magic = 0x534f434b

// Leap second announcements (sample.leap).
const (
	LeapNone   = 0
	LeapInsert = 1
	LeapDelete = 2
)

// longSize is sizeof(long) in C on this platform (Linux: the word size).
const longSize = int(unsafe.Sizeof(uintptr(0)))

// Size is sizeof(struct sock_sample) on this platform.
const Size = 2*longSize + 8 + 4*4

// Sample is one sock_sample.
type Sample struct {
	// Time is the CLOCK_REALTIME reading (ns since the Unix epoch) the
	// offset applies to. The wire carries microseconds: Marshal truncates,
	// which moves the instant by less than 1 us and the offset by the
	// clock's rate error over it (below a picosecond).
	Time int64
	// Offset is true time minus CLOCK_REALTIME at Time, in seconds.
	Offset float64
	Pulse  bool
	Leap   int
}

// Errors of Marshal and Parse.
var (
	ErrSize   = errors.New("refclock: not a sock_sample (size)")
	ErrMagic  = errors.New("refclock: not a sock_sample (magic)")
	ErrSample = errors.New("refclock: invalid sample")
)

// maxOffset is the largest |offset| sent: chronyd's UTI_IsTimeOffsetSane
// refuses much larger ones anyway; a bigger value is a bug upstream.
const maxOffset = 1e6

// MarshalBinary encodes the sample as chronyd reads it.
func (s Sample) MarshalBinary() ([]byte, error) {
	b := make([]byte, Size)
	return b, s.MarshalTo(b)
}

// MarshalTo encodes the sample into b (at least Size bytes).
func (s Sample) MarshalTo(b []byte) error {
	if len(b) < Size {
		return fmt.Errorf("%w: buffer of %d bytes, want %d", ErrSize, len(b), Size)
	}
	if math.IsNaN(s.Offset) || math.IsInf(s.Offset, 0) || math.Abs(s.Offset) > maxOffset {
		return fmt.Errorf("%w: offset %v s", ErrSample, s.Offset)
	}
	if s.Leap < LeapNone || s.Leap > LeapDelete {
		return fmt.Errorf("%w: leap %d (0, 1 or 2)", ErrSample, s.Leap)
	}
	if s.Time < 0 {
		return fmt.Errorf("%w: time %d ns before 1970", ErrSample, s.Time)
	}
	sec, usec := s.Time/1e9, s.Time%1e9/1e3
	if longSize == 4 && sec > math.MaxInt32 {
		return fmt.Errorf("%w: time %d s does not fit a 32-bit time_t", ErrSample, sec)
	}
	ne := binary.NativeEndian
	putLong(b[0:], sec)
	putLong(b[longSize:], usec)
	o := 2 * longSize
	ne.PutUint64(b[o:], math.Float64bits(s.Offset))
	pulse := uint32(0)
	if s.Pulse {
		pulse = 1
	}
	ne.PutUint32(b[o+8:], pulse)
	ne.PutUint32(b[o+12:], uint32(s.Leap))
	ne.PutUint32(b[o+16:], 0)
	ne.PutUint32(b[o+20:], Magic)
	return nil
}

func putLong(b []byte, v int64) {
	if longSize == 8 {
		binary.NativeEndian.PutUint64(b, uint64(v))
	} else {
		binary.NativeEndian.PutUint32(b, uint32(v))
	}
}

func getLong(b []byte) int64 {
	if longSize == 8 {
		return int64(binary.NativeEndian.Uint64(b))
	}
	return int64(int32(binary.NativeEndian.Uint32(b)))
}

// Parse decodes a datagram as chronyd does: exactly Size bytes and the
// magic, then a sane time and offset.
func Parse(b []byte) (Sample, error) {
	if len(b) != Size {
		return Sample{}, fmt.Errorf("%w: %d bytes, want %d", ErrSize, len(b), Size)
	}
	ne := binary.NativeEndian
	o := 2 * longSize
	if m := ne.Uint32(b[o+20:]); m != Magic {
		return Sample{}, fmt.Errorf("%w: %#x, want %#x", ErrMagic, m, Magic)
	}
	sec, usec := getLong(b), getLong(b[longSize:])
	off := math.Float64frombits(ne.Uint64(b[o:]))
	leap := int(int32(ne.Uint32(b[o+12:])))
	switch {
	case sec < 0 || sec > math.MaxInt64/1_000_000_000-1:
		return Sample{}, fmt.Errorf("%w: tv_sec %d", ErrSample, sec)
	case usec < 0 || usec >= 1e6:
		return Sample{}, fmt.Errorf("%w: tv_usec %d", ErrSample, usec)
	case math.IsNaN(off) || math.IsInf(off, 0) || math.Abs(off) > maxOffset:
		return Sample{}, fmt.Errorf("%w: offset %v s", ErrSample, off)
	case leap < LeapNone || leap > LeapDelete:
		return Sample{}, fmt.Errorf("%w: leap %d", ErrSample, leap)
	}
	return Sample{Time: sec*1e9 + usec*1e3, Offset: off, Pulse: ne.Uint32(b[o+8:]) != 0, Leap: leap}, nil
}

// Sender sends samples to chronyd's socket. It (re)connects on demand, so
// chronyd may start after the daemon and restart under it: while the
// socket is missing Send returns an error and the caller tries again at
// its next sample. Safe for concurrent use.
type Sender struct {
	path string
	mu   sync.Mutex
	c    *net.UnixConn
	buf  [Size]byte
}

// NewSender sends to the socket at path (chrony's refclock SOCK path).
func NewSender(path string) *Sender { return &Sender{path: path} }

// Send writes one sample.
func (s *Sender) Send(smp Sample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := smp.MarshalTo(s.buf[:]); err != nil {
		return err
	}
	if s.c == nil {
		c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.path, Net: "unixgram"})
		if err != nil {
			return fmt.Errorf("refclock: %s: %w", s.path, err)
		}
		s.c = c
	}
	if _, err := s.c.Write(s.buf[:]); err != nil {
		// chronyd restarted (a new socket at the path) or stopped: redial
		// next time.
		s.c.Close()
		s.c = nil
		return fmt.Errorf("refclock: %s: %w", s.path, err)
	}
	return nil
}

// Close releases the connection.
func (s *Sender) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil {
		return nil
	}
	err := s.c.Close()
	s.c = nil
	return err
}

// String is the sample as chronyd would log it.
func (s Sample) String() string {
	return strconv.FormatInt(s.Time/1e9, 10) + "." + fmt.Sprintf("%06d", s.Time%1e9/1e3) +
		" offset " + strconv.FormatFloat(s.Offset, 'e', 9, 64)
}
