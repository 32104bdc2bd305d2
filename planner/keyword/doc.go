// Package keyword is the planner's full-text index: bleve (scorch,
// BM25 scoring) over the words the graph holds — node names and aliases,
// assertion values, episode language instructions and CMS span text.
//
// It lives in its own leaf package so that particle and wave never
// import bleve; only the planner and the daemon do.
//
// # Derived state
//
// The index is rebuilt from the store, never the other way round. [Open]
// computes every document from the store's view (and the spans in
// Badger), compares each with the text the index holds, and indexes
// only what differs; then it subscribes to the store and keeps current
// on every committed batch (queued by the writer, indexed by a worker of
// the index), so that what ingest has acknowledged is searchable. A
// batch that changes no indexed text (the common case: evidence
// reinforcing known edges) costs a few map look-ups and never reaches
// bleve.
//
// With [Options.Dir] set the index lives on disk (scorch segments,
// merged in the background). [Index.Close] saves every document's text,
// the nodes listing each span and the store's [particle.Generation]
// (as [Index.Checkpoint] does while the index runs) in a file of their
// own in Dir, documents-<CRC-64 of its bytes>, written and synced
// first; then one persisted batch records that stamp beside a clean
// marker; the first batch after [Open] clears the marker. Only the
// small stamp is one of bleve's internal values: scorch writes all of
// them again into root.bolt, fsynced, at every snapshot it persists
// (several a second during ingest), and the documents, 10.5 MB at 1M
// edges, once made root.bolt grow to 206 MB that way. A documents file
// missing or not matching its stamp is saved documents missing: the
// index is rebuilt. A reopen on a store nobody wrote to since
// (the same generation) takes the saved documents as they are, without
// computing them again (at 1M edges that took 1.4 s of a start); after
// writes it reconciles them with the store's. An index found without
// the marker was left by a run that died: when that was on this boot,
// bleve's files hold the saved documents and some later batches, each
// whole, and the reconciliation also indexes again the documents of
// what the store took since (particle.Store.ChangedSince); otherwise
// (writes not synced may be lost) it is deleted and rebuilt. So a reopen
// is a generation check, a reconciliation or a rebuild, never a stale
// index.
// Without Dir the index is in memory: scorch does not merge in-memory
// segments, so that mode is for tests and small graphs.
//
// # Documents
//
//	n<US>node id                 node: name and aliases
//	e<US>edge id                 edge: its assertion value (edges with a value only)
//	p<US>namespace<US>episode id episode: its language instruction
//	s<US>namespace<US>span id    CMS span: its text
//
// (<US> is the byte 0x1f.) Every document carries its namespace as a
// keyword field, and its text under two analyses: "text" (Unicode words,
// lowercased, English stop words removed; phrases match) and "ident"
// (identifier-like runs such as "SN-4471-XQ" or "ep-alpha-0001" kept
// whole, lowercased), so a serial number matches exactly.
//
// Spans touch nodes rather than being nodes: the index remembers which
// nodes list each span (attributes.cms_span_ids) and a span hit carries
// them. A span whose apply touched no node is indexed at the next Open.
//
// # Policy
//
// The index holds text, not permissions: a hit is a candidate that the
// caller must pass through Reader.EdgeVisible / NodeVisible (the
// planner does, for every hit, before it becomes a seed).
package keyword
