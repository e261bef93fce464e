package conf

import (
	"errors"
	"fmt"
)

// ErrConfig is wrapped by every configuration error: a bad field, a YAML
// syntax error, a document over the limits.
var ErrConfig = errors.New("invalid config")

// FieldError is one bad field: its YAML path (sync.min_global_period,
// peers[2].address; empty for the document as a whole) and, when the
// value came from a file, its line.
type FieldError struct {
	Field string
	Line  int // 0 when unknown (defaults, flags)
	Msg   string
}

// Error formats "line N: field: msg", leaving out what is unknown.
func (e *FieldError) Error() string {
	switch {
	case e.Line > 0 && e.Field != "":
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	case e.Field != "":
		return e.Field + ": " + e.Msg
	}
	return e.Msg
}

// Unwrap makes errors.Is(err, ErrConfig) true.
func (e *FieldError) Unwrap() error { return ErrConfig }

// Errors collects FieldErrors, as a section's Check reports them.
type Errors []error

// Add records a bad field.
func (e *Errors) Add(field, format string, args ...any) {
	*e = append(*e, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Under returns an add function for a section's Check that puts prefix
// (the section's path, "sync") before every field.
func (e *Errors) Under(prefix string) func(field, format string, args ...any) {
	return func(field, format string, args ...any) {
		if prefix != "" {
			field = prefix + "." + field
		}
		e.Add(field, format, args...)
	}
}

// Err is every error collected, joined (nil for none).
func (e Errors) Err() error { return errors.Join(e...) }
