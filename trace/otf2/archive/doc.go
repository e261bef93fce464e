// Package archive reads and writes OTF2 archives (the format of OTF2 3.0,
// as libotf2 3.0.2 writes and reads it) in pure Go, record by record,
// keeping everything: a read-modify-write round trip is lossless, and an
// archive read and written back unchanged is the bytes libotf2 wrote.
//
// Reading:
//
//	a, err := archive.Open("dir/traces.otf2") // anchor file and global definitions
//	a.Anchor            // chunk sizes, creator, properties, trace id, ...
//	a.Global            // []Record: String, ClockProperties, Location, Region, ...
//	a.Locations         // the Location definitions' ids
//	defs, err := a.LocalDefs(loc) // ClockOffset, MappingTable, ...
//	evs, err := a.Events(loc)     // or a.EachEvent(loc, fn), one chunk in memory
//
// Writing:
//
//	w, err := archive.Create(dir, "traces", archive.Options{Creator: "gclock"})
//	w.Global(rec); w.LocalDef(loc, rec); w.Event(loc, rec) // a location's events in time order
//	w.SetProperty("GCLOCK::KEY", "value")
//	err = w.Close() // finishes the files, writes the anchor file last
//
// Rewriting (e.g. correcting timestamps) is Copy with hooks that change
// records on their way:
//
//	err = archive.Copy(a, dir, "traces", archive.Transform{Event: func(loc uint64, r *archive.Record) error { r.Time += d; return nil }})
//
// A Record is generic: its Spec (the record type: id, name, fields) comes
// from a table generated from OTF2's own record specification
// (share/otf2/otf2.defs and otf2.events; see gen/gen.py and spec_gen.go),
// which covers every event, global and local definition record of OTF2
// 3.0. Fields holds the values in the order of the wire format, attic
// fields (superseded, still written for old readers) included; Field and
// Set address them by the specification's names, NewRecord builds one from
// its current fields and fills the attic ones as libotf2 does:
//
//	r, err := archive.NewRecord(archive.Event, "MpiIsend", t, archive.U(peer), archive.U(comm), archive.U(tag), archive.U(bytes), archive.U(req))
//	r.Attrs = []archive.Attr{{ID: 0, Type: archive.TypeInt64, Value: uint64(raw)}}
//
// Values keep their bits: integers of every width in Value.U (signed ones
// two's complement), floats as IEEE 754 bits (F and Value.Float convert),
// strings in Value.S, an array's count field as one row of member values
// per element (Value.Rows), id maps in Value.Map.
//
// Records of types this package does not know (a newer OTF2) are read by
// their length, counted in Archive.Unknown and kept (Spec nil, payload in
// Raw) so that they are written back unchanged; fields a newer OTF2 appends
// to a known record are skipped, fields an older one lacks are absent
// (Fields is shorter). A truncated or corrupt file is a *FormatError naming
// the file, the byte offset and the record.
//
// The format, from OTF2's OTF2_Buffer.c and OTF2_AnchorFile.c: every file
// is a sequence of chunks (sizes in the anchor file) that begin with a
// chunk header (marker 3, the endianness byte 0x42 little or 0x23 big, and
// the numbers of the chunk's first and last event); records never span
// chunks, the rest of a chunk is zeros (end of chunk) and the last chunk
// ends with the end-of-file marker. A record is its type id, its length
// (one byte, or 0xff and eight bytes; none for the few OTF2 1.0 singleton
// events such as Enter) and its fields; integers are compressed (a length
// byte and the low-order bytes; 0 and all-ones are one byte). Events are
// preceded by a timestamp record (5, eight bytes) when their time differs
// from the previous one, and by an attribute list record (6) when they
// have attributes.
//
// Not supported: compressed (zlib) archives, the SION substrate,
// snapshots and thumbnails (their counts are read, their files ignored),
// and writing big-endian archives (they are read).
package archive
