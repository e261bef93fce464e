// Package usage marks the errors of a command line that was typed wrong, so
// that gclock and gclockd print them once and exit 2, as flag-based tools
// and chronyc do, while a command that failed at its work exits 1.
//
//	if err := usage.Parse(fs, args); err != nil {
//		return err // flag already printed the error and the usage: exit 2, nothing more printed
//	}
//	if fs.NArg() != 1 {
//		return usage.Errorf("want one server (see gclock ntp-query -h)") // printed once by main, exit 2
//	}
package usage

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// ExitCode is the exit status of a usage error.
const ExitCode = 2

// Error is a usage error. Printed is true when the flag package has already
// written it (and the command's usage) to the flag set's output, so the
// caller must not print it again.
type Error struct {
	Err     error
	Printed bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Parse parses args with fs. A parse error comes back as an *Error that says
// it was printed (flag.ContinueOnError writes it with the usage); -h comes
// back as flag.ErrHelp, unchanged.
//
// A flag given by an old name (Alias) works as its new name and gets one
// line on fs's output saying so.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		fs.Visit(func(f *flag.Flag) {
			if now, ok := strings.CutPrefix(f.Usage, aliasPrefix); ok {
				fmt.Fprintf(fs.Output(), "%s: -%s is deprecated, use -%s (same meaning)\n", fs.Name(), f.Name, now)
			}
		})
		return err
	}
	return &Error{Err: err, Printed: true}
}

// aliasPrefix starts the usage of an old flag name.
const aliasPrefix = "deprecated name of -"

// Alias keeps old working as another name of the flag now, already defined
// in fs, for command lines written before the rename; Parse says so when
// it is used.
func Alias(fs *flag.FlagSet, old, now string) {
	f := fs.Lookup(now)
	if f == nil {
		panic("usage.Alias: no flag -" + now)
	}
	fs.Var(f.Value, old, aliasPrefix+now)
}

// Errorf returns a usage error that the caller's main prints.
func Errorf(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...)}
}

// Is reports whether err is a usage error, and whether it was printed already.
func Is(err error) (isUsage, printed bool) {
	var u *Error
	if errors.As(err, &u) {
		return true, u.Printed
	}
	return false, false
}
