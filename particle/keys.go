package particle

import (
	"encoding/binary"
)

// prefix is the one-byte table tag at the start of every key.
//
// The tables marked legacy (an edge's identity, its out and in
// adjacency) were written beside every new edge by earlier versions. They
// are derived from the edge record alone, as the view derives them on
// load, so they are no longer written: they were 6 of the 14 keys a step
// wrote, each a skiplist insert on the commit path. A store that still
// holds them keeps working; they are deleted with their edge, and Check
// counts them without requiring them.
type prefix byte

const (
	prefixNode     prefix = 0x01 // ns \0 id            -> Node
	prefixEdge     prefix = 0x02 // ns \0 id            -> Edge
	prefixAlias    prefix = 0x03 // ns \0 type \0 name  -> node id
	prefixIdentity prefix = 0x04 // legacy: identity tuple -> edge id
	prefixEpisode  prefix = 0x05 // ns \0 id            -> Episode
	prefixStep     prefix = 0x06 // ns \0 episode \0 idx u32 -> step bytes
	prefixSpan     prefix = 0x07 // ns \0 id            -> span bytes
	prefixSession  prefix = 0x08 // ns \0 id            -> session bytes
	prefixBlob     prefix = 0x09 // sha256 hex          -> bytes
	prefixOut      prefix = 0x0A // legacy: ns \0 src \0 type \0 edge id -> empty
	prefixIn       prefix = 0x0B // legacy: ns \0 dst \0 type \0 edge id -> empty
	prefixApplied  prefix = 0x0C // stream \0 msg id    -> empty
	prefixRecord   prefix = 0x0D // kind \0 key         -> bytes (audit, dlq index, ...)
	prefixVector   prefix = 0x0E // a node's or edge's key -> its embedding (format 3)
	// An episode's edge list past its record: ns \0 id \0 chunk u32 ->
	// episodeEdgeChunk edge ids (episodeedges.go).
	prefixEpisodeEdges prefix = 0x0F
	prefixMeta         prefix = 0xFE // name                -> value
)

func key(p prefix, parts ...string) []byte {
	n := 1
	for _, s := range parts {
		n += len(s) + 1
	}
	k := make([]byte, 0, n)
	k = append(k, byte(p))
	for i, s := range parts {
		if i > 0 {
			k = append(k, 0)
		}
		k = append(k, s...)
	}
	return k
}

func nodeKey(ns, id string) []byte        { return key(prefixNode, ns, id) }
func edgeKey(ns, id string) []byte        { return key(prefixEdge, ns, id) }
func episodeKey(ns, id string) []byte     { return key(prefixEpisode, ns, id) }
func spanKey(ns, id string) []byte        { return key(prefixSpan, ns, id) }
func sessionKey(ns, id string) []byte     { return key(prefixSession, ns, id) }
func blobKey(sum string) []byte           { return key(prefixBlob, sum) }
func aliasDBKey(ak string) []byte         { return key(prefixAlias, ak) }
func identityDBKey(ik string) []byte      { return key(prefixIdentity, ik) }
func appliedKey(stream, id string) []byte { return key(prefixApplied, stream, id) }
func metaKey(name string) []byte          { return key(prefixMeta, name) }
func recordKey(kind, k string) []byte     { return key(prefixRecord, kind, k) }

// vectorKey is where the embedding of the node or edge stored under
// record key k lies apart (format 3): k behind the vector table's tag, so
// that the vectors of a table lie in the order of its records and a scan
// of the records reads them alongside (vectorJoin).
func vectorKey(k []byte) []byte {
	return append(append(make([]byte, 0, 1+len(k)), byte(prefixVector)), k...)
}

func adjKey(p prefix, ns, node string, t EdgeType, edge string) []byte {
	return key(p, ns, node, string(t), edge)
}

// stepKey orders an episode's steps by index (big-endian u32).
func stepKey(ns, episode string, idx int) []byte {
	k := key(prefixStep, ns, episode)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(idx))
}

// stepPrefix selects all steps of one episode.
func stepPrefix(ns, episode string) []byte {
	return append(key(prefixStep, ns, episode), 0)
}

// stepIndexOf returns the step index at the end of a step key.
func stepIndexOf(k []byte) (int, bool) {
	if len(k) < 5 {
		return 0, false
	}
	return int(binary.BigEndian.Uint32(k[len(k)-4:])), true
}
