package plot

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/gclock/gclock/trace/timeline"
)

func TestCorrectionErrors(t *testing.T) {
	// Absolute truths near 2^62 ns: the plot must take differences first.
	const t0 = int64(1) << 62
	var a, b []timeline.ErrorSample
	for i := range int64(5000) {
		a = append(a, timeline.ErrorSample{Proc: uint32(i % 3), Truth: t0 + i*1e6, Err: i%7 - 3})
		b = append(b, timeline.ErrorSample{Proc: uint32(i % 3), Truth: t0 + i*1e6, Err: 100 * (i%11 - 5)})
	}
	dir := t.TempDir()
	files, err := CorrectionErrors(dir, []string{"clc", "linear"}, [][]timeline.ErrorSample{a, b}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || !strings.HasSuffix(files[0], "trace_error_cdf.png") || !strings.HasSuffix(files[1], "trace_error_time.png") {
		t.Fatalf("files %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("\x89PNG")) || len(data) < 2000 {
			t.Errorf("%s: %d bytes, not a drawn PNG", f, len(data))
		}
	}
	if _, err := CorrectionErrors(dir, []string{"one"}, [][]timeline.ErrorSample{a, b}, 1); err == nil {
		t.Error("one name for two methods: no error")
	}
	if _, err := CorrectionErrors(dir+"/no/such/dir", []string{"clc"}, [][]timeline.ErrorSample{a}, 1); err == nil || !strings.Contains(err.Error(), "trace_error_cdf.png") {
		t.Errorf("unwritable dir: %v, want an error naming the file", err)
	}
}
