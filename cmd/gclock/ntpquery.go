package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/ntp"
)

func init() {
	register("ntp-query", "ask an NTP server (gclock daemon's ntp.listen, or any) for its time, bound and fields", func(args []string) error {
		return runNTPQuery(args, os.Stdout, os.Stderr)
	})
}

const ntpQueryUsage = `usage: gclock ntp-query [-n N] [-json] [-timeout D] HOST[:PORT]

Sends N NTPv4 client requests (port 123 unless given) and prints, for each
answer, the server's offset from this machine's CLOCK_REALTIME, the round
trip, and what the server says about itself: leap, stratum, reference id,
root delay and root dispersion (gclock daemon serves its error bound there).
"bound" is root delay/2 + root dispersion + round trip/2: the offset's
error bound as RFC 5905 defines it. It never sets the clock.

flags:
`

// ntpSample is one answer in gclock ntp-query's JSON output.
type ntpSample struct {
	OffsetNs     int64  `json:"offset_ns"`
	DelayNs      int64  `json:"delay_ns"`
	BoundNs      int64  `json:"bound_ns"`
	Leap         uint8  `json:"leap"`
	Stratum      uint8  `json:"stratum"`
	RefID        string `json:"refid"`
	RootDelayNs  int64  `json:"root_delay_ns"`
	RootDispNs   int64  `json:"root_dispersion_ns"`
	Precision    int8   `json:"precision"`
	ReferenceUTC string `json:"reference_time"`
}

func runNTPQuery(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ntp-query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 4, "requests to send (the answer with the shortest round trip is the best)")
	asJSON := fs.Bool("json", false, "print JSON")
	timeout := fs.Duration("timeout", 2*time.Second, "wait for each answer")
	fs.Usage = func() { fmt.Fprint(stderr, ntpQueryUsage); fs.PrintDefaults() }
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usage.Errorf("want one server (HOST or HOST:PORT; see gclock ntp-query -h)")
	}
	if *n < 1 || *n > 1000 {
		return usage.Errorf("-n %d outside [1, 1000]", *n)
	}
	if *timeout <= 0 {
		return usage.Errorf("-timeout %v: must be > 0", *timeout)
	}
	addr := fs.Arg(0)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "123")
	}
	var out []ntpSample
	for i := range *n {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		r, err := ntp.Query(ctx, addr)
		cancel()
		if err != nil {
			return err
		}
		p := r.Reply
		s := ntpSample{OffsetNs: r.Offset.Nanoseconds(), DelayNs: r.Delay.Nanoseconds(), Leap: p.Leap, Stratum: p.Stratum,
			RefID: refIDString(p), RootDelayNs: ntp.ShortNs(p.RootDelay), RootDispNs: ntp.ShortNs(p.RootDispersion), Precision: p.Precision}
		s.BoundNs = s.RootDelayNs/2 + s.RootDispNs + max(s.DelayNs, 0)/2
		if p.RefTime != 0 {
			s.ReferenceUTC = time.Unix(0, ntp.UnixNs(p.RefTime, time.Now().UnixNano())).UTC().Format(time.RFC3339Nano)
		}
		out = append(out, s)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	best := 0
	for i, s := range out {
		if s.DelayNs < out[best].DelayNs {
			best = i
		}
		fmt.Fprintf(stdout, "offset %+12v  delay %10v  bound +-%-10v  stratum %d  refid %s  leap %d  root dispersion %v\n",
			time.Duration(s.OffsetNs), time.Duration(s.DelayNs), time.Duration(s.BoundNs), s.Stratum, s.RefID, s.Leap, time.Duration(s.RootDispNs))
	}
	b := out[best]
	fmt.Fprintf(stdout, "best (shortest round trip): the server is %v %s this machine's CLOCK_REALTIME, +-%v\n",
		time.Duration(abs64(b.OffsetNs)), map[bool]string{true: "ahead of", false: "behind"}[b.OffsetNs >= 0], time.Duration(b.BoundNs))
	return nil
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// refIDString prints a reference id: four characters at stratum 1 (GCLK),
// an IPv4 address above.
func refIDString(p ntp.Packet) string {
	b := []byte{byte(p.RefID >> 24), byte(p.RefID >> 16), byte(p.RefID >> 8), byte(p.RefID)}
	if p.Stratum <= 1 {
		for _, c := range b {
			if c != 0 && (c < 0x20 || c > 0x7e) {
				return fmt.Sprintf("%08x", p.RefID)
			}
		}
		return string(bytes0(b))
	}
	return net.IP(b).String()
}

func bytes0(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
