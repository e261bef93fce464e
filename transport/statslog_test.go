package transport

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestStatsLogValue(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("stop", "transport", Stats{Sent: 12, SentBytes: 960, DupRequests: 2})
	for _, w := range []string{"transport.sent=12", "transport.sent_bytes=960", "transport.dup_requests=2", "transport.bad_tag=0"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("%q lacks %s", buf.String(), w)
		}
	}
	if strings.Contains(buf.String(), "{") {
		t.Errorf("a Go struct in the log line: %q", buf.String())
	}
}
