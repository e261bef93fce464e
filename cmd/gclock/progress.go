package main

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// progress writes a long run's progress lines: on a terminal it redraws one
// line (carriage return, clear to the end of the line) and ends it at done;
// elsewhere (a file, a pipe, CI's log) it writes each line as it comes.
type progress struct {
	w     io.Writer
	tty   bool
	drawn bool
}

func newProgress(f *os.File) *progress {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return &progress{w: f, tty: err == nil}
}

func (p *progress) Write(b []byte) (int, error) {
	if !p.tty {
		return p.w.Write(b)
	}
	line := bytes.TrimRight(b, "\n")
	p.drawn = true
	if _, err := p.w.Write(append([]byte("\r\x1b[K"), line...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// done ends a redrawn line, so that what follows starts on its own.
func (p *progress) done() {
	if p.tty && p.drawn {
		p.w.Write([]byte("\n"))
		p.drawn = false
	}
}
