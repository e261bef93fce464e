package lab

import (
	"os"
	"testing"

	"github.com/gclock/gclock/lab/netlab"
)

// needLab skips the test, saying why, when this process cannot build a lab.
func needLab(t *testing.T) {
	t.Helper()
	if err := netlab.Check(); err != nil {
		t.Skipf("lab integration test needs root and network namespaces: %v", err)
	}
	if os.Getenv("GCLOCK_LAB_SKIP") != "" {
		t.Skip("GCLOCK_LAB_SKIP is set (another lab is running on this machine; Up would remove it)")
	}
}
