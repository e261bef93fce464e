package daemon

import "github.com/gclock/gclock/internal/conf"

// Duration is the one YAML duration type (conf.Duration): a
// time.Duration written with its unit ("250ms", "16s", "1.5us"); a bare
// number is refused.
type Duration = conf.Duration
