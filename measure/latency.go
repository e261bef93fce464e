package measure

import (
	"context"
	"fmt"
	"time"

	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// maxRx bounds the latency messages in flight at a receiver: the sender
// sends one every Period, in at most two datagrams, so a handful are ever
// incomplete at once; more are a forger's, or lost.
const maxRx = 64

// rxState is a latency message being received, datagram by datagram.
type rxState struct {
	got, bytes int
	last       int64 // raw stamp of the latest datagram
}

// latencyMsg says who sends message e and how large it is: for each size,
// Count messages each way, alternating directions; with Interleave, one
// message each way of every size in turn, Count times over.
func (n *node) latencyMsg(e int) (from, size int) {
	if n.cfg.Interleave {
		return e % 2, n.cfg.Sizes[(e/2)%len(n.cfg.Sizes)]
	}
	per := 2 * n.cfg.Count
	return e % 2, n.cfg.Sizes[e/per]
}

// latency sends this node's messages at their scheduled instants, Period
// apart; the other node's arrive through latencyRx.
func (n *node) latency(ctx context.Context, s0 int64) error {
	total := 2 * n.cfg.Count * len(n.cfg.Sizes)
	peer := 1 - n.cfg.Rank
	for e := range total {
		from, size := n.latencyMsg(e)
		if from != n.cfg.Rank {
			continue
		}
		if err := n.waitUntil(ctx, s0+int64(e)*n.cfg.Period.Nanoseconds()); err != nil {
			return err
		}
		chunks := (size + maxChunk - 1) / maxChunk
		var txRaw int64
		for ci := range chunks {
			b := make([]byte, min(maxChunk, size-ci*maxChunk))
			tm, err := n.c.ep.Send(ctx, n.cfg.Peers[peer], &wire.Packet{Op: wire.OpPut, Page: wire.Page{Addr: tag(e, ci, phaseLatency, chunks), Data: b}})
			if err != nil {
				return fmt.Errorf("latency message %d: %w", e, err)
			}
			if ci == 0 {
				txRaw = tm.SendStamp()
			}
		}
		if err := n.stampAt(txRaw, e, ModeLatency, EventTx, peer, size, 0); err != nil {
			return err
		}
	}
	// Let the last messages arrive before the final barrier.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(50 * time.Millisecond):
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastRx
}

// latencyRx takes the latency test's datagrams off the receive loop: when
// the last datagram of a message is in, the message is stamped at that
// datagram's kernel receive stamp.
//
// Only the messages the other node is to send are taken: e in range, sent
// by the node whose turn it is, in as many datagrams as its size needs,
// each stamped once; at most maxRx are in flight (the oldest forgotten).
func (n *node) latencyRx(in *transport.Incoming) bool {
	t := in.Packet.Page.Addr
	if uint8(t>>8) != phaseLatency {
		return false
	}
	e, chunks := int(uint32(t>>32)), int(uint8(t))
	if e < 0 || e >= 2*n.cfg.Count*len(n.cfg.Sizes) {
		return true // not a message of this test: dropped
	}
	from, size := n.latencyMsg(e)
	if from != int(in.Packet.Sender)-1 || from == n.cfg.Rank || chunks != (size+maxChunk-1)/maxChunk {
		return true
	}
	raw := in.RecvStamp()
	n.mu.Lock()
	if n.rxDone[e] {
		n.mu.Unlock()
		return true
	}
	st := n.rx[e]
	if st == nil {
		if len(n.rx) >= maxRx {
			oldest := -1
			for k := range n.rx {
				if oldest < 0 || k < oldest {
					oldest = k
				}
			}
			delete(n.rx, oldest)
		}
		st = &rxState{}
		n.rx[e] = st
	}
	st.got++
	st.bytes += len(in.Packet.Page.Data)
	st.last = max(st.last, raw)
	done := st.got == chunks
	if done {
		delete(n.rx, e)
		n.rxDone[e] = true
	}
	n.mu.Unlock()
	if done {
		if err := n.stampAt(st.last, e, ModeLatency, EventRx, int(in.Packet.Sender)-1, st.bytes, 0); err != nil {
			n.mu.Lock()
			n.lastRx = err
			n.mu.Unlock()
		}
	}
	return true
}
