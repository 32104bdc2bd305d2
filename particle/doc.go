// Package particle stores the symbolic context graph — nodes, typed
// edges with scope, provenance, confidence, salience and policy, and
// episodes — in Badger, and keeps a memory-resident view of it that the
// planner reads without touching disk.
//
// A [Store] is safe for concurrent use. Writes go through [Store.Update]:
// one [Batch], one Badger transaction, all or nothing; after the commit
// the batch's values are published to the view and subscribers are told.
// Published values are immutable; a batch updates private clones.
//
// # Identity
//
// Entity ids are name-derived UUIDs ([EntityID]) of the namespace, the
// node type and the canonical name ([Canonical]: trim, collapse spaces,
// lowercase), so every writer computes the same id. Edge ids are
// time-ordered UUIDs; an edge is unique by (namespace, source, type,
// predicate, target) and re-observing it reinforces the one edge. Every
// node, edge and episode also has a compact Seq, the key of the vector
// index.
//
// # Keys
//
// Every key starts with a one-byte table prefix; string parts are joined
// by 0x00.
//
//	0x01 node     | ns | id                 -> value(Node)
//	0x02 edge     | ns | id                 -> value(Edge)
//	0x03 alias    | ns | type | canonical   -> node id
//	0x04 identity | ns | src | type | pred | dst -> edge id
//	0x05 episode  | ns | id                 -> value(Episode)
//	0x06 step     | ns | episode | 0 | idx u32 BE -> encoded step
//	0x07 span     | ns | id                 -> encoded CMS span
//	0x08 session  | ns | id                 -> encoded session
//	0x09 blob     | sha256 hex              -> bytes
//	0x0A out      | ns | src | type | edge  -> empty
//	0x0B in       | ns | dst | type | edge  -> empty
//	0x0C applied  | stream | msg id         -> empty (idempotent apply)
//	0x0D record   | kind | key              -> bytes
//	0x0E vector   | a node's or edge's key  -> its embedding, float32 LE
//	0x0F ep.edges | ns | episode | 0 | chunk u32 BE -> 32 of its edge ids
//	0xFE meta     | name                    -> sequence, counts
//
// A node, edge or episode value starts with its format byte: 1, JSON
// between a length and the embedding (codec.go, as stores written long
// ago hold them); 2, binary with the embedding inline (episodes); 3,
// binary with only the embedding's length, its floats under the vector
// key, rewritten only when they change (nodes and edges; codecv2.go).
// An episode's edge list is stored in chunks of 32 ids written once each
// as the list grows, its record holding the rest and the chunk count
// (episodeedges.go).
//
// # Policy
//
// Every read path filters with one evaluation function: inside
// [Store.Read] call [Reader.EdgeVisible], [Reader.NodeVisible] or
// [Reader.EpisodeVisible] (or [Reader.VisibleEpisode],
// [Reader.VisibleNode] and [Reader.VisibleEdge] for an item returned
// whole, whose lists and provenance must drop what the caller may not
// see);
// over a [Snapshot] (export) call [Snapshot.EdgeVisible] and friends,
// or [Snapshot.Guard] for many checks in a row;
// elsewhere (an HTTP handler) [Store.EdgeVisible] and friends, never
// inside Store.Read. There is no package-level check: evaluation needs
// the store's rules. Pass the caller's [Principal] (roles, agent,
// subject; Shared for a result several readers get, such as a session
// push; Export for a result that leaves ctxgraph). An item the check
// refuses is absent: leave it out of results, counts and suggestions.
// [Reader.ExplainEdge] and [Reader.ExplainNode] say why (the rule and
// the node the denial is about), for denial records. For many checks in
// a row as one principal (the planner's expansion), bind it once with
// [Reader.Guard]: it remembers node verdicts and skips the rules that
// cannot hide anything from that principal (same answers, a fraction of
// the cost).
//
// Rules ([Rule]) allow, deny or label (sensitivity, portability) a node,
// an edge, an edge type, a tag or a namespace. Deny beats allow; among
// allows the most specific level decides (item, tag, edge type,
// scope); an edge is visible only if its endpoints are. Operators edit
// rules with [Store.EditPolicy]; each edit is audited (record
// policy.audit) and swaps an immutable compiled rule set, so the very
// next read sees it. Each rule also stands in the graph as a policy
// node (operators only), linked by a policy edge to a node it targets;
// and a policy edge written by ingest that carries roles attaches them
// to its target node. Rules live in records:
//
//	policy.rule   | rule id       -> Rule (JSON)
//	policy.audit  | seq (16 hex)  -> AuditEntry (JSON)
//	policy.denial | seq (16 hex)  -> Denial (JSON)
package particle
