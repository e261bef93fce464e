package trace_test

import (
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/trace"
)

// A live daemon's page is a mapping source for the recorder.
var _ trace.MappingSource = (*gtime.Reader)(nil)
