// Package eval is gclock's evaluation against the truth, one definition for
// the simulator, the lab and the tools: it takes reads of global time (an
// estimate, its bounds and the status it claimed) beside the true global
// time of the same instant, and condenses them into the figures every
// report uses: the error's mean, bias, spread and quantiles, how often the
// bounds held the truth (over the reads that claimed synced: a synced read
// is a promise), how wide they were, the share of each status, and the
// longest stretch not synced.
//
// Most callers want an Acc per node and Merge for the cluster:
//
//	a := eval.New(eval.Options{Interval: 100e6, Exact: true})
//	a.Add(eval.Read{At: t, Est: est, Earliest: lo, Latest: hi, Status: eval.Synced, Truth: truth})
//	s := a.Summary()
//
// Quantiles are gonum's empirical quantiles (stat.Quantile, stat.Empirical:
// the smallest value whose cumulative share reaches q, so every quantile is
// an observed value) over every |error|, when Options.Exact keeps them; a
// run too long to keep them (a simulation of thousands of nodes for hours)
// uses a log-linear Histogram instead, in constant memory, with a relative
// resolution of 1/32 that Summary.QuantileResolution reports.
//
// Errors summarises bare errors (a peer such as chronyd has no bounds). The
// same quantiles of any other sample, such as one-way delays, are
// internal/quantile's (quantile.Of), which the link models and the lab use.
package eval
