package particle

import (
	"strings"
	"unicode"
	"unsafe"

	"github.com/google/uuid"
)

// idSpace is the UUID namespace of name-derived ids. Changing it changes
// every entity id: never do.
var idSpace = uuid.MustParse("6f1c2a3e-8b7d-5c4e-9a0f-1d2e3c4b5a69")

// Canonical normalises a name: trim, collapse inner whitespace to one
// space, lowercase.
func Canonical(name string) string {
	if isCanonical(name) { // most names, and a load asks about every edge's
		return name
	}
	var b strings.Builder
	b.Grow(len(name))
	space := false
	for _, r := range strings.TrimSpace(name) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// EntityID is the name-derived id of the node of type t named name in
// namespace ns: every writer computes the same id for the same entity.
func EntityID(ns string, t NodeType, name string) string {
	return uuid.NewSHA1(idSpace, []byte(ns+"\x00"+string(t)+"\x00"+Canonical(name))).String()
}

// EpisodeNodeID is the id of the graph node that stands for an episode.
func EpisodeNodeID(ns, episodeID string) string {
	return uuid.NewSHA1(idSpace, []byte(ns+"\x00episode\x00"+episodeID)).String()
}

// NewEdgeID returns a fresh time-ordered edge id.
func NewEdgeID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// edgeIdentity is the key that makes an edge unique: re-observing the
// same (namespace, source, type, predicate, target) reinforces one edge.
func edgeIdentity(ns, src string, t EdgeType, pred, dst string) string {
	k := make([]byte, 0, len(ns)+len(src)+len(t)+len(pred)+len(dst)+4)
	return keyString(appendEdgeIdentity(k, ns, src, t, pred, dst))
}

// keySlab copies map keys one after another into shared buffers of
// keySlabSize bytes: a batch's identity keys of its new edges, which live
// as long as the batch (the view's identity index keeps their hashes), one
// allocation per buffer where there was one a key. A key outlives its
// map entry until its buffer's last key does.
type keySlab struct{ buf []byte }

const keySlabSize = 16 << 10

// add returns a copy of k in s.
func (s *keySlab) add(k []byte) string {
	if cap(s.buf)-len(s.buf) < len(k) {
		s.buf = make([]byte, 0, max(keySlabSize, len(k)))
	}
	at := len(s.buf)
	s.buf = append(s.buf, k...)
	return keyString(s.buf[at:])
}

// identityOf is e's identity key: edgeIdentity(e.Namespace, e.Source,
// e.Type, identityPredicate(e), e.Target).
func identityOf(e *Edge) string {
	return keyString(appendIdentityOf(make([]byte, 0, identitySize(e)), e))
}

// appendIdentityOf appends identityOf(e), its fact key written in place
// as appendObservedIdentity writes it (Canonical of a fact key is the
// key itself), not made as a string of its own first.
func appendIdentityOf(k []byte, e *Edge) []byte {
	k = appendIdentityHead(k, e.Namespace, e.Source, e.Type)
	if hasFactKey(e) {
		k = appendFactKey(k, e.Assertion.Predicate, e.Scope.Location)
	}
	return appendIdentityTail(k, e.Target)
}

// identitySize is the length of identityOf(e) unless making its fact
// key canonical lengthens it.
func identitySize(e *Edge) int {
	n := len(e.Namespace) + len(e.Source) + len(e.Type) + len(e.Target) + 4
	if hasFactKey(e) {
		n += len(e.Assertion.Predicate) + 1 + len(e.Scope.Location)
	}
	return n
}

// aliasKey is the key of the alias index: (namespace, type, canonical).
func aliasKey(ns string, t NodeType, name string) string {
	return keyString(appendAliasKey(make([]byte, 0, len(ns)+len(t)+len(name)+2), ns, t, name))
}

// factKey is the predicate part of a fact's identity: its predicate and
// scope location, canonical.
func factKey(pred, location string) string {
	return keyString(appendFactKey(make([]byte, 0, len(pred)+len(location)+1), pred, location))
}

// keyString is key b as a string, without a copy: b was just built for
// it, and nothing writes it again.
func keyString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// The keys are built by appending, so that a lookup can build one in
// scratch space (Batch.key) and index a map with string(b) without an
// allocation, and the string forms above are these same bytes.

// appendCanonical appends Canonical(s). A name that is already canonical
// (ASCII, lower case, single spaces between words), as most are, is
// appended as it is, without Canonical's copy.
func appendCanonical(dst []byte, s string) []byte {
	return append(dst, Canonical(s)...)
}

// isCanonical reports whether Canonical(s) == s, for the common case:
// false may still be canonical.
func isCanonical(s string) bool {
	if s == "" {
		return true
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	prev := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80, 'A' <= c && c <= 'Z', '\t' <= c && c <= '\r', c == ' ' && prev == ' ':
			return false
		}
		prev = c
	}
	return true
}

// appendAliasKey appends aliasKey(ns, t, name).
func appendAliasKey(dst []byte, ns string, t NodeType, name string) []byte {
	dst = append(dst, ns...)
	dst = append(dst, 0)
	dst = append(dst, t...)
	dst = append(dst, 0)
	return appendCanonical(dst, name)
}

// appendEdgeIdentity appends edgeIdentity(ns, src, t, pred, dst).
func appendEdgeIdentity(k []byte, ns, src string, t EdgeType, pred, dst string) []byte {
	k = appendCanonical(appendIdentityHead(k, ns, src, t), pred)
	return appendIdentityTail(k, dst)
}

// appendIdentityHead and appendIdentityTail append what stands before
// and after the predicate in an edge identity.
func appendIdentityHead(k []byte, ns, src string, t EdgeType) []byte {
	k = append(k, ns...)
	k = append(k, 0)
	k = append(k, src...)
	k = append(k, 0)
	k = append(k, t...)
	return append(k, 0)
}

func appendIdentityTail(k []byte, dst string) []byte {
	k = append(k, 0)
	return append(k, dst...)
}

// appendFactKey appends factKey(pred, location).
func appendFactKey(k []byte, pred, location string) []byte {
	k = appendCanonical(k, pred)
	if location != "" {
		k = append(k, '@')
		k = appendCanonical(k, location)
	}
	return k
}
