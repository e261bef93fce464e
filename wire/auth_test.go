package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gclock/gclock/engine"
)

func key(id uint32, b byte) Key { return Key{ID: id, Secret: bytes.Repeat([]byte{b}, MinKeyLen)} }

func sealedProbe(t testing.TB, r *Keyring, seq uint64) []byte {
	p := Packet{Op: OpProbe, Sender: 3, Seq: 9, Msg: engine.Message{Type: engine.MsgProbe, From: 3, To: 4, Round: 2}}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return r.Seal(b, 4, seq)
}

func TestSealOpen(t *testing.T) {
	r, err := NewKeyring(1, []Key{key(1, 7)})
	if err != nil {
		t.Fatal(err)
	}
	b := sealedProbe(t, r, 1234)
	pkt, tr, err := r.Open(b)
	if err != nil || tr != (Trailer{KeyID: 1, Dest: 4, Seq: 1234}) || len(pkt) != len(b)-AuthLen {
		t.Fatalf("Open = %d bytes, %+v, %v", len(pkt), tr, err)
	}
	var p Packet
	if err := p.UnmarshalBinary(pkt); err != nil || p.Msg.Round != 2 {
		t.Fatalf("opened datagram: %+v, %v", p, err)
	}
	// Every bit of the datagram is covered: header, body, key id, sequence
	// number and tag.
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if _, _, err := r.Open(c); err == nil {
				t.Fatalf("byte %d bit %d flipped: opened", i, bit)
			}
		}
	}
	// A truncated datagram, an appended byte.
	if _, _, err := r.Open(b[:len(b)-1]); err == nil {
		t.Fatal("truncated datagram opened")
	}
	if _, _, err := r.Open(append(bytes.Clone(b), 0)); err == nil {
		t.Fatal("extended datagram opened")
	}
}

func TestOpenErrors(t *testing.T) {
	r, _ := NewKeyring(1, []Key{key(1, 7)})
	other, _ := NewKeyring(1, []Key{key(1, 8)})
	unknown, _ := NewKeyring(2, []Key{key(2, 7)})
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"short", make([]byte, HeaderLen+AuthLen-1), ErrShort},
		{"unsealed", make([]byte, 60), ErrUnknownKey},
		{"another secret", sealedProbe(t, other, 1), ErrBadTag},
		{"unknown key id", sealedProbe(t, unknown, 1), ErrUnknownKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := r.Open(tt.in)
			var ae *AuthError
			if !errors.As(err, &ae) || !errors.Is(err, tt.want) {
				t.Fatalf("Open = %v, want an *AuthError wrapping %v", err, tt.want)
			}
		})
	}
}

// TestKeyringRotation: during a rotation a node sends with the new key and
// accepts both; one still on the old key is accepted by it.
func TestKeyringRotation(t *testing.T) {
	oldOnly, _ := NewKeyring(1, []Key{key(1, 1)})
	both, err := NewKeyring(2, []Key{key(1, 1), key(2, 2)})
	if err != nil {
		t.Fatal(err)
	}
	newOnly, _ := NewKeyring(2, []Key{key(2, 2)})
	if _, tr, err := both.Open(sealedProbe(t, oldOnly, 1)); err != nil || tr.KeyID != 1 {
		t.Fatalf("old key refused during the rotation: %v", err)
	}
	if _, tr, err := both.Open(sealedProbe(t, newOnly, 1)); err != nil || tr.KeyID != 2 {
		t.Fatalf("new key refused: %v", err)
	}
	if _, _, err := oldOnly.Open(sealedProbe(t, both, 1)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("a node without the new key opened it: %v", err)
	}
	for _, tt := range []struct {
		send uint32
		keys []Key
	}{
		{1, []Key{{ID: 1, Secret: make([]byte, MinKeyLen-1)}}},
		{1, []Key{key(1, 1), key(1, 2)}},
		{3, []Key{key(1, 1)}},
	} {
		if _, err := NewKeyring(tt.send, tt.keys); err == nil {
			t.Errorf("NewKeyring(%d, %d keys) accepted", tt.send, len(tt.keys))
		}
	}
}

// TestLinkKeys: with link keys (LinkKey) a node that holds its own cannot
// seal a datagram that another node takes for a third's, nor can the
// holder of the cluster key without deriving; both ends of a link derive
// the same key; a node without a link key to a destination cannot seal for
// it; a mixed keyring still hears a tool on the cluster key.
func TestLinkKeys(t *testing.T) {
	master := key(7, 9)
	links := func(self uint32, peers ...uint32) *Keyring {
		var ks []Key
		for _, p := range peers {
			ks = append(ks, LinkKey(master, self, p))
		}
		r, err := NewKeyring(7, ks)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k1, k2, k3 := links(1, 2, 3), links(2, 1, 3), links(3, 1, 2)
	cluster, _ := NewKeyring(7, []Key{master})
	mixed, _ := NewKeyring(7, []Key{master, LinkKey(master, 2, 1), LinkKey(master, 2, 3)})
	probe := func(sender, to uint32) []byte {
		p := Packet{Op: OpProbe, Sender: sender, Seq: 9, Msg: engine.Message{Type: engine.MsgProbe, From: engine.NodeID(sender), To: engine.NodeID(to), Round: 2}}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		seal *Keyring
		from uint32 // the header's sender
		to   uint32
		open *Keyring
		want error // nil: opens
	}{
		{"node 1 to node 2", k1, 1, 2, k2, nil},
		{"node 2 to node 1", k2, 2, 1, k1, nil},
		{"node 3 to node 2", k3, 3, 2, k2, nil},
		{"node 3 poses as node 1 to node 2", k3, 1, 2, k2, ErrBadTag},
		{"node 3 poses as node 1 to node 2, mixed keyring", k3, 1, 2, mixed, ErrBadTag},
		{"the cluster key poses as node 1 to node 2", cluster, 1, 2, k2, ErrBadTag},
		{"the cluster key poses as node 1 to a mixed keyring", cluster, 1, 2, mixed, ErrBadTag},
		{"a tool on the cluster key to a mixed keyring", cluster, 99, 2, mixed, nil},
		{"a tool on the cluster key to link keys only", cluster, 99, 2, k2, ErrUnknownKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.seal.Seal(probe(tt.from, tt.to), tt.to, 5)
			if b == nil {
				t.Fatal("nothing sealed")
			}
			_, tr, err := tt.open.Open(b)
			if tt.want == nil && (err != nil || tr.Dest != tt.to || tr.Seq != 5) {
				t.Fatalf("Open: %+v, %v", tr, err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Open: %v, want %v", err, tt.want)
			}
		})
	}
	if k2.CanSeal(5) || k2.Seal(probe(2, 5), 5, 1) != nil {
		t.Error("sealed for node 5 without a link key with it")
	}
	if !mixed.CanSeal(5) || !k2.CanSeal(3) {
		t.Error("cannot seal with a key it has")
	}
	if a, b := LinkKey(master, 1, 2), LinkKey(master, 2, 1); !bytes.Equal(a.Secret, b.Secret) || bytes.Equal(a.Secret, LinkKey(master, 1, 3).Secret) {
		t.Error("link keys: the two ends differ, or two links share a key")
	}
	if _, err := NewKeyring(7, []Key{LinkKey(master, 2, 1), LinkKey(master, 2, 1)}); err == nil {
		t.Error("a link key given twice accepted")
	}
}

// TestReplayWindow follows RFC 4303 section 3.4.3: new numbers above the
// top move it; numbers within the 64 below it are accepted once; older
// ones are refused; and (issue 17) a number more than MaxSeqJump above
// the top is refused instead of moving the window past every real one.
func TestReplayWindow(t *testing.T) {
	var w ReplayWindow
	steps := []struct {
		seq  uint64
		want Verdict
	}{
		{1000, Fresh}, {1000, Seen}, {999, Fresh}, {999, Seen}, {1001, Fresh},
		{1001 - 63, Fresh}, {1001 - 64, Old}, // the window holds top and the 63 below
		{1100, Fresh}, {1001, Old}, {1100 - 63, Fresh}, {1100 - 63, Seen},
		{1 << 63, Jump}, {1100 + MaxSeqJump + 1, Jump}, {1101, Fresh}, // a key holder's 2^63 moves nothing
		{1101 + MaxSeqJump, Fresh}, {1101, Old},
	}
	for i, s := range steps {
		v := w.Check(s.seq)
		if v != s.want {
			t.Fatalf("step %d: Check(%d) = %v, want %v (top %d)", i, s.seq, v, s.want, w.Top())
		}
		if v == Fresh {
			w.Accept(s.seq)
		}
	}
	// A rebase (a challenge's answer) takes the window down as well as up.
	w.Rebase(500)
	if w.Top() != 500 || w.Check(500) != Seen || w.Check(499) != Seen || w.Check(400) != Old || w.Check(501) != Fresh {
		t.Fatalf("after Rebase(500): top %d, %v %v %v %v", w.Top(), w.Check(500), w.Check(499), w.Check(400), w.Check(501))
	}
}

func FuzzOpen(f *testing.F) {
	r, _ := NewKeyring(1, []Key{key(1, 7)})
	f.Add(sealedProbe(f, r, 5))
	f.Add([]byte("GC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pkt, tr, err := r.Open(b)
		if err == nil && len(pkt) != len(b)-AuthLen {
			t.Fatalf("opened %d bytes of %d", len(pkt), len(b))
		}
		// Sealing what opened gives the same bytes back (the tag is a
		// function of the rest).
		if err == nil {
			if got := r.Seal(bytes.Clone(pkt), tr.Dest, tr.Seq); !bytes.Equal(got, b) {
				t.Fatal("reseal differs")
			}
		}
	})
}

// BenchmarkOpen is the cost a receiver pays per datagram it checks, a
// forged one included (docs/daemon.md, "Security").
func BenchmarkOpen(b *testing.B) {
	r, _ := NewKeyring(1, []Key{key(1, 7)})
	d := sealedProbe(b, r, 5)
	b.SetBytes(int64(len(d)))
	for b.Loop() {
		if _, _, err := r.Open(d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	r, _ := NewKeyring(1, []Key{key(1, 7)})
	p := Packet{Op: OpProbe, Sender: 3, Seq: 9, Msg: engine.Message{Type: engine.MsgProbe, From: 3, To: 4, Round: 2}}
	buf := make([]byte, 0, MaxPacket)
	n, _ := p.MarshalBinaryTo(buf[:MaxPacket])
	b.SetBytes(int64(n + AuthLen))
	for b.Loop() {
		r.Seal(buf[:n], 4, 5)
	}
}
