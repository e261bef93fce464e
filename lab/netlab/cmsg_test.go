package netlab

import "testing"

func TestWalkCmsgs(t *testing.T) {
	// One SCM_TIMESTAMPNS message: 16-byte header, 16-byte timespec.
	b := make([]byte, 32)
	b[0] = 32
	b[8] = 1   // SOL_SOCKET
	b[12] = 35 // SCM_TIMESTAMPNS
	b[16] = 2  // 2 s
	b[24] = 7  // 7 ns
	if got := rxTimestamp(b); got != 2_000_000_007 {
		t.Fatalf("rxTimestamp = %d, want 2000000007", got)
	}
	// Malformed lengths stop the walk instead of reading past the end.
	for _, l := range []byte{0, 15, 33, 255} {
		c := append([]byte(nil), b...)
		c[0] = l
		if got := rxTimestamp(c); got != 0 {
			t.Errorf("length %d: rxTimestamp = %d, want 0", l, got)
		}
	}
	if got := rxTimestamp(nil); got != 0 {
		t.Errorf("empty: %d", got)
	}
}

func FuzzRxTimestamp(f *testing.F) {
	f.Add(make([]byte, 32))
	f.Fuzz(func(t *testing.T, b []byte) { _ = rxTimestamp(b) })
}
