package archive

import "fmt"

// Transform changes records while Copy writes them; a nil hook keeps its
// records as they are. A hook may change the record in place (times,
// fields, attributes) or return an error to stop the copy.
//
// Times are not only Record.Time: fields of type Timestamp hold times too
// (BufferFlush's stopTime, ClockOffset's time), and ClockProperties's
// globalOffset and traceLength describe the events' span.
type Transform struct {
	Global   func(r *Record) error
	LocalDef func(loc uint64, r *Record) error
	Event    func(loc uint64, r *Record) error
}

// Copy writes the archive anew as dir/name.otf2 (dir/name.def, dir/name/)
// through the hooks: the same anchor (chunk sizes, creator, trace id,
// properties; SetProperty on the returned writer's archive is not needed),
// the global definitions, then per location (in a.Locations order) its
// local definitions and its events, one chunk in memory at a time. An
// event hook must keep a location's events in non-decreasing time.
// Snapshot, thumbnail and marker files are not copied.
func Copy(a *Archive, dir, name string, t Transform) error {
	w, err := Create(dir, name, Options{ChunkSizeEvents: a.ChunkSizeEvents, ChunkSizeDefs: a.ChunkSizeDefs,
		Machine: a.Machine, Creator: a.Creator, Description: a.Description, TraceID: a.TraceID, Version: a.Version})
	if err != nil {
		return err
	}
	for _, p := range a.Properties {
		w.SetProperty(p.Name, p.Value)
	}
	fail := func(err error) error { w.Abort(); return err }
	for i := range a.Global {
		r := a.Global[i] // a.Global stays as read
		r.Fields = append([]Value(nil), r.Fields...)
		if t.Global != nil {
			if err := t.Global(&r); err != nil {
				return fail(fmt.Errorf("otf2 archive: copy %s: %w", r.Name(), err))
			}
		}
		if err := w.Global(&r); err != nil {
			return fail(err)
		}
	}
	for _, loc := range a.Locations {
		defs, err := a.LocalDefs(loc)
		if err != nil {
			return fail(err)
		}
		for i := range defs {
			if t.LocalDef != nil {
				if err := t.LocalDef(loc, &defs[i]); err != nil {
					return fail(fmt.Errorf("otf2 archive: copy %s of location %d: %w", defs[i].Name(), loc, err))
				}
			}
			if err := w.LocalDef(loc, &defs[i]); err != nil {
				return fail(err)
			}
		}
		err = a.EachEvent(loc, func(r *Record) error {
			if t.Event != nil {
				if err := t.Event(loc, r); err != nil {
					return fmt.Errorf("otf2 archive: copy %s of location %d at %d: %w", r.Name(), loc, r.Time, err)
				}
			}
			return w.Event(loc, r)
		})
		if err != nil {
			return fail(err)
		}
		if err := w.FinishEvents(loc); err != nil {
			return fail(err)
		}
	}
	return w.Close()
}
