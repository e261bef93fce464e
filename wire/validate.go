package wire

import (
	"github.com/gclock/gclock/engine"
)

// Physical limits of what the engine messages carry. A datagram outside
// them is no sender's output: the decoder refuses it (ErrValue) before
// anything reaches the engine, and the encoder refuses to send it. The
// engine checks the same limits again (engine.CheckMessage) for drivers
// that do not go through this package.
const (
	// MaxTime bounds every timestamp and mapping anchor: |t| < 2^62 ns
	// (146 years), so that differences of two of them cannot overflow.
	MaxTime = engine.MaxMsgTime
	// MaxSkew bounds |Mapping.Skew|: 1e-3 = 1000 ppm, ten times the worst
	// crystal the engine's MaxDrift is meant for (100 ppm).
	MaxSkew = engine.MaxMsgSkew
	// MaxSkewErr bounds Mapping.SkewErr; MaxWander bounds Mapping.Wander
	// (per ns per ns); MaxWidth bounds Mapping.W0 (the engine's
	// "unbounded" width, math.MaxInt64/4).
	MaxSkewErr = engine.MaxMsgSkewErr
	MaxWander  = engine.MaxMsgWander
	MaxWidth   = engine.MaxMsgWidth
	// MaxErr bounds an error report (err / DIFFERENCE_THRESH).
	MaxErr = engine.MaxMsgErr
)

// invalidMsg names the first field of an engine message body that no
// engine produces (a NaN, an infinity, a skew beyond MaxSkew, a negative
// width, a sample with its times out of order), or "". Fields are named as
// in DecodeError.Field.
func invalidMsg(kind Op, m *engine.Message) (string, any) {
	if f, v := engine.InvalidFields(m, engine.MsgType(kind)); f != "" {
		return msgFieldNames[f], v
	}
	return "", nil
}

// msgFieldNames maps engine.InvalidFields' names onto the decoder's.
var msgFieldNames = map[string]string{
	"t2":              "probereply.t2",
	"t3":              "probereply.t3",
	"samples":         "timediff.count",
	"sample":          "timediff.sample",
	"mapping.x0":      "timediff.mapping.x0",
	"mapping.y0":      "timediff.mapping.y0",
	"mapping.skew":    "timediff.mapping.skew",
	"mapping.w0":      "timediff.mapping.w0",
	"mapping.skewerr": "timediff.mapping.skewerr",
	"mapping.wander":  "timediff.mapping.wander",
	"err":             "errreport.err",
	"period":          "periodchange.period",
}

// validStatus: a status an engine reports (3 is the page's no-daemon, never
// an engine's).
func validStatus(s engine.Status) bool {
	switch s {
	case engine.StatusUnsynced, engine.StatusSynced, engine.StatusStale, engine.StatusDegraded:
		return true
	}
	return false
}
