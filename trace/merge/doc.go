// Package merge streams the events of many per-process trace files into one
// stream ordered by global time: a k-way merge whose memory is one decoded
// chunk per input, whatever the length of the traces.
//
// Each Source maps its local timestamps to global time with a Mapper
// (package trace/correct builds them from the sync sessions). Mapped times
// of one process never go backwards: a mapping that would step back (a
// daemon mapping switching over) is clamped to the previous time and the
// clamp is counted in Stats, never silently.
//
//	m, err := merge.New(sources, merge.Options{KeepGoing: true})
//	buf := make([]format.Merged, 4096)
//	for {
//		n, err := m.Read(buf)
//		use(buf[:n])
//		if err == io.EOF { break }
//	}
//
// With KeepGoing, a corrupt chunk is skipped (the reader resynchronises on
// the next good chunk) and a truncated file simply ends; both are listed in
// Stats. Without it, Read returns the *format.CorruptError naming the file
// and offset.
package merge
