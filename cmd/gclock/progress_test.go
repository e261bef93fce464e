package main

import (
	"bytes"
	"testing"
)

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b, tty: true}
	p.Write([]byte("sim:  10.0%\n"))
	p.Write([]byte("sim:  20.0%\n"))
	p.done()
	if got, want := b.String(), "\r\x1b[Ksim:  10.0%\r\x1b[Ksim:  20.0%\n"; got != want {
		t.Errorf("terminal: %q, want %q", got, want)
	}
	b.Reset()
	p = &progress{w: &b}
	p.Write([]byte("sim:  10.0%\n"))
	p.done()
	if got := b.String(); got != "sim:  10.0%\n" {
		t.Errorf("not a terminal: %q", got)
	}
}
