package sim

import (
	"log/slog"
	"math"

	"github.com/gclock/gclock/engine"
)

// cristian is a stand-in engine for a star: every period a child probes its
// source (the reference), which answers with its clock; the child keeps the
// last exchange and bounds global time by the round trip and MaxDrift.
type cristian struct {
	cfg    engine.Config
	out    engine.Ready
	next   int64
	sentAt map[uint32]int64
	seq    uint32
	have   bool
	x, y   int64 // local receive time; source time of the exchange
	rtt    int64
}

func newCristian(cfg engine.Config, _ *slog.Logger) (Node, error) {
	return &cristian{cfg: cfg, sentAt: map[uint32]int64{}}, nil
}

const cristianPeriod = int64(500e6)

func (c *cristian) Tick(local int64) {
	if len(c.cfg.Sources) == 0 {
		return
	}
	if c.next == 0 || local >= c.next {
		c.seq++
		c.sentAt[c.seq] = local
		c.out.Messages = append(c.out.Messages, engine.Message{Type: engine.MsgProbe, From: c.cfg.ID, To: c.cfg.Sources[0], Seq: c.seq})
		c.next = local + cristianPeriod
	}
	c.out.NextTick = c.next
}

func (c *cristian) Step(m engine.Message, local int64) {
	switch m.Type {
	case engine.MsgProbe:
		c.out.Messages = append(c.out.Messages, engine.Message{Type: engine.MsgProbeReply, From: c.cfg.ID, To: m.From, Seq: m.Seq, T2: local, T3: local})
	case engine.MsgProbeReply:
		s, ok := c.sentAt[m.Seq]
		if !ok {
			return
		}
		delete(c.sentAt, m.Seq)
		c.have, c.x, c.y, c.rtt = true, local, m.T2, local-s
		c.out.Events = append(c.out.Events, engine.Event{Local: local, Kind: engine.EvGlobalResync})
	}
	c.out.NextTick = c.next
}

func (c *cristian) Ready() engine.Ready {
	r := c.out
	c.out = engine.Ready{NextTick: c.next}
	return r
}

func (c *cristian) Read(local int64) engine.Time {
	u := int64(c.cfg.ReadUncertainty) // the reading's own granularity and jitter
	if len(c.cfg.Sources) == 0 {
		return engine.Time{Est: local, Earliest: local - u, Latest: local + u, Mono: local, Status: engine.StatusSynced}
	}
	if !c.have {
		return engine.Time{Est: local, Earliest: math.MinInt64, Latest: math.MaxInt64, Mono: local}
	}
	// The source's reading y was taken between our send and receive: the
	// global time at our receive x is in [y, y + rtt*(1+drift)], then both
	// ends drift apart by MaxDrift per ns since.
	g := int64(c.cfg.Granularity)
	dx := local - c.x
	spread := int64(math.Ceil(c.cfg.MaxDrift*float64(max(dx, 0)+c.rtt))) + 2*g + 2*u
	lo := c.y + dx - spread
	hi := c.y + c.rtt + dx + spread
	est := lo + (hi-lo)/2
	return engine.Time{Est: est, Earliest: lo, Latest: hi, Mono: est, Status: engine.StatusSynced}
}
