//go:build !linux

package daemon

import "errors"

// adjtimex is Linux's: elsewhere the upstream cannot be read, and the
// reference serves no synced UTC unless real_time.upstream is none.
func adjtimex() (kernelTimex, error) {
	return kernelTimex{}, errors.New("adjtimex: the kernel clock state is read on Linux only (set real_time.upstream none)")
}
