package particle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Merge records that one entity was merged into another.
type Merge struct {
	Survivor string            `json:"survivor"`
	Merged   string            `json:"merged"`
	Name     string            `json:"merged_name"`
	Who      string            `json:"who"`
	Why      string            `json:"why"`
	At       time.Time         `json:"at"`
	Edges    map[string]string `json:"edges"` // old edge id -> edge id on the survivor
	Aliases  []string          `json:"aliases"`
}

// Resolve follows merge redirects from id to the node that stands for it
// now (id itself when it was never merged).
func (r Reader) Resolve(id string) string {
	for i := 0; i < 16; i++ {
		to, ok := r.v.redirects[id]
		if !ok {
			return id
		}
		id = to
	}
	return id
}

// ResolveNode returns node id, following merge redirects.
func (s *Store) ResolveNode(id string) (*Node, error) {
	var n *Node
	s.Read(func(r Reader) { n = r.Node(r.Resolve(id)) })
	if n == nil {
		return nil, fmt.Errorf("node %s: %w", id, ErrNotFound)
	}
	return n, nil
}

// AddAlias makes alias resolve to node id (of its type and namespace).
// An alias that already names another node is an error.
func (s *Store) AddAlias(ctx context.Context, id, alias string) (*Node, error) {
	var out *Node
	_, err := s.Update(ctx, func(b *Batch) error {
		n := b.Node(id)
		if n == nil {
			return fmt.Errorf("node %s: %w", id, ErrNotFound)
		}
		if Canonical(alias) == "" {
			return fmt.Errorf("%w: empty alias", ErrInvalid)
		}
		ak := aliasKey(n.Namespace, n.Type, alias)
		if other, ok := b.s.v.aliases[ak]; ok && other != id {
			return fmt.Errorf("%w: alias %q already names node %s", ErrInvalid, alias, other)
		}
		if Canonical(alias) != Canonical(n.Name) && !slices.ContainsFunc(n.Aliases, func(a string) bool { return Canonical(a) == Canonical(alias) }) {
			n.Aliases = append(n.Aliases, collapse(alias))
		}
		out = n
		return b.PutNode(n)
	})
	return out, err
}

// MergeNodes merges node merged into survivor: every edge and fact of
// merged moves to survivor (folding into an equivalent edge where one
// exists), merged's name and aliases become survivor's aliases, merged's
// id redirects to survivor, and the merge is recorded with who, when, why
// and the edge mapping.
func (s *Store) MergeNodes(ctx context.Context, survivorID, mergedID, who, why string) (*Merge, error) {
	var rec *Merge
	_, err := s.Update(ctx, func(b *Batch) error {
		if survivorID == mergedID {
			return fmt.Errorf("%w: cannot merge a node into itself", ErrInvalid)
		}
		sv, mg := b.Node(survivorID), b.Node(mergedID)
		if sv == nil || mg == nil {
			return fmt.Errorf("merge %s into %s: %w", mergedID, survivorID, ErrNotFound)
		}
		if sv.Namespace != mg.Namespace {
			return fmt.Errorf("%w: nodes of different namespaces", ErrInvalid)
		}
		rec = &Merge{Survivor: sv.ID, Merged: mg.ID, Name: mg.Name, Who: who, Why: why, At: b.now, Edges: map[string]string{}}
		for _, eid := range b.touching(mg.ID) {
			old := b.Edge(eid)
			if old == nil {
				continue
			}
			moved := cloneEdge(old)
			if moved.Source == mg.ID {
				moved.Source = sv.ID
			}
			if moved.Target == mg.ID {
				moved.Target = sv.ID
			}
			if err := b.DeleteEdge(old.ID); err != nil {
				return err
			}
			if moved.Source == moved.Target {
				continue // an edge between the two becomes a self-loop: drop it
			}
			if into := b.FindEdge(moved.Namespace, moved.Source, moved.Type, identityPredicate(moved), moved.Target); into != nil {
				foldEdge(into, moved)
				rec.Edges[old.ID] = into.ID
				if err := b.PutEdge(into); err != nil {
					return err
				}
				continue
			}
			moved.ID, moved.Seq = "", 0
			if err := b.PutEdge(moved); err != nil {
				return err
			}
			rec.Edges[old.ID] = moved.ID
		}
		for _, a := range append([]string{mg.Name}, mg.Aliases...) {
			if Canonical(a) != Canonical(sv.Name) && !slices.ContainsFunc(sv.Aliases, func(x string) bool { return Canonical(x) == Canonical(a) }) {
				sv.Aliases = append(sv.Aliases, a)
				rec.Aliases = append(rec.Aliases, a)
			}
		}
		for _, id := range mg.Attributes.RLDSEpisodeIDs {
			sv.Attributes.RLDSEpisodeIDs = appendRecent(sv.Attributes.RLDSEpisodeIDs, id)
		}
		for _, id := range mg.Attributes.CMSSpanIDs {
			sv.Attributes.CMSSpanIDs = appendRecent(sv.Attributes.CMSSpanIDs, id)
		}
		for _, t := range mg.Attributes.Tags {
			AddTag(sv, t)
		}
		if err := b.DeleteNode(mg.ID); err != nil {
			return err
		}
		// The survivor's aliases are registered under the survivor's type;
		// the merged node's own type keeps resolving through the redirect.
		if err := b.PutNode(sv); err != nil {
			return err
		}
		if mg.Type != sv.Type {
			b.aliases[aliasKey(mg.Namespace, mg.Type, mg.Name)] = sv.ID
		}
		b.redirects[mg.ID] = sv.ID
		if err := b.PutRecord(recordRedirect, mg.ID, []byte(sv.ID)); err != nil {
			return err
		}
		raw, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return b.PutRecord(recordMerge, rec.At.Format(time.RFC3339Nano)+"\x00"+mg.ID, raw)
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// foldEdge adds the evidence of from into into.
func foldEdge(into, from *Edge) {
	into.Evidence += from.Evidence
	into.Provenance = append(into.Provenance, from.Provenance...)
	slices.SortStableFunc(into.Provenance, func(a, b Provenance) int { return a.ObservedAt.Compare(b.ObservedAt) })
	if len(into.Provenance) > MaxProvenance {
		into.Provenance = slices.Delete(into.Provenance, 0, len(into.Provenance)-MaxProvenance)
	}
	into.Belief.Merge(from.Belief)
	into.Confidence = into.Belief.Score
	if from.Salience.Score > into.Salience.Score {
		into.Salience = from.Salience
	}
	widen(&into.Scope.TimeRange, from.Scope.TimeRange.From)
	widen(&into.Scope.TimeRange, from.Scope.TimeRange.To)
}

// Merges returns every recorded merge, oldest first.
func (s *Store) Merges() ([]Merge, error) { return listRecords[Merge](s, recordMerge) }

func (s *Store) loadRedirects(v *view) error {
	return s.Records(recordRedirect, func(from string, raw []byte) error {
		v.redirects[from] = string(raw)
		return nil
	})
}
