package rlds

import (
	"slices"

	"github.com/ctxgraph/ctxgraph/particle"
)

// ScrubStep removes the names of a forgotten entity (compared by
// canonical form) from a stored step's annotations: the entities seen,
// the events stating facts about it, and a tool or location of that
// name. It returns the step re-encoded, and whether anything changed.
// Free text (the language instruction) is left as written.
func ScrubStep(raw []byte, names []string) ([]byte, bool, error) {
	s, err := DecodeStep(raw)
	if err != nil {
		return nil, false, err
	}
	an := s.Annotations
	if an == nil {
		return raw, false, nil
	}
	forgotten := canonicalSet(names)
	named := func(n string) bool { return forgotten[particle.Canonical(n)] }
	changed := false
	if kept := slices.DeleteFunc(slices.Clone(an.Entities), named); len(kept) != len(an.Entities) {
		an.Entities, changed = kept, true
	}
	if kept := slices.DeleteFunc(slices.Clone(an.Events), func(e Event) bool { return named(e.Subject) || named(e.Object) }); len(kept) != len(an.Events) {
		an.Events, changed = kept, true
	}
	for _, f := range []*string{&an.Tool, &an.Location, &an.Goal, &an.Intent} {
		if *f != "" && named(*f) {
			*f, changed = "", true
		}
	}
	if !changed {
		return raw, false, nil
	}
	out, err := EncodeStep(s)
	return out, err == nil, err
}

func canonicalSet(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[particle.Canonical(n)] = true
	}
	return m
}
