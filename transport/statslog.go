package transport

import (
	"log/slog"
	"reflect"
	"strings"
	"unicode"
)

// LogValue logs the counters as a group of snake_case keys
// (sent=12 sent_bytes=960 ...), not as a Go struct.
func (s Stats) LogValue() slog.Value {
	v := reflect.ValueOf(s)
	attrs := make([]slog.Attr, 0, v.NumField())
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() || f.Type.Kind() != reflect.Uint64 {
			continue
		}
		attrs = append(attrs, slog.Uint64(snake(f.Name), v.Field(i).Uint()))
	}
	return slog.GroupValue(attrs...)
}

// snake turns a Go field name into snake_case (DupRequests: dup_requests).
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
