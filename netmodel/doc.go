// Package netmodel is the network model shared by the simulator and the
// lab's switch: what happens to one message (or frame) sent on one
// direction of a link. It draws the message's fate (lost, delivered once,
// duplicated, held back so that later ones overtake it) and each copy's
// one-way delay from a seeded *rand.Rand; it reads no clock and holds no
// state per message, so a seeded generator makes a run reproducible.
//
// Two descriptions of a link use it:
//
//   - Spec is the simulator's YAML section (`links:` of a scenario): every
//     directed link has a fixed minimum delay (MinDelay plus a per-link draw
//     up to Asymmetry) and a random tail with a given mean (exponential,
//     lognormal or pareto), so that a load phase can scale the tail's mean.
//     Net applies it, with the Load a phase makes of it.
//   - Link is the lab's flag syntax (ParseLink: "pareto:100us:50us,loss=1%"):
//     one Model per direction, a delay distribution given by its mean and
//     spread, as netem's are.
//
// # One pareto
//
// Both use one pareto, a Lomax (a pareto shifted to start at 0) with shape
// alpha, scaled to a given mean m: x = m(alpha-1)(U^(-1/alpha) - 1) with U
// uniform in (0, 1]. A Spec's pareto tail is that variable added to the
// link's minimum delay. A Model's "pareto:DELAY:JITTER" is netem's pareto:
// alpha 3 and standardised so that DELAY is its mean and JITTER its standard
// deviation, which is the same Lomax with mean JITTER/sqrt(3) added to a
// floor at DELAY - JITTER/sqrt(3) (71.1 us for pareto:100us:50us).
package netmodel
