package daemon

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
)

// measurementsLog writes log.measurements: one CSV line per exchange a
// node receives from a source, as the engine gets it (kernel stamps where
// there are some). Nothing in it is read back by the daemon; it is for
// looking at a link's delays after a run (docs/lab.md uses it).
type measurementsLog struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	buf []byte
	err error // the first write error; later writes are skipped
}

// measurementsHeader names the columns: src_send and src_recv are on the
// source's clock, loc_recv and loc_send on this node's, all in ns.
const measurementsHeader = "source,src_send_ns,loc_recv_ns,loc_send_ns,src_recv_ns,rtt_ns\n"

func newMeasurementsLog(path string) (*measurementsLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	l := &measurementsLog{f: f, w: bufio.NewWriterSize(f, 64<<10)}
	if _, err := l.w.WriteString(measurementsHeader); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

func (l *measurementsLog) write(from engine.NodeID, ss []estimate.Sample) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	for _, s := range ss {
		b := l.buf[:0]
		b = strconv.AppendUint(b, uint64(from), 10)
		for _, v := range [...]int64{s.SrcSend, s.LocRecv, s.LocSend, s.SrcRecv, s.RTT()} {
			b = append(b, ',')
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, '\n')
		l.buf = b
		if _, err := l.w.Write(b); err != nil {
			l.err = err
			return
		}
	}
	// Flushed per message (a few per second): a killed daemon loses nothing.
	if err := l.w.Flush(); err != nil {
		l.err = err
	}
}

// Close flushes and closes the file and returns the first write error.
func (l *measurementsLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = l.w.Flush()
	}
	if err := l.f.Close(); l.err == nil {
		l.err = err
	}
	return l.err
}
