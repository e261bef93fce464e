package daemon

import "github.com/gclock/gclock/engine/engineconf"

// Duration is the one YAML duration type (engineconf.Duration): a
// time.Duration written with its unit ("250ms", "16s", "1.5us"); a bare
// number is refused.
type Duration = engineconf.Duration
