package transport

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/wire"
)

// Issue 29, item 2: no amplification or denial by replay. A challenge
// captured on its way from node 1 to node 2 and replayed to node 2 must
// not be answered every time: on main every copy was answered (one HMAC
// check, a seal and a send each, 1:1), and every answer moved node 2's
// counter toward node 1, so that an unthrottled flood pushed node 2's next
// real datagram past wire.MaxSeqJump and node 1 refused it.

// challengeLink counts the challenge answers node 2 sends and keeps the
// challenges node 1 sends, as an attacker on the path would.
type challengeLink struct {
	mu       sync.Mutex
	answers  int
	captured [][]byte
}

func (c *challengeLink) link() memnet.Link {
	return memnet.Link{Delay: 200 * time.Microsecond, Drop: func(b []byte) bool {
		if len(b) < wire.HeaderLen {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		switch sender, op := binary.BigEndian.Uint32(b[4:]), wire.Op(b[3]).Kind(); {
		case sender == 2 && op == wire.OpAuthResponse:
			c.answers++
		case sender == 1 && op == wire.OpAuthChallenge:
			c.captured = append(c.captured, append([]byte(nil), b...))
		}
		return false
	}}
}

func (c *challengeLink) counts() (answers int, captured [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answers, c.captured
}

// TestChallengeReplaysAnsweredOnce: 1000 copies of node 1's challenge at
// once get no answer (one was answered less than challengeEvery ago),
// after a pause at most one; a flood of 1000 a second for 3 s at most one
// per challengeEvery; and node 1 still hears node 2 after it. Each refused
// copy counts as DropChallenge.
func TestChallengeReplaysAnsweredOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		nw := memnet.New(7)
		cl := &challengeLink{}
		nw.SetLink(cl.link())
		kr := testKeyring(t, 1, 1)
		one, _ := meshNode(t, ctx, nw, kr, 1, 2, nil)
		two, _ := meshNode(t, ctx, nw, kr, 2, 2, newRecorder())
		if err := getPage(ctx, one, meshAddr(2), 1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		before, captured := cl.counts()
		if len(captured) == 0 {
			t.Fatal("node 1 sent node 2 no challenge")
		}
		chal := captured[0]
		const burst = 1000
		for range burst {
			nw.Deliver(chal, meshAddr(1), meshAddr(2))
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if got, _ := cl.counts(); got-before > 1 {
			t.Errorf("%d replays of one challenge at once got %d answers, want at most 1", burst, got-before)
		}
		// A flood: 1000 a second for 3 s.
		before, _ = cl.counts()
		const flood = 3 * time.Second
		for range 3000 {
			nw.Deliver(chal, meshAddr(1), meshAddr(2))
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		got, _ := cl.counts()
		if want := int(flood/challengeEvery) + 1; got-before > want {
			t.Errorf("3000 replays over %v got %d answers, want at most %d (one per %v)", flood, got-before, want, challengeEvery)
		}
		st := two.Stats()
		t.Logf("answers to %d replays: %d; node 2: %+v", burst+3000, got-before, st)
		if st.ChallengesRefused < burst+3000-uint64(flood/challengeEvery)-2 || st.Drops()[DropChallenge] != st.ChallengesRefused {
			t.Errorf("refused challenges counted %d (drops %v), want about %d", st.ChallengesRefused, st.Drops(), burst+3000)
		}
		if err := getPage(ctx, one, meshAddr(2), 2); err != nil {
			t.Errorf("node 1 no longer hears node 2 after the replays: %v (%+v)", err, one.Stats())
		}
	})
}

// TestChallengeFloodKeepsPeerHeard: replays far beyond wire.MaxSeqJump
// between two requests of node 1 leave node 1 hearing node 2's replies
// at once. On main each replay was answered and moved node 2's counter
// toward node 1, so node 2's next reply jumped and node 1 refused it.
func TestChallengeFloodKeepsPeerHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		nw := memnet.New(8)
		cl := &challengeLink{}
		nw.SetLink(cl.link())
		kr := testKeyring(t, 1, 1)
		one, _ := meshNode(t, ctx, nw, kr, 1, 2, nil)
		meshNode(t, ctx, nw, kr, 2, 2, newRecorder())
		if err := getPage(ctx, one, meshAddr(2), 1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		_, captured := cl.counts()
		chal := captured[0]
		for round := range 3 {
			for range wire.MaxSeqJump/2048 + 1 {
				for range 2048 { // below memnet's queue
					nw.Deliver(chal, meshAddr(1), meshAddr(2))
				}
				synctest.Wait()
			}
			jumps := one.Stats().SeqJumps
			rctx, stop := context.WithTimeout(ctx, 5*time.Millisecond)
			err := getPage(rctx, one, meshAddr(2), uint64(10+round))
			stop()
			if err != nil || one.Stats().SeqJumps != jumps {
				t.Fatalf("round %d: node 1 did not hear node 2 within 5 ms after %d replayed challenges: %v (seq jumps %d -> %d)", round, wire.MaxSeqJump, err, jumps, one.Stats().SeqJumps)
			}
		}
	})
}
