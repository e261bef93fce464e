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
type quietHandler struct {
	next  slog.Handler
	state *quietState
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

func (h *quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &quietHandler{next: h.next.WithAttrs(as), state: h.state}
}

func (h *quietHandler) WithGroup(name string) slog.Handler {
	return &quietHandler{next: h.next.WithGroup(name), state: h.state}
}
