package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/gclock/gclock/estimate"
)

// FileMagic opens every trace file.
const FileMagic = "GCLKTRC1"

// chunkMagic is "CHNK" read as a little-endian u32.
const chunkMagic uint32 = 'C' | 'H'<<8 | 'N'<<16 | 'K'<<24

// HeaderSize is the size of a chunk header in bytes.
const HeaderSize = 24

// MaxPayload bounds a chunk's payload (16 MiB) so that a corrupt length field
// can never make a reader allocate gigabytes.
const MaxPayload = 16 << 20

// Record sizes in bytes, fixed so that a chunk's record count can be
// checked against its length before anything is allocated.
const (
	EventSize   = 32
	SampleSize  = 32
	MappingSize = 64
	MergedSize  = 48
	sessionHead = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ChunkKind says what a chunk holds.
type ChunkKind uint8

// Chunk kinds.
const (
	KindMeta     ChunkKind = iota + 1 // Meta: who wrote the file
	KindEvents                        // Event records
	KindSync                          // one Session
	KindMappings                      // DaemonMapping records
	KindNames                         // Name entries
	KindMerged                        // Merged records
)

// String names the kind.
func (k ChunkKind) String() string {
	switch k {
	case KindMeta:
		return "meta"
	case KindEvents:
		return "events"
	case KindSync:
		return "sync"
	case KindMappings:
		return "mappings"
	case KindNames:
		return "names"
	case KindMerged:
		return "merged"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Kind is the kind of a trace event.
type Kind uint8

// Event kinds.
const (
	Enter   Kind = iota + 1 // a region starts (ID = region name)
	Leave                   // the innermost open region of the track ends (ID = region name)
	Instant                 // a point event (ID = name)
	Counter                 // a counter sample (ID = name, Value = value)
	Send                    // a message left (Peer = destination, ID = message id, Value = bytes)
	Recv                    // a message arrived (Peer = sender, ID = the sender's message id, Value = bytes)
	maxKind = Recv
)

// String names the event kind.
func (k Kind) String() string {
	switch k {
	case Enter:
		return "enter"
	case Leave:
		return "leave"
	case Instant:
		return "instant"
	case Counter:
		return "counter"
	case Send:
		return "send"
	case Recv:
		return "recv"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one recorded event, stamped with the recording process's local
// clock.
type Event struct {
	Time  int64  // local clock, ns
	ID    uint64 // name id (Enter, Leave, Instant, Counter) or message id (Send, Recv)
	Value int64  // counter value, or message size in bytes; on Enter and Leave free for the recorder
	Peer  uint32 // the other process of a message; on Enter and Leave free for the recorder
	Track uint16 // the track (thread, goroutine group) within the process
	Kind  Kind
}

// Merged is one event of a merged trace: the event with its corrected
// global time in Event.Time, the raw local timestamp beside it, and the
// process it came from.
type Merged struct {
	Event
	Raw  int64  // the local timestamp as recorded
	Proc uint32 // the recording process
}

// Meta flags.
const (
	// FlagReference marks the reference process: its clock is global time.
	FlagReference uint32 = 1 << iota
	// FlagSyncedHost marks a process that shares its host's clock and sync
	// sessions (seed 001's SYNCED-HOST): it records no sessions of its own.
	FlagSyncedHost
	// FlagMerged marks a merged trace.
	FlagMerged
)

// Meta describes the writer of a file.
type Meta struct {
	Proc  uint32 // process number, unique in the run
	Host  uint32 // host number: processes with equal Host share one clock
	Flags uint32 // FlagReference, FlagSyncedHost, FlagMerged
	Name  string // human name of the process (at most 65535 bytes)
	Clock string // the clock stamped with, e.g. "CLOCK_MONOTONIC_RAW"
}

// SessionKind says why a sync session was run.
type SessionKind uint8

// Session kinds.
const (
	SessionStart  SessionKind = iota + 1 // at the start of the run
	SessionEnd                           // at the end of the run
	SessionDemand                        // on demand (Timesync, seed 001's VT_timesync)
)

// Session is one sync session: exchanges with the reference, in the
// recording process's orientation (local = this process, source = the
// reference).
type Session struct {
	Index   uint32 // 0, 1, 2, ... per process
	Ref     uint32 // the reference process
	Kind    SessionKind
	Samples []estimate.Sample
}

// DaemonMapping is a local-to-global mapping published by the sync daemon,
// valid for local times from From on (until the next one's From).
type DaemonMapping struct {
	From    int64
	Mapping estimate.Mapping
}

// Name is one string table entry.
type Name struct {
	Proc uint32
	ID   uint64
	Name string
}

// Errors matched with errors.Is.
var (
	// ErrCorrupt: a chunk failed its checks (magic, length, checksum, content).
	ErrCorrupt = errors.New("corrupt trace")
	// ErrTruncated: the file ends inside a chunk (a crashed writer).
	ErrTruncated = errors.New("truncated trace")
)

// CorruptError says what is wrong where.
type CorruptError struct {
	File   string
	Offset int64 // byte offset of the chunk (or record) at fault
	Reason string
	Err    error // ErrCorrupt or ErrTruncated
}

// Error formats "file: offset N: reason: corrupt trace".
func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: offset %d: %s: %v", e.File, e.Offset, e.Reason, e.Err)
}

// Unwrap returns ErrCorrupt or ErrTruncated.
func (e *CorruptError) Unwrap() error { return e.Err }

// putEvent encodes e into b[:EventSize].
func putEvent(b []byte, e *Event) {
	_ = b[EventSize-1]
	binary.LittleEndian.PutUint64(b[0:], uint64(e.Time))
	binary.LittleEndian.PutUint64(b[8:], e.ID)
	binary.LittleEndian.PutUint64(b[16:], uint64(e.Value))
	binary.LittleEndian.PutUint32(b[24:], e.Peer)
	binary.LittleEndian.PutUint16(b[28:], e.Track)
	b[30] = byte(e.Kind)
	b[31] = 0
}

func getEvent(b []byte, e *Event) {
	_ = b[EventSize-1]
	e.Time = int64(binary.LittleEndian.Uint64(b[0:]))
	e.ID = binary.LittleEndian.Uint64(b[8:])
	e.Value = int64(binary.LittleEndian.Uint64(b[16:]))
	e.Peer = binary.LittleEndian.Uint32(b[24:])
	e.Track = binary.LittleEndian.Uint16(b[28:])
	e.Kind = Kind(b[30])
}

// PutMerged encodes m into b[:MergedSize].
func PutMerged(b []byte, m *Merged) {
	_ = b[MergedSize-1]
	binary.LittleEndian.PutUint64(b[0:], uint64(m.Time))
	binary.LittleEndian.PutUint64(b[8:], uint64(m.Raw))
	binary.LittleEndian.PutUint64(b[16:], m.ID)
	binary.LittleEndian.PutUint64(b[24:], uint64(m.Value))
	binary.LittleEndian.PutUint32(b[32:], m.Proc)
	binary.LittleEndian.PutUint32(b[36:], m.Peer)
	binary.LittleEndian.PutUint16(b[40:], m.Track)
	b[42] = byte(m.Kind)
	clear(b[43:48])
}

func getMerged(b []byte, m *Merged) {
	_ = b[MergedSize-1]
	m.Time = int64(binary.LittleEndian.Uint64(b[0:]))
	m.Raw = int64(binary.LittleEndian.Uint64(b[8:]))
	m.ID = binary.LittleEndian.Uint64(b[16:])
	m.Value = int64(binary.LittleEndian.Uint64(b[24:]))
	m.Proc = binary.LittleEndian.Uint32(b[32:])
	m.Peer = binary.LittleEndian.Uint32(b[36:])
	m.Track = binary.LittleEndian.Uint16(b[40:])
	m.Kind = Kind(b[42])
}

func f64bits(f float64) uint64 { return math.Float64bits(f) }
func f64from(u uint64) float64 { return math.Float64frombits(u) }

// checkCount verifies that a payload of n bytes holds count records of size
// recSize, without overflow.
func checkCount(n int, count uint32, recSize int) error {
	if uint64(count)*uint64(recSize) != uint64(n) {
		return fmt.Errorf("payload of %d bytes does not hold %d records of %d bytes", n, count, recSize)
	}
	return nil
}
