package transportbench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/bench/workload"
	"github.com/gclock/gclock/transport"
)

func TestParseLosses(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []float64
		err  string
	}{
		{"0,1,3,5", []float64{0, 1, 3, 5}, ""},
		{" 2.5 , 0 ", []float64{2.5, 0}, ""},
		{"1,x", nil, `"x" is not a percentage`},
		{"100", nil, `"100" is not a percentage`},
		{"-1", nil, `"-1" is not a percentage`},
		{"", nil, `"" is not a percentage`},
	} {
		got, err := ParseLosses(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "-loss") {
				t.Errorf("ParseLosses(%q) = %v, %v; want an error naming -loss with %s", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Fatalf("ParseLosses(%q) = %v, %v", tt.in, got, err)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("ParseLosses(%q)[%d] = %v, want %v", tt.in, i, got[i], tt.want[i])
			}
		}
	}
}

func TestMedianRowAndSpeedup(t *testing.T) {
	rows := []Row{{Mode: AckOmission, ElapsedS: 3}, {Mode: AckOmission, ElapsedS: 1}, {Mode: AckOmission, ElapsedS: 2}}
	m := medianRow(rows)
	if m.ElapsedS != 2 || m.Runs != 3 {
		t.Errorf("median %+v, want elapsed 2 of 3 runs", m)
	}
	if rows[0].ElapsedS != 3 {
		t.Error("medianRow reordered its argument")
	}
	base := Row{Mode: AckPerMessage, ElapsedS: 3}
	speedup(base, &m)
	if m.SpeedupPct != 50 {
		t.Errorf("speedup %v%%, want 50%% (3 s / 2 s - 1)", m.SpeedupPct)
	}
	zero := Row{Mode: AckOmission}
	speedup(base, &zero)
	if zero.SpeedupPct != 0 {
		t.Errorf("speedup over a zero elapsed time: %v", zero.SpeedupPct)
	}
}

func TestWriteLab(t *testing.T) {
	var b bytes.Buffer
	rows := []Row{
		{Mode: AckPerMessage, LossPct: 2, Messages: 800, MessagesPerReq: 4, Acks: 400, Frames: 2400, Dropped: 50, ElapsedS: 1.5},
		{Mode: AckOmission, LossPct: 2, Messages: 400, MessagesPerReq: 2, Frames: 1400, Dropped: 30, ElapsedS: 1, SpeedupPct: 50},
	}
	WriteLab(&b, rows, workload.PageClientConfig{Requests: 200, Concurrency: 1, PageSize: 8192}, 50*time.Microsecond)
	out := b.String()
	for _, want := range []string{"(200 requests of 8192 bytes, concurrency 1, link 50µs each way)", "+50%", "ack-per-message", "2400", "same lab"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, AckPerMessage) && strings.Contains(l, "%") {
			t.Errorf("a speedup on the ack-per-message row: %q", l)
		}
	}
}

// TestLoopback runs the experiment briefly on loopback: every page
// delivered, ACK omission sends no ACKs and fewer datagrams.
func TestLoopback(t *testing.T) {
	cfg := transport.Config{MinRTO: 5 * time.Millisecond}
	rows, err := Loopback(t.Context(), LoopbackConfig{
		Client: workload.PageClientConfig{Requests: 50, Concurrency: 1, PageSize: transport.PageSize},
		Losses: []float64{0, 5}, Seed: 1, Warmup: 5, Repeat: 1, Endpoint: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for i := 0; i < len(rows); i += 2 {
		base, omit := rows[i], rows[i+1]
		if base.Mode != AckPerMessage || omit.Mode != AckOmission || base.Runs != 1 {
			t.Errorf("rows %d, %d: modes %s, %s, runs %d", i, i+1, base.Mode, omit.Mode, base.Runs)
		}
		if base.Failed+omit.Failed != 0 || base.Requests != 50 || omit.Requests != 50 {
			t.Errorf("loss %v%%: %d and %d done, %d and %d failed", base.LossPct, base.Requests, omit.Requests, base.Failed, omit.Failed)
		}
		if omit.Acks != 0 || omit.Messages >= base.Messages {
			t.Errorf("loss %v%%: omission %d ACKs, %d datagrams; per message %d", base.LossPct, omit.Acks, omit.Messages, base.Messages)
		}
	}
	if rows[2].RelayDropped == 0 && rows[3].RelayDropped == 0 {
		t.Error("the relay dropped nothing at 5% loss")
	}
	if _, err := Loopback(t.Context(), LoopbackConfig{Losses: []float64{0}, Repeat: 0}); err == nil {
		t.Error("repeat 0: no error")
	}
}
