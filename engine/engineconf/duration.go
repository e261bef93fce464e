package engineconf

import "github.com/gclock/gclock/internal/conf"

// Duration is conf.Duration, the one YAML duration ("250ms").
type Duration = conf.Duration
