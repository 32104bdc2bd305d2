// Package cms maps continuum-memory-system spans into the context graph.
//
// A CMS (as in the Nested Learning / HOPE work) keeps memory at several
// levels that update at different frequencies, level 0 the fastest. A
// [Span] is one consolidation at one level: it covers an episode or a
// stream over a step and time range, rolls into a parent span of a slower
// level, may carry text and a summary embedding, and names the concepts
// it consolidated. Atoms roll into spans, spans into episodes, episodes
// into semantic concepts.
//
// Applying a span makes its concepts nodes, appends the span id to the
// cms_span_ids of every node it touches, and links concepts to the
// episode and entities they abstract with edges whose provenance names
// the span. The span's update size seeds the salience of what it touches
// and its level sets the half-life: slow levels decay slowly.
//
// A span arrives as JSON or as MessagePack ([Span.AppendMsgpack]);
// [Decode] takes either.
package cms
