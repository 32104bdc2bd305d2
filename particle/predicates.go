package particle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Cardinality says how many open facts a subject may hold for a predicate.
type Cardinality string

// Cardinalities.
const (
	Single Cardinality = "single"
	Multi  Cardinality = "multi"
)

// PredicateStatus is where a predicate is in its review.
type PredicateStatus string

// Predicate statuses: unknown predicates arrive pending; an operator
// activates them; deprecated ones still resolve but never supersede.
const (
	PredicatePending    PredicateStatus = "pending"
	PredicateActive     PredicateStatus = "active"
	PredicateDeprecated PredicateStatus = "deprecated"
)

// Predicate is an entry of the predicate registry.
//
// Scope is where the entry applies: "tenant/project" (one namespace),
// "project" (a project name, across tenants) or "" (global). Resolution
// looks in that order: tenant:project, then project, then global.
type Predicate struct {
	Name        string          `json:"name"`
	Scope       string          `json:"scope"`
	Aliases     []string        `json:"aliases,omitempty"`
	Cardinality Cardinality     `json:"cardinality"`
	Status      PredicateStatus `json:"status"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	UpdatedBy   string          `json:"updated_by,omitempty"`
	Why         string          `json:"why,omitempty"`
}

// Validate checks the fields an operator sets.
func (p *Predicate) Validate() error {
	if Canonical(p.Name) == "" {
		return fmt.Errorf("%w: predicate name is required", ErrInvalid)
	}
	switch p.Cardinality {
	case Single, Multi:
	default:
		return fmt.Errorf("%w: cardinality %q (want single or multi)", ErrInvalid, p.Cardinality)
	}
	switch p.Status {
	case PredicatePending, PredicateActive, PredicateDeprecated:
	default:
		return fmt.Errorf("%w: status %q (want pending, active or deprecated)", ErrInvalid, p.Status)
	}
	if strings.Count(p.Scope, "/") > 1 {
		return fmt.Errorf("%w: scope %q (want tenant/project, project or empty)", ErrInvalid, p.Scope)
	}
	return nil
}

func predKey(scope, name string) string { return scope + "\x00" + Canonical(name) }

// scopesOf lists the registry scopes that apply to namespace ns, most
// specific first.
func scopesOf(ns string) []string {
	_, project, _ := strings.Cut(ns, "/")
	return []string{ns, project, ""}
}

// lookupPredicate resolves name (canonical or alias) for namespace ns in
// the registry maps given, most specific scope first.
func lookupPredicate(preds map[string]*Predicate, aliases map[string]string, ns, name string) *Predicate {
	c := Canonical(name)
	for _, sc := range scopesOf(ns) {
		if p, ok := preds[predKey(sc, c)]; ok {
			return p
		}
		if target, ok := aliases[predKey(sc, c)]; ok {
			if p, ok := preds[predKey(sc, target)]; ok {
				return p
			}
		}
	}
	return nil
}

// Predicate resolves name for namespace ns in the registry, or nil.
func (r Reader) Predicate(ns, name string) *Predicate {
	return lookupPredicate(r.v.preds, r.v.predAliases, ns, name)
}

// Predicates lists the registry, sorted by scope and name.
func (r Reader) Predicates() []*Predicate {
	out := make([]*Predicate, 0, len(r.v.preds))
	for _, p := range r.v.preds {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Predicate) int {
		if c := strings.Compare(a.Scope, b.Scope); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// predicate resolves name for ns through the batch's pending entries and
// the registry; an unknown predicate registers as pending, multi in ns.
func (b *Batch) predicate(ns, name string) (*Predicate, error) {
	if p := lookupPredicate(b.preds, b.predAliases, ns, name); p != nil {
		return p, nil
	}
	b.s.mu.RLock()
	p := lookupPredicate(b.s.v.preds, b.s.v.predAliases, ns, name)
	b.s.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	p = &Predicate{Name: Canonical(name), Scope: ns, Cardinality: Multi, Status: PredicatePending,
		CreatedAt: b.now, UpdatedAt: b.now, UpdatedBy: "ingest", Why: "first seen"}
	return p, b.PutPredicate(p)
}

// PutPredicate stages a registry entry (create or replace).
func (b *Batch) PutPredicate(p *Predicate) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p.Name = Canonical(p.Name)
	for i, a := range p.Aliases {
		p.Aliases[i] = Canonical(a)
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = b.now
	}
	p.UpdatedAt = b.now
	b.preds[predKey(p.Scope, p.Name)] = p
	for _, a := range p.Aliases {
		b.predAliases[predKey(p.Scope, a)] = p.Name
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return b.PutRecord(recordPredicate, predKey(p.Scope, p.Name), raw)
}

const (
	recordPredicate    = "predicate"
	recordSupersession = "supersession"
	recordContradict   = "contradiction"
	recordMerge        = "merge"
	recordRedirect     = "redirect"
)

// ConfigurePredicate creates or updates a registry entry as an operator:
// who and why are recorded on it.
func (s *Store) ConfigurePredicate(ctx context.Context, p Predicate, who, why string) (*Predicate, error) {
	var out *Predicate
	_, err := s.Update(ctx, func(b *Batch) error {
		c := p
		c.Aliases = slices.Clone(p.Aliases)
		if old := lookupPredicate(b.s.v.preds, b.s.v.predAliases, scopeNS(c.Scope), c.Name); old != nil && old.Scope == c.Scope {
			c.CreatedAt = old.CreatedAt
		}
		c.UpdatedBy, c.Why = who, why
		out = &c
		return b.PutPredicate(&c)
	})
	return out, err
}

// scopeNS turns a registry scope into a namespace whose most specific
// scope is it (for lookups of an exact scope).
func scopeNS(scope string) string {
	if strings.Contains(scope, "/") {
		return scope
	}
	return "\x00/" + scope
}

// loadPredicates fills the view's registry from stored records.
func (s *Store) loadPredicates(v *view) error {
	return s.Records(recordPredicate, func(_ string, raw []byte) error {
		var p Predicate
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("%w: predicate: %v", ErrCorrupt, err)
		}
		v.putPredicate(&p)
		return nil
	})
}

func (v *view) putPredicate(p *Predicate) {
	v.preds[predKey(p.Scope, p.Name)] = p
	for _, a := range p.Aliases {
		v.predAliases[predKey(p.Scope, a)] = p.Name
	}
}
