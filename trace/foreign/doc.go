// Package foreign corrects traces that other tools recorded (Score-P's
// OTF2 archives): every location stamped its events with its own clock, and
// the producer measured the offset of each clock to a master clock a few
// times (Score-P: at init and at finalize, OTF2's CLOCK_OFFSET local
// definitions). OTF2 readers interpolate linearly between those offsets,
// which is right only if every clock ran at a constant rate for the whole
// run: a drift step (a thermal change, a frequency correction by NTP) or
// the slow wander of an oscillator between the two records is left in the
// trace, often as receives drawn before their sends.
//
// The model here is the producer-independent core: per location the local
// timestamps of its events in record order and its offset records, plus
// the matched messages (send event, receive event). Correct maps every
// event onto global time in three steps:
//
//  1. A base mapping per location: the daemon's recorded mappings when the
//     run had gclock (Options.Mappers), else the location's own offset
//     records, through trace/correct's line (two records, the same line
//     an OTF2 reader draws) or monotone spline (three or more).
//  2. Refinement by the messages (on by default without daemon mappings):
//     a receive is after its send, so on each location the fastest
//     message in and the fastest message out within a window bound its
//     offset from both sides, as in the convex-hull methods. Per window,
//     the offset error of every location is set to the middle of that
//     window (half the difference of its fastest apparent latency in and
//     out), all locations at once by Gauss-Seidel sweeps with the
//     reference (the master, offset 0) fixed; the corrections are knots
//     at the window centres, linear between them. Three passes, each on the
//     times the previous one corrected, follow drift steps and wander that
//     no line between two offset records can.
//  3. Optionally the controlled logical clock (trace/causality) moves the
//     receives that are still before their sends.
//
// Causality (receives before their sends) is counted on the raw local
// timestamps, on the producer's linear interpolation, after the
// correction and after CLC, and reported.
package foreign
