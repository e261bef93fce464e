package clockshim

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gclock/gclock/clock"
)

//go:embed c/clockshim.c
var source []byte

// Build compiles the shim into dir and returns the library's path. It
// needs a C compiler (cc) and the C library's headers.
func Build(dir string) (string, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", fmt.Errorf("clockshim: no C compiler (cc) to build the clock shim (install gcc and libc6-dev): %w", err)
	}
	src := filepath.Join(dir, "clockshim.c")
	if err := os.WriteFile(src, source, 0o600); err != nil {
		return "", fmt.Errorf("clockshim: %w", err)
	}
	so := filepath.Join(dir, "clockshim.so")
	out, err := exec.Command(cc, "-O2", "-Wall", "-shared", "-fPIC", "-o", so, src, "-ldl").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("clockshim: building %s: %v: %s", src, err, strings.TrimSpace(string(out)))
	}
	return so, nil
}

// magic opens every table.
const magic = "GCLKSHM1"

// Env is the environment that puts a program on the clock of table (with
// the library so from Build).
func Env(so, table string) []string {
	return []string{"LD_PRELOAD=" + so, "GCLOCK_CLOCKSHIM=" + table}
}

// WriteTable writes the knots of an emulated clock (clock.EmuParams.Knots,
// on CLOCK_MONOTONIC_RAW time) as the shim reads them: each knot's raw
// time, the clock's deviation from raw time there and its rate error
// after it.
func WriteTable(path string, ks []clock.Knot) error {
	b, err := EncodeTable(ks)
	if err != nil {
		return fmt.Errorf("clockshim: %s: %w", path, err)
	}
	return os.WriteFile(path, b, 0o600)
}

// EncodeTable is WriteTable's file content.
func EncodeTable(ks []clock.Knot) ([]byte, error) {
	if len(ks) == 0 || len(ks) > math.MaxUint32 {
		return nil, fmt.Errorf("%d knots: want 1..%d", len(ks), uint32(math.MaxUint32))
	}
	var buf bytes.Buffer
	buf.WriteString(magic)
	_ = binary.Write(&buf, binary.LittleEndian, [2]uint32{uint32(len(ks)), 0})
	for i, k := range ks {
		if i > 0 && k.T <= ks[i-1].T {
			return nil, fmt.Errorf("knot %d at %d: not after knot %d at %d", i, k.T, i-1, ks[i-1].T)
		}
		if math.IsNaN(k.Skew) || math.Abs(k.Skew) >= 0.5 {
			return nil, fmt.Errorf("knot %d: rate error %v: want |skew| < 0.5", i, k.Skew)
		}
		_ = binary.Write(&buf, binary.LittleEndian, struct {
			T, Dev int64
			Skew   float64
		}{k.T, k.Local - k.T, k.Skew})
	}
	return buf.Bytes(), nil
}
