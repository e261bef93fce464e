package format

import (
	"errors"
	"fmt"
	"io"
)

// Summary is everything in a trace file except the events themselves,
// which are only counted: what the correction needs before the merge
// streams the events, and what `gclock trace info` prints.
type Summary struct {
	Meta     Meta
	HasMeta  bool
	Sessions []Session
	Mappings []DaemonMapping
	Names    []Name
	Chunks   map[ChunkKind]int
	Events   int64
	First    int64 // local time of the first event
	Last     int64 // local time of the last event
	Merged   int64 // merged records (merged traces)
	Size     int64 // bytes read
	// Problems lists the corrupt or truncated chunks skipped when
	// summarising with keepGoing (each a *CorruptError).
	Problems []error
	// Lost is what keepGoing skipped: the reader's Loss, plus the chunks
	// whose checksum was good but whose records did not decode.
	Lost Loss
}

// Summarize reads a whole trace file. Without keepGoing the first corrupt
// or truncated chunk is returned as an error (a *CorruptError naming name
// and the offset); with it, bad chunks are listed in Problems and reading
// goes on with the next good chunk.
func Summarize(r io.Reader, name string, keepGoing bool) (*Summary, error) {
	s := &Summary{Chunks: map[ChunkKind]int{}}
	rd := NewReader(r, name)
	var evbuf []Event
	for {
		c, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var ce *CorruptError
			if !keepGoing || !errors.As(err, &ce) {
				s.Size = rd.Offset()
				return s, err
			}
			s.Problems = append(s.Problems, err)
			if errors.Is(err, ErrTruncated) {
				break
			}
			if c, err = rd.Resync(); err != nil {
				if err != io.EOF {
					s.Problems = append(s.Problems, err)
				}
				break
			}
		}
		if err := s.add(c, &evbuf, name); err != nil {
			if !keepGoing {
				s.Size = rd.Offset()
				return s, err
			}
			s.Problems = append(s.Problems, err)
			s.Lost.Chunks++
			if c.Kind == KindEvents {
				s.Lost.Events += int64(c.Count)
			}
		}
	}
	s.Size = rd.Offset()
	l := rd.Loss()
	s.Lost.Chunks += l.Chunks
	s.Lost.Events += l.Events
	s.Lost.Bytes += l.Bytes
	if !s.HasMeta {
		err := &CorruptError{File: name, Offset: 0, Reason: "no meta chunk", Err: ErrCorrupt}
		if !keepGoing {
			return s, err
		}
		s.Problems = append(s.Problems, err)
	}
	return s, nil
}

func (s *Summary) add(c Chunk, evbuf *[]Event, name string) error {
	wrap := func(err error) error {
		return &CorruptError{File: name, Offset: c.Offset, Reason: fmt.Sprintf("%s chunk: %v", c.Kind, err), Err: ErrCorrupt}
	}
	s.Chunks[c.Kind]++
	switch c.Kind {
	case KindMeta:
		m, err := DecodeMeta(c.Payload)
		if err != nil {
			return wrap(err)
		}
		if s.HasMeta && m != s.Meta {
			return wrap(errors.New("second meta chunk differs from the first"))
		}
		s.Meta, s.HasMeta = m, true
	case KindEvents:
		ev, err := DecodeEvents(c, *evbuf)
		*evbuf = ev
		if err != nil {
			return wrap(err)
		}
		if len(ev) > 0 {
			if s.Events == 0 {
				s.First = ev[0].Time
			}
			s.Last = ev[len(ev)-1].Time
			s.Events += int64(len(ev))
		}
	case KindSync:
		ss, err := DecodeSession(c)
		if err != nil {
			return wrap(err)
		}
		s.Sessions = append(s.Sessions, ss)
	case KindMappings:
		ms, err := DecodeMappings(c)
		if err != nil {
			return wrap(err)
		}
		s.Mappings = append(s.Mappings, ms...)
	case KindNames:
		ns, err := DecodeNames(c)
		if err != nil {
			return wrap(err)
		}
		s.Names = append(s.Names, ns...)
	case KindMerged:
		s.Merged += int64(c.Count)
	}
	return nil
}
