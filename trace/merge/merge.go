package merge

import (
	"errors"
	"fmt"
	"io"

	"github.com/gclock/gclock/trace/format"
)

// Mapper maps a process's local time to global time. It must be
// non-decreasing.
type Mapper interface {
	Global(local int64) int64
}

// Identity is the Mapper of the reference process.
type Identity struct{}

// Global returns local.
func (Identity) Global(local int64) int64 { return local }

// Source is one process's trace.
type Source struct {
	Name string    // file name, for errors
	R    io.Reader // positioned at the start of the file
	Proc uint32    // the process number (from the file's meta chunk)
	Map  Mapper    // local -> global; Identity if nil
}

// Options tune a merge.
type Options struct {
	KeepGoing bool // skip corrupt chunks and stop at truncations instead of failing
}

// Stats describes what the merge did with one source.
type Stats struct {
	Name     string
	Proc     uint32
	Events   int64
	Clamped  int64   // events whose mapped time was raised to the previous one
	Problems []error // corrupt/truncated chunks skipped (KeepGoing)
	// Lost is what KeepGoing skipped (format.Loss), plus the events of
	// chunks with a good checksum whose records did not decode or went
	// back in time.
	Lost format.Loss
}

type source struct {
	rd        *format.Reader
	ev        []format.Event
	pos       int
	mapper    Mapper
	ident     bool
	last      int64 // last global time handed out
	prevLocal int64 // local time of the last event handed out
	done      bool
	stats     Stats
	// decodeLoss counts the chunks with a good checksum that were dropped.
	decodeLoss format.Loss
}

// Merger is a streaming k-way merge.
type Merger struct {
	src  []*source
	heap []int32 // source indexes, min-heap on (key, index)
	key  []int64 // current head global time per source
	opt  Options
	err  error
}

// New prepares a merge. It reads the first chunk of every source.
func New(srcs []Source, opt Options) (*Merger, error) {
	m := &Merger{opt: opt, key: make([]int64, len(srcs))}
	for i, s := range srcs {
		if s.R == nil {
			return nil, fmt.Errorf("merge: source %d (%s): nil reader", i, s.Name)
		}
		mp := s.Map
		_, ident := mp.(Identity)
		if mp == nil {
			mp, ident = Identity{}, true
		}
		src := &source{rd: format.NewReader(s.R, s.Name), mapper: mp, ident: ident,
			stats: Stats{Name: s.Name, Proc: s.Proc}}
		src.last = -1 << 63
		m.src = append(m.src, src)
		ok, err := m.fill(src)
		if err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		if ok {
			m.key[i] = src.global(0)
			m.heap = append(m.heap, int32(i))
		}
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	return m, nil
}

// Stats returns per-source statistics so far.
func (m *Merger) Stats() []Stats {
	out := make([]Stats, len(m.src))
	for i, s := range m.src {
		out[i] = s.stats
		l := s.rd.Loss()
		out[i].Lost = format.Loss{Chunks: l.Chunks + s.decodeLoss.Chunks, Events: l.Events + s.decodeLoss.Events, Bytes: l.Bytes}
	}
	return out
}

// global maps event i of the current chunk, clamping to keep the process's
// stream non-decreasing.
func (s *source) global(i int) int64 {
	t := s.ev[i].Time
	if !s.ident {
		t = s.mapper.Global(t)
	}
	if t < s.last {
		t = s.last
		s.stats.Clamped++
	}
	s.last = t
	return t
}

// fill loads the next events chunk of s; false at the end of the source.
func (m *Merger) fill(s *source) (bool, error) {
	for {
		c, err := s.rd.Next()
		if err == io.EOF {
			s.done = true
			return false, nil
		}
		if err != nil {
			var ce *format.CorruptError
			if !m.opt.KeepGoing || !errors.As(err, &ce) {
				return false, err
			}
			s.stats.Problems = append(s.stats.Problems, err)
			if errors.Is(err, format.ErrTruncated) {
				s.done = true
				return false, nil
			}
			if c, err = s.rd.Resync(); err != nil {
				if err != io.EOF {
					s.stats.Problems = append(s.stats.Problems, err)
				}
				s.done = true
				return false, nil
			}
		}
		if c.Kind != format.KindEvents {
			continue
		}
		ev, err := format.DecodeEvents(c, s.ev)
		s.ev = ev
		if err != nil {
			err = &format.CorruptError{File: s.stats.Name, Offset: c.Offset, Reason: err.Error(), Err: format.ErrCorrupt}
			if !m.opt.KeepGoing {
				return false, err
			}
			s.stats.Problems = append(s.stats.Problems, err)
			s.dropped(c)
			continue
		}
		if len(ev) == 0 {
			continue
		}
		// Chunks of one file must follow each other in time.
		if s.pos = 0; s.stats.Events > 0 && len(ev) > 0 && s.lastLocal() > ev[0].Time {
			err := &format.CorruptError{File: s.stats.Name, Offset: c.Offset, Reason: "chunk starts before the previous chunk ended", Err: format.ErrCorrupt}
			if !m.opt.KeepGoing {
				return false, err
			}
			s.stats.Problems = append(s.stats.Problems, err)
			s.dropped(c)
			continue
		}
		return true, nil
	}
}

func (s *source) lastLocal() int64 { return s.prevLocal }

// dropped counts an events chunk that was read but not merged.
func (s *source) dropped(c format.Chunk) {
	s.decodeLoss.Chunks++
	s.decodeLoss.Events += int64(c.Count)
}

// Read fills buf with the next merged events in global time order (ties
// broken by source index) and returns how many. It returns io.EOF, possibly
// with n > 0, when every source is exhausted.
func (m *Merger) Read(buf []format.Merged) (int, error) {
	n := 0
	for n < len(buf) {
		if m.err != nil {
			return n, m.err
		}
		if len(m.heap) == 0 {
			return n, io.EOF
		}
		i := m.heap[0]
		s := m.src[i]
		e := &s.ev[s.pos]
		out := &buf[n]
		out.Event = *e
		out.Time = m.key[i]
		out.Raw = e.Time
		out.Proc = s.stats.Proc
		n++
		s.stats.Events++
		s.prevLocal = e.Time
		s.pos++
		if s.pos == len(s.ev) {
			ok, err := m.fill(s)
			if err != nil {
				m.err = fmt.Errorf("merge: %w", err)
				return n, m.err
			}
			if !ok {
				last := len(m.heap) - 1
				m.heap[0] = m.heap[last]
				m.heap = m.heap[:last]
				if last > 0 {
					m.down(0)
				}
				continue
			}
		}
		m.key[i] = s.global(s.pos)
		m.down(0)
	}
	return n, nil
}

func (m *Merger) less(a, b int32) bool {
	ka, kb := m.key[a], m.key[b]
	return ka < kb || (ka == kb && a < b)
}

func (m *Merger) down(i int) {
	h := m.heap
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && m.less(h[r], h[l]) {
			c = r
		}
		if !m.less(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
