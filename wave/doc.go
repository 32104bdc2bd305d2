// Package wave holds the dense layer of the context graph: vectors and
// their index, salience with decay, belief, and the context state vector
// of a session.
//
// Like package particle, wave knows nothing of NATS or HTTP: it is pure
// in-memory data structures and math (gonum for the numerics), driven by
// the planner, the session manager and ingest.
//
// # Vectors and the index
//
// Vectors are L2-normalised float32 slices, so [Dot] is a cosine
// similarity. An [Index] ([Flat] for exact search, [HNSW] for the fast
// approximate prefilter) holds them under compact ids with filterable
// [Meta]. Indexes are derived data, rebuildable from the graph store.
//
// # Salience and decay
//
// Salience is how much an edge matters now. It fades with age following
// a [Decay] — exponential, power-law or linear, each parameterised by a
// half-life so that all three halve a score at one half-life — and is
// pushed back toward 1 by [Reinforce] when an edge is observed again.
// [Decay.ApplyBatch] decays a whole candidate set at once, as the
// planner's re-rank does.
//
// # Belief
//
// [Belief] is a Beta–Bernoulli estimate of how likely a node or edge is
// true: each observation adds its confidence as evidence, the score is
// the posterior mean and [Belief.Uncertainty] its variance. Low or
// uncertain beliefs are reported as hypotheses.
//
// # Context state vector
//
// A session's [StateVector] is an exponential moving average of the
// vectors its queries touch, kept at unit length; the planner blends it
// into retrieval so that context carries across requests.
//
// # Errors
//
// Vector inputs of the wrong length wrap [ErrDimension]; NaN or ±Inf
// components wrap [ErrNonFinite]. Check with [errors.Is].
package wave
