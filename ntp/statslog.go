package ntp

import (
	"log/slog"

	"github.com/gclock/gclock/internal/logfields"
)

// LogValue makes a log line of the counters one field each (received,
// answered, kernel_stamps, ...), so that a JSON log has them as numbers
// rather than a Go struct in a string. Every field of Stats is listed,
// including ones added later.
func (s Stats) LogValue() slog.Value { return logfields.Of(s) }
