package daemoncmd

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Repeats: a message (same level and text, about the same peer: the
// values of its child, source, peer, from, to and reference attributes)
// logged more than QuietBurst times within QuietWindow is held back until
// the window ends; the next one then carries the count of those held back
// ("repeats_not_logged").
// The daemon logs conditions when they change, not at every round; this
// is the backstop that keeps any line from repeating forever.
const (
	QuietBurst  = 5
	QuietWindow = 10 * time.Minute
)

// quietHandler wraps a slog.Handler with the repeat limit. Handlers made
// by WithAttrs and WithGroup share the counts.
//
// It also keeps each key once per line: an attribute that a WithAttrs
// above already carries with the same value (the engine adds node=ID to
// the daemon's logger, which already has it) is dropped.
type quietHandler struct {
	next  slog.Handler
	state *quietState
	with  map[string]slog.Value // top-level attributes added by WithAttrs
	group bool                  // under a WithGroup: keys are the group's
}

type quietState struct {
	mu   sync.Mutex
	now  func() time.Time
	seen map[quietKey]*quietCount
}

type quietKey struct {
	level slog.Level
	msg   string
	about string // the identity attributes' values
}

// identity are the attributes that name what a message is about: the same
// message about two peers is two messages.
var identity = map[string]bool{"child": true, "source": true, "peer": true, "from": true, "to": true, "reference": true}

func keyOf(r slog.Record) quietKey {
	k := quietKey{level: r.Level, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if identity[a.Key] {
			k.about += a.Key + "=" + a.Value.String() + " "
		}
		return true
	})
	return k
}

type quietCount struct {
	start time.Time // window start
	n     int       // logged in the window
	held  int       // held back in the window
}

func newQuietHandler(next slog.Handler, now func() time.Time) *quietHandler {
	return &quietHandler{next: next, state: &quietState{now: now, seen: map[quietKey]*quietCount{}}}
}

func (h *quietHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *quietHandler) Handle(ctx context.Context, r slog.Record) error {
	r = h.dedup(r)
	if r.Level < slog.LevelInfo {
		return h.next.Handle(ctx, r) // debug lines are asked for (-v)
	}
	s := h.state
	s.mu.Lock()
	now := s.now()
	k := keyOf(r)
	c := s.seen[k]
	if c == nil || now.Sub(c.start) >= QuietWindow {
		held := 0
		if c != nil {
			held = c.held
		}
		c = &quietCount{start: now}
		s.seen[k] = c
		if held > 0 {
			r = r.Clone()
			r.AddAttrs(slog.Int("repeats_not_logged", held))
		}
	}
	if c.n >= QuietBurst {
		c.held++
		s.mu.Unlock()
		return nil
	}
	c.n++
	if c.n == QuietBurst {
		r = r.Clone()
		r.AddAttrs(slog.String("repeats", "further repeats in the next "+QuietWindow.String()+" are not logged"))
	}
	if len(s.seen) > 4096 { // messages are constant strings; a bound all the same
		for key, v := range s.seen {
			if now.Sub(v.start) >= QuietWindow {
				delete(s.seen, key)
			}
		}
	}
	s.mu.Unlock()
	return h.next.Handle(ctx, r)
}

// dup reports whether a is already on the line with the same value.
func (h *quietHandler) dup(a slog.Attr) bool {
	v, ok := h.with[a.Key]
	if !ok || h.group {
		return false
	}
	// The same value, or the same text of it: the engine's node=NodeID(2)
	// (a named type, so slog keeps it as Any) is the daemon's node=2.
	r := a.Value.Resolve()
	return v.Equal(r) || v.String() == r.String()
}

// dedup drops the record's attributes that a WithAttrs above carries with
// the same value.
func (h *quietHandler) dedup(r slog.Record) slog.Record {
	if len(h.with) == 0 || h.group {
		return r
	}
	drop := false
	r.Attrs(func(a slog.Attr) bool { drop = drop || h.dup(a); return !drop })
	if !drop {
		return r
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if !h.dup(a) {
			out.AddAttrs(a)
		}
		return true
	})
	return out
}

func (h *quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	with := h.with
	if !h.group {
		keep := as[:0:0]
		with = make(map[string]slog.Value, len(h.with)+len(as))
		for k, v := range h.with {
			with[k] = v
		}
		for _, a := range as {
			if h.dup(a) {
				continue
			}
			keep = append(keep, a)
			with[a.Key] = a.Value.Resolve()
		}
		as = keep
	}
	return &quietHandler{next: h.next.WithAttrs(as), state: h.state, with: with, group: h.group}
}

func (h *quietHandler) WithGroup(name string) slog.Handler {
	return &quietHandler{next: h.next.WithGroup(name), state: h.state, with: h.with, group: true}
}
