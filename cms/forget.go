package cms

import (
	"slices"

	"github.com/ctxgraph/ctxgraph/particle"
)

// ScrubSpan removes the names of a forgotten entity (compared by
// canonical form) from a stored span's entities and concepts. It returns
// the span re-encoded, and whether anything changed. The span's free
// text is left as written.
func ScrubSpan(raw []byte, names []string) ([]byte, bool, error) {
	s, err := DecodeStored(raw)
	if err != nil {
		return nil, false, err
	}
	forgotten := make(map[string]bool, len(names))
	for _, n := range names {
		forgotten[particle.Canonical(n)] = true
	}
	named := func(n string) bool { return forgotten[particle.Canonical(n)] }
	before := len(s.Entities) + len(s.Concepts)
	s.Entities = slices.DeleteFunc(s.Entities, named)
	s.Concepts = slices.DeleteFunc(s.Concepts, named)
	if len(s.Entities)+len(s.Concepts) == before {
		return raw, false, nil
	}
	out, err := encodeSpan(s)
	return out, err == nil, err
}
