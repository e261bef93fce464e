package engine

import (
	"slices"
	"testing"
	"time"
)

// TestCheckReportsEveryBadField: Check, the one validation of a Config,
// names every bad field (Validate only the first), and passes a field a
// message compares with as a Field, so that engineconf can name its key.
func TestCheckReportsEveryBadField(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Config)
		fields []string
		refs   []Field // Field arguments, in order
	}{
		{"valid", func(*Config) {}, nil, nil},
		{"two", func(c *Config) { c.PingsPerRound, c.Window = 0, 1 }, []string{"PingsPerRound", "Window"}, nil},
		{"periods", func(c *Config) { c.MinGlobalPeriod, c.InitialGlobalPeriod = 20*time.Second, 20*time.Second },
			[]string{"MinGlobalPeriod", "InitialGlobalPeriod"}, []Field{"MaxGlobalPeriod", "MaxGlobalPeriod"}},
		{"duplicate source", func(c *Config) { c.ID, c.Sources, c.Children = 1, []NodeID{2}, []NodeID{2, 1} },
			[]string{"Children", "Children"}, []Field{"Sources"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			var fields []string
			var refs []Field
			c.Check(func(field, _ string, args ...any) {
				fields = append(fields, field)
				for _, a := range args {
					if f, ok := a.(Field); ok {
						refs = append(refs, f)
					}
				}
			})
			if !slices.Equal(fields, tt.fields) || !slices.Equal(refs, tt.refs) {
				t.Errorf("Check named %v (refs %v), want %v (refs %v)", fields, refs, tt.fields, tt.refs)
			}
			if err := c.Validate(); (err == nil) != (len(tt.fields) == 0) {
				t.Errorf("Validate = %v", err)
			}
		})
	}
}
