// Package planner answers HOPE planner fast-path requests from the
// memory-resident graph and the vector index.
//
// A request runs four stages, each timed:
//
//  1. prefilter: the vector index returns the k best nodes, edges and
//     episodes for the query vector, already filtered by namespace,
//     policy, time window and agent;
//  2. expansion: from those seeds and the goals, tools and entities the
//     request names, a walk of up to hops steps keeps each node's best
//     edges that pass every constraint (policy allow/deny and audience,
//     time window, location, min confidence, same agent, as-of);
//  3. re-rank: edges by cosine × decayed salience × confidence, nodes by
//     cosine × belief; a node, and an edge the expansion reaches, have
//     the cosine of their embedding's int8 code (within wave.CodeBound of
//     the float32 cosine), read by seq instead of the embedding;
//  4. stitch: the kept subgraph within the budget, every edge with its
//     provenance and confidence, unknowns (asked for, absent),
//     hypotheses (low belief), contradictions, and the context state
//     vector after the answer.
//
// The planner never writes the graph and never waits on ingest: it reads
// the view that each committed batch publishes.
package planner
