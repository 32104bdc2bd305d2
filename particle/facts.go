package particle

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Supersession records that one fact ended another.
type Supersession struct {
	Old        string     `json:"old"`
	New        string     `json:"new"`
	Subject    string     `json:"subject"`
	Predicate  string     `json:"predicate"`
	ValidTo    time.Time  `json:"valid_to"`
	At         time.Time  `json:"at"`
	Provenance Provenance `json:"provenance"`
}

// Contradiction records two conflicting facts that are both kept.
type Contradiction struct {
	A           string       `json:"a"`
	B           string       `json:"b"`
	Subject     string       `json:"subject"`
	Predicate   string       `json:"predicate"`
	ConfidenceA float64      `json:"confidence_a"`
	ConfidenceB float64      `json:"confidence_b"`
	Provenance  []Provenance `json:"provenance"`
	At          time.Time    `json:"at"`
}

// openFacts returns private copies of the open facts (valid_to unset,
// not superseded) that subject holds for predicate at location, other
// than except.
func (b *Batch) openFacts(ns, subject, pred, location, except string) []*Edge {
	key := factKey(pred, location)
	// Only the subject's open assertions of this predicate and location
	// can be its facts: the rest of its edges (a hub's thousands, its
	// facts' history) are passed over here, under one lock, by the
	// records their seqs hold, and not cloned. A fact the view holds
	// closed is closed for good, unless this batch holds a copy.
	var ids []string
	// A subject's edges share a few predicates and locations: the key of
	// the last pair met is kept, and built again only for another.
	var fk []byte
	var lastPred, lastLoc string
	lastMatch, met := false, false
	b.s.mu.RLock()
	v := b.s.v
	list := v.out[subject]
	for i := range list {
		e := atSeq(v.edgeSeq, list[i].seq)
		if e == nil || e.Namespace != ns || !hasFactKey(e) {
			continue
		}
		if p, l := e.Assertion.Predicate, e.Scope.Location; !met || p != lastPred || l != lastLoc {
			fk = appendFactKey(fk[:0], p, l)
			lastPred, lastLoc, lastMatch, met = p, l, string(fk) == key, true
		}
		if !lastMatch {
			continue
		}
		if !e.ValidTo.IsZero() || e.Status == StatusSuperseded {
			if _, mine := b.edges[e.ID]; !mine {
				continue
			}
		}
		ids = append(ids, e.ID)
	}
	b.s.mu.RUnlock()
	for _, id := range b.newFrom[subject] {
		if _, ok := b.newEdges[id]; ok { // not deleted since
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var out []*Edge
	for _, id := range ids {
		if id == except {
			continue
		}
		e := b.Edge(id)
		if e == nil || e.Source != subject || e.Namespace != ns || e.Type != EdgeAssertion || identityPredicate(e) != key {
			continue
		}
		if !e.ValidTo.IsZero() || e.Status == StatusSuperseded {
			continue
		}
		out = append(out, e)
	}
	return out
}

// settle applies the fact invariants to a new fact e of predicate p:
// of a single-cardinality predicate, a subject holds one open fact per
// scope. If p is active the later fact supersedes the earlier (valid_to
// set to the new valid_from, the supersession recorded with its
// provenance); otherwise both are kept and marked as a contradiction.
func (b *Batch) settle(e *Edge, p *Predicate) error {
	if p.Cardinality != Single {
		return nil
	}
	for _, f := range b.openFacts(e.Namespace, e.Source, p.Name, e.Scope.Location, e.ID) {
		if f.Target == e.Target {
			continue
		}
		if p.Status == PredicateActive {
			older, newer := f, e
			if e.ValidFrom.Before(f.ValidFrom) {
				older, newer = e, f // late evidence of an earlier fact
			}
			// EndedAt is when the ending was observed: the observation
			// time of the evidence that settled it.
			older.ValidTo, older.Status, older.SupersededBy = newer.ValidFrom, StatusSuperseded, newer.ID
			older.EndedAt = e.Provenance[len(e.Provenance)-1].ObservedAt
			if err := b.PutEdge(older); err != nil {
				return err
			}
			if err := b.record(recordSupersession, Supersession{
				Old: older.ID, New: newer.ID, Subject: e.Source, Predicate: p.Name, ValidTo: older.ValidTo,
				At: b.now, Provenance: e.Provenance[len(e.Provenance)-1],
			}); err != nil {
				return err
			}
			continue
		}
		f.Status, e.Status = StatusContradicted, StatusContradicted
		if !slices.Contains(f.Contradicts, e.ID) {
			f.Contradicts = append(f.Contradicts, e.ID)
		}
		if !slices.Contains(e.Contradicts, f.ID) {
			e.Contradicts = append(e.Contradicts, f.ID)
		}
		if err := b.PutEdge(f); err != nil {
			return err
		}
		if err := b.record(recordContradict, Contradiction{
			A: f.ID, B: e.ID, Subject: e.Source, Predicate: p.Name, ConfidenceA: f.Confidence, ConfidenceB: e.Confidence,
			Provenance: []Provenance{f.Provenance[len(f.Provenance)-1], e.Provenance[len(e.Provenance)-1]}, At: b.now,
		}); err != nil {
			return err
		}
	}
	return b.PutEdge(e)
}

// record stores v as a new record of kind under a time-ordered key.
func (b *Batch) record(kind string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	return b.PutRecord(kind, id.String(), raw)
}

// Supersessions returns every recorded supersession, oldest first.
func (s *Store) Supersessions() ([]Supersession, error) {
	return listRecords[Supersession](s, recordSupersession)
}

// Contradictions returns every recorded contradiction, oldest first.
func (s *Store) Contradictions() ([]Contradiction, error) {
	return listRecords[Contradiction](s, recordContradict)
}

// listRecords decodes every JSON record of kind, in key order.
func listRecords[T any](s *Store, kind string) ([]T, error) {
	var out []T
	err := s.Records(kind, func(key string, raw []byte) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%w: %s record %s: %v", ErrCorrupt, kind, key, err)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}
