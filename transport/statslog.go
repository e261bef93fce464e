package transport

import (
	"log/slog"

	"github.com/gclock/gclock/internal/logfields"
)

// LogValue logs the counters as a group of snake_case keys
// (sent=12 sent_bytes=960 ...), not as a Go struct.
func (s Stats) LogValue() slog.Value { return logfields.Of(s) }
