// Package logfields logs a struct of counters as one slog field each
// (received=12 kernel_stamps=3 ...), so that a JSON log has numbers, not a
// Go struct in a string. The daemon's transport and NTP server statistics
// use it in their LogValue methods.
package logfields

import (
	"log/slog"
	"reflect"
	"strings"
	"unicode"
)

// Of returns every exported field of the struct s as a group of
// snake_case keys; any other value is logged as it is.
func Of(s any) slog.Value {
	v := reflect.ValueOf(s)
	if v.Kind() != reflect.Struct {
		return slog.AnyValue(s)
	}
	attrs := make([]slog.Attr, 0, v.NumField())
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		attrs = append(attrs, slog.Any(SnakeCase(f.Name), v.Field(i).Interface()))
	}
	return slog.GroupValue(attrs...)
}

// SnakeCase turns a Go field name into a log key, a word starting at an
// upper-case letter between a lower-case one and a lower-case one:
// KernelStamps is kernel_stamps, DupRequests dup_requests, KoD kod.
func SnakeCase(name string) string {
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
