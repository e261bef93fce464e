package ntp

import (
	"log/slog"
	"reflect"
	"strings"
	"unicode"
)

// LogValue makes a log line of the counters one field each (received,
// answered, kernel_stamps, ...), so that a JSON log has them as numbers
// rather than a Go struct in a string. Every field of Stats is listed,
// including ones added later.
func (s Stats) LogValue() slog.Value {
	v := reflect.ValueOf(s)
	attrs := make([]slog.Attr, 0, v.NumField())
	for i := range v.NumField() {
		attrs = append(attrs, slog.Any(snakeCase(v.Type().Field(i).Name), v.Field(i).Interface()))
	}
	return slog.GroupValue(attrs...)
}

// snakeCase turns a Go field name into a log key, a word starting at an
// upper-case letter between a lower-case one and a lower-case one:
// KernelStamps is kernel_stamps, KoD is kod.
func snakeCase(name string) string {
	var b strings.Builder
	r := []rune(name)
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 && unicode.IsLower(r[i-1]) && i+1 < len(r) && unicode.IsLower(r[i+1]) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
