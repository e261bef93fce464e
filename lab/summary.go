package lab

import "github.com/gclock/gclock/eval"

// Summary is the error summary of a host or a peer (chronyd, ptp4l):
// package eval's, under the JSON names `gclock sim --json` uses plus
// error_p95_ns, which the peer table uses.
type Summary = eval.Errors
