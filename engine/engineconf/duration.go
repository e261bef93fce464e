package engineconf

import "github.com/gclock/gclock/internal/conf"

// Duration is conf.Duration, the one YAML duration ("250ms").
type Duration = conf.Duration

// DurationError is conf.DurationError.
type DurationError = conf.DurationError

// ParseDuration is conf.ParseDuration.
func ParseDuration(s string) (Duration, error) { return conf.ParseDuration(s) }

// FieldAt is conf.FieldAt.
var FieldAt = conf.FieldAt
