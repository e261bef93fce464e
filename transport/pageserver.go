package transport

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/gclock/gclock/wire"
)

// PageSize is Mocha's page: 8 KB.
const PageSize = 8192

// PageServer is the responder of the page-transfer workload (Mocha's
// getpserver): it answers OpGetPage with an OpPageGrant carrying a page of
// PageSize bytes whose content is a function of the address, so that a
// client can check every byte it gets (FillPage).
type PageServer struct {
	// PageSize is the size of every page served, in [0, wire.MaxPageData].
	PageSize int
	// OnMessage, when set, receives one-way messages.
	OnMessage func(in *Incoming)

	served atomic.Uint64
	buf    []byte
}

// Served returns how many distinct requests the handler answered (repeats
// served from the reply cache are not counted).
func (s *PageServer) Served() uint64 { return s.served.Load() }

// HandleRequest answers OpGetPage; other requests are refused.
func (s *PageServer) HandleRequest(in *Incoming, reply *wire.Packet) error {
	p := in.Packet
	if p.Op.Kind() != wire.OpGetPage {
		return fmt.Errorf("transport: page server: op %v not served", p.Op)
	}
	if s.PageSize < 0 || s.PageSize > wire.MaxPageData {
		return fmt.Errorf("transport: page server: PageSize %d outside [0, %d]", s.PageSize, wire.MaxPageData)
	}
	if len(s.buf) != s.PageSize {
		s.buf = make([]byte, s.PageSize)
	}
	// The receive loop encodes the reply before the next call, so one
	// buffer serves every request.
	FillPage(s.buf, p.Page.Addr)
	reply.Page = wire.Page{Addr: p.Page.Addr, Data: s.buf}
	s.served.Add(1)
	return nil
}

// HandleMessage passes one-way messages to OnMessage.
func (s *PageServer) HandleMessage(in *Incoming) {
	if s.OnMessage != nil {
		s.OnMessage(in)
	}
}

// FillPage writes the content of page addr into b: the address, then bytes
// that depend on the address and the position.
func FillPage(b []byte, addr uint64) {
	var a [8]byte
	binary.BigEndian.PutUint64(a[:], addr)
	n := copy(b, a[:])
	x := uint32(addr) * 2654435761
	for i := n; i < len(b); i++ {
		b[i] = byte(x>>24) ^ byte(i)
	}
}

// CheckPage reports whether b is page addr of size n as FillPage makes it.
func CheckPage(b []byte, addr uint64, n int) error {
	if len(b) != n {
		return fmt.Errorf("page %d: %d bytes, want %d", addr, len(b), n)
	}
	var a [8]byte
	binary.BigEndian.PutUint64(a[:], addr)
	x := byte((uint32(addr) * 2654435761) >> 24)
	for i, v := range b {
		want := x ^ byte(i)
		if i < 8 {
			want = a[i]
		}
		if v != want {
			return fmt.Errorf("page %d: byte %d is 0x%02x, want 0x%02x", addr, i, v, want)
		}
	}
	return nil
}
