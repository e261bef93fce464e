package gtime

import (
	"cmp"
	"os"
	"strings"
)

// PageFromEnv returns the page path programs on this node read:
// $GCLOCK_PAGE, else DefaultPath, with each %n replaced by the node's index
// in the Slurm job ($SLURM_NODEID) when it is set. deploy/slurm/gclock-run.sh
// exports a pattern (one daemon per node, each with its own page); every
// reader (gclock now, the Go client's callers, the MPI library) expands it
// on its node.
func PageFromEnv() string {
	return ExpandPath(cmp.Or(os.Getenv("GCLOCK_PAGE"), DefaultPath), os.Getenv("SLURM_NODEID"))
}

// ExpandPath replaces each %n in pattern with nodeID; without a nodeID the
// pattern is returned as it is (and opening it names the %n).
func ExpandPath(pattern, nodeID string) string {
	if nodeID == "" {
		return pattern
	}
	return strings.ReplaceAll(pattern, "%n", nodeID)
}
