package particle

import (
	"bytes"
	"hash/maphash"
	"strings"
)

// identityIndex finds the view's edge of an identity key (identityOf): the
// key that makes an edge unique, which every sighting of an edge looks up
// (Observe) to reinforce the edge it names instead of making another.
//
// It maps the key's 64-bit hash to the edge's seq, in a map that holds no
// pointers: the collector neither scans it nor marks what it would point
// at, and a lookup reads no key. Keyed by the key itself, each entry held
// two strings: at the medium bench's 200,000 edges, 400,000 pointers for
// every mark phase to follow, and each lookup compared about 100 bytes of
// key read from wherever the key was allocated (a cache miss) before the
// map by id was asked for the edge (three more). The keys and their map
// took 160 bytes an edge of a loaded view, and a collection scanned 42%
// more of its heap (BenchmarkReopen at 1M edges; BENCHMARKS.md,
// seventy-eighth round).
//
// A hash names an edge only if that edge's identity is the key: a lookup
// checks, so two keys of one hash never find each other's edge. The edges
// that the hash map cannot hold, one without a seq (an earlier format's)
// and one whose key's hash another edge's key has, are kept by their key
// in byKey, which a lookup asks when the hash did not find the edge. The
// index thus answers exactly as a map by key would.
//
// Like the rest of the view, it is written under Store.mu and read under
// its read lock.
type identityIndex struct {
	bySum map[uint64]uint64 // identitySum(key) -> edge seq
	byKey map[string]string // key -> edge id, for what bySum cannot hold
}

// identitySeed seeds the identity keys' hashes: one per process, so two
// views of the same edges hold equal indexes.
var identitySeed = maphash.MakeSeed()

// identitySumMask masks the hashes: tests narrow it to make keys collide.
var identitySumMask = ^uint64(0)

// identitySum is the hash of identity key k; identitySumOf is the same of
// a string.
func identitySum(k []byte) uint64 { return maphash.Bytes(identitySeed, k) & identitySumMask }

func identitySumOf(k string) uint64 { return maphash.String(identitySeed, k) & identitySumMask }

// identityBuf is room enough for most identity keys on the stack.
const identityBuf = 256

func newIdentityIndex(n int) identityIndex {
	return identityIndex{bySum: make(map[uint64]uint64, n), byKey: map[string]string{}}
}

// len is the number of identities held.
func (x *identityIndex) len() int { return len(x.bySum) + len(x.byKey) }

// find returns v's edge whose identity is k, or nil.
func (x *identityIndex) find(v *view, k []byte) *Edge {
	if seq, ok := x.bySum[identitySum(k)]; ok {
		if e := atSeq(v.edgeSeq, seq); e != nil && identityIs(e, k) {
			return e
		}
	}
	if len(x.byKey) > 0 {
		if id, ok := x.byKey[string(k)]; ok {
			return v.edges.get(v, id)
		}
	}
	return nil
}

// put records e, which v holds (by seq too, if it has one), under its
// identity k. A hash that names another live edge of another identity
// leaves e to byKey.
func (x *identityIndex) put(v *view, k string, e *Edge) {
	if e.Seq != 0 {
		h := identitySumOf(k)
		if seq, ok := x.bySum[h]; !ok || seq == e.Seq || !x.holds(v, seq, h) {
			x.bySum[h] = e.Seq
			return
		}
	}
	x.byKey[strings.Clone(k)] = e.ID
}

// holds reports whether the edge at seq lives in v with an identity of
// hash h: whether the entry h -> seq is one to keep.
func (x *identityIndex) holds(v *view, seq, h uint64) bool {
	e := atSeq(v.edgeSeq, seq)
	return e != nil && edgeIdentitySum(e) == h
}

// remove drops the entry of identity k if it names e.
func (x *identityIndex) remove(k string, e *Edge) {
	h := identitySumOf(k)
	if seq, ok := x.bySum[h]; ok && e.Seq != 0 && seq == e.Seq {
		delete(x.bySum, h)
	}
	if id, ok := x.byKey[k]; ok && id == e.ID {
		delete(x.byKey, k)
	}
}

// each calls fn with each entry: the edge it names (nil if v holds none
// at its seq) and whether that edge's identity is the entry's (for an
// entry of byKey, its key; of bySum, its hash).
func (x *identityIndex) each(v *view, fn func(e *Edge, id string, matches bool)) {
	for h, seq := range x.bySum {
		e := atSeq(v.edgeSeq, seq)
		if e == nil {
			fn(nil, "", false)
			continue
		}
		fn(e, e.ID, edgeIdentitySum(e) == h)
	}
	for k, id := range x.byKey {
		e := v.edges.get(v, id)
		fn(e, id, e != nil && identityIs(e, []byte(k)))
	}
}

// edgeIdentitySum is the hash of e's identity key.
func edgeIdentitySum(e *Edge) uint64 {
	var buf [identityBuf]byte
	return identitySum(appendIdentityOf(buf[:0], e))
}

// identityIs reports whether e's identity key is k.
func identityIs(e *Edge, k []byte) bool {
	var buf [identityBuf]byte
	return bytes.Equal(appendIdentityOf(buf[:0], e), k)
}
