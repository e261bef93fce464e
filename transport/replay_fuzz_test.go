package transport

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/gclock/gclock/wire"
)

// FuzzReplayWindow drives one receiver's admission gate (node 2) with
// sequences of node 1's datagrams, replays, a key holder's forgeries,
// restarts of either node, clock steps back, pauses, and challenges
// answered, late or lost. Not a decoder fuzz: the properties are the
// replay window's (issue 17, item 7):
//
//  1. no datagram of node 1 is accepted twice, nor after node 2 restarted
//     when it was sent before (unless node 1's counter went back across
//     one of its own restarts, the documented exception);
//  2. whatever came before, once the key holder stops, node 1 is heard
//     again within three of its datagrams, each after a challenge's
//     round trip at most.
func FuzzReplayWindow(f *testing.F) {
	f.Add([]byte{0, 0, 0, 8, 0, 0, 4, 2, 0, 2, 1, 0, 8, 0})
	f.Add([]byte{0, 0, 3, 0, 0, 0, 8, 0, 0, 0})                   // the 2^63 probe
	f.Add([]byte{0, 1, 1, 0, 4, 2, 0, 2, 1, 2, 2, 8, 2, 0, 2, 1}) // replays across a restart
	f.Add([]byte{0, 0, 5, 3, 0, 8, 0, 6, 9, 0, 8, 0, 7, 40, 0})   // sender restarts, clock back, pause
	f.Add([]byte{3, 1, 0x10, 0, 3, 2, 0xff, 0xff, 0, 0, 9, 0, 8, 0})
	f.Add([]byte{0, 0, 8, 0, 3, 4, 3, 9, 3, 14, 3, 19, 0, 0}) // node 1's next four numbers forged
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 400 {
			return
		}
		kr := testKeyring(t, 1, 1)
		peers := map[uint32]netip.AddrPort{1: meshAddr(1), 2: meshAddr(2), 3: meshAddr(3)}
		cfg := &Config{ID: 2, Keyring: kr, Peers: peers}
		g := newGate(cfg)
		now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
		type datagram struct {
			b      []byte
			epoch  int  // node 2's incarnation when node 1 sent it
			exempt bool // node 1's counter went back since
			honest bool
		}
		var (
			sent     []datagram
			accepted = map[int]int{} // datagram index -> node 2's epoch of acceptance
			epoch    int
			counter  = uint64(1) << 60 // node 1's counter toward node 2
			pending  []uint64          // nonces of node 2's challenges to node 1 not yet answered
		)
		build := func(p wire.Packet, seq uint64, dest uint32) []byte {
			b, err := p.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			return kr.Seal(b, dest, seq)
		}
		deliver := func(i int) (reason string) {
			d := sent[i]
			_, v := g.admit(bytes.Clone(d.b), meshAddr(1), now)
			if v.challenge == 1 {
				if nonce, ok := g.challengeFor(1, now, challengeEvery); ok {
					pending = append(pending, nonce)
				}
			}
			if v.reason != "" || !d.honest {
				return v.reason
			}
			if v.consumed {
				return ""
			}
			if e, ok := accepted[i]; ok {
				t.Fatalf("datagram %d accepted twice (epochs %d and %d)", i, e, epoch)
			}
			if d.epoch != epoch && !d.exempt {
				t.Fatalf("datagram %d sent in node 2's epoch %d accepted in epoch %d", i, d.epoch, epoch)
			}
			accepted[i] = epoch
			return ""
		}
		send := func(p wire.Packet, seq uint64, dest uint32, honest bool) int {
			p.Seq = uint32(len(sent))
			sent = append(sent, datagram{b: build(p, seq, dest), epoch: epoch, honest: honest})
			return len(sent) - 1
		}
		getp := wire.Packet{Op: wire.OpGetPage, Sender: 1}
		honestSend := func() int {
			counter++
			return send(getp, counter, 2, true)
		}
		answer := func(k int) int {
			nonce := pending[k]
			pending = append(pending[:k], pending[k+1:]...)
			counter++
			return send(wire.Packet{Op: wire.OpAuthResponse, Sender: 1, Nonce: nonce}, counter, 2, true)
		}
		arg := func(i int) byte {
			if i < len(ops) {
				return ops[i]
			}
			return 0
		}
		for i := 0; i < len(ops); i += 2 {
			a := arg(i + 1)
			switch ops[i] % 10 {
			case 0: // node 1 sends, delivered
				deliver(honestSend())
			case 1: // node 1 sends, lost (captured)
				honestSend()
			case 2: // a replay of anything captured
				if len(sent) > 0 {
					deliver(int(a) % len(sent))
				}
			case 3: // a key holder seals a datagram as node 1
				var seq uint64
				switch a % 5 {
				case 0:
					seq = 1 << 63
				case 1:
					seq = counter + uint64(a)*uint64(a)*7
				case 2:
					seq = counter + wire.MaxSeqJump + uint64(a)
				case 3:
					seq = counter - uint64(a)
				case 4: // node 1's next numbers, before node 1 uses them
					seq = counter + 1 + uint64(a/5)%4
				}
				dest := uint32(2)
				if a%16 == 15 {
					dest = uint32(a) % 4
				}
				deliver(send(getp, seq, dest, false))
			case 4: // node 2 restarts: its windows are gone
				g = newGate(cfg)
				epoch++
				pending = nil
			case 5: // node 1 restarts, its counter from the wall clock
				counter += uint64(a+1) * 1e9
			case 6: // node 1 restarts with its wall clock stepped back
				counter -= uint64(a) * 1e6
				for j := range sent {
					sent[j].exempt = true
				}
			case 7: // a pause
				now = now.Add(time.Duration(a) * 10 * time.Millisecond)
			case 8: // node 1 answers a challenge (any pending one, late ones too)
				if len(pending) > 0 {
					deliver(answer(int(a) % len(pending)))
				}
			case 9: // node 2's challenges are lost
				pending = nil
			}
		}
		// The key holder stops: node 1 must be heard within three
		// datagrams, answering each challenge at once.
		for try := 0; ; try++ {
			if try == 3 {
				t.Fatalf("node 1 not heard after 3 datagrams (window top %d, node 1 at %d, %d pending)",
					g.windows[1].w.Top(), counter, len(pending))
			}
			now = now.Add(challengeEvery)
			if deliver(honestSend()) == "" {
				break
			}
			if len(pending) > 0 {
				if r := deliver(answer(len(pending) - 1)); r != "" {
					t.Fatalf("answer to the latest challenge dropped: %s", r)
				}
			}
		}
	})
}
