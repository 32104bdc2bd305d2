package particle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// RecordForgotten is the record kind of [Forgotten] entries, keyed by
// time then node id.
const RecordForgotten = "forgotten"

// Forgotten records that a node was forgotten: which, by whom, when and
// why, and how much went with it. It does not keep the node's name: the
// store forgets it. NameSHA256 lets an auditor check whether a given
// name was forgotten without the store holding it.
type Forgotten struct {
	ID         string    `json:"id"`
	Namespace  string    `json:"namespace"`
	Type       NodeType  `json:"type"`
	NameSHA256 string    `json:"name_sha256"`
	Who        string    `json:"who"`
	Why        string    `json:"why"`
	At         time.Time `json:"at"`
	// Edges is how many edges (relations and facts) were removed.
	Edges int `json:"edges"`
	// Episodes is how many episode records no longer list it.
	Episodes int `json:"episodes"`
	// Records is how many merge, redirect, supersession and
	// contradiction records naming it were removed.
	Records int `json:"records"`
	// Steps, Spans and Sessions count the stored steps, CMS spans and
	// sessions the caller scrubbed of its names.
	Steps    int `json:"steps"`
	Spans    int `json:"spans"`
	Sessions int `json:"sessions"`

	// Names are the name and aliases the node was known by, and
	// EpisodeIDs the episodes that touched it, for the caller to scrub
	// other layers with. They are never stored.
	Names      []string `json:"-"`
	EpisodeIDs []string `json:"-"`
}

// NameDigest is the SHA-256 of a name's canonical form, as
// [Forgotten.NameSHA256] holds it.
func NameDigest(name string) string {
	sum := sha256.Sum256([]byte(Canonical(name)))
	return hex.EncodeToString(sum[:])
}

// Forget removes node id from the graph for good, in one transaction:
// the node, its aliases, every edge and fact touching it, its place in
// episode records, the merge, redirect, supersession and contradiction
// records naming it. scrub, when not nil, runs in the same transaction
// with the Forgotten record (Names and EpisodeIDs filled) so that the
// caller removes the names from what particle stores opaquely (steps,
// spans, sessions) and fills in Steps, Spans and Sessions. The record is
// stored under kind "forgotten". Episode nodes cannot be forgotten.
func (s *Store) Forget(ctx context.Context, id, who, why string, scrub func(b *Batch, f *Forgotten) error) (*Forgotten, error) {
	var f *Forgotten
	_, err := s.Update(ctx, func(b *Batch) error {
		var err error
		if f, err = b.forget(id, who, why); err != nil {
			return err
		}
		if scrub != nil {
			if err := scrub(b, f); err != nil {
				return err
			}
		}
		raw, err := json.Marshal(f)
		if err != nil {
			return err
		}
		return b.PutRecord(RecordForgotten, f.At.Format(time.RFC3339Nano)+"\x00"+f.ID, raw)
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	for from, to := range s.v.redirects {
		if to == id || from == id {
			delete(s.v.redirects, from)
		}
	}
	s.mu.Unlock()
	return f, nil
}

// Forgottens returns every Forgotten record, oldest first.
func (s *Store) Forgottens() ([]Forgotten, error) {
	var out []Forgotten
	err := s.Records(RecordForgotten, func(_ string, raw []byte) error {
		var f Forgotten
		if err := json.Unmarshal(raw, &f); err != nil {
			return err
		}
		out = append(out, f)
		return nil
	})
	return out, err
}

func (b *Batch) forget(id, who, why string) (*Forgotten, error) {
	n := b.Node(id)
	if n == nil {
		return nil, fmt.Errorf("node %s: %w", id, ErrNotFound)
	}
	if n.Type == NodeEpisode {
		return nil, fmt.Errorf("%w: node %s stands for an episode; episodes are not forgotten as entities", ErrInvalid, id)
	}
	f := &Forgotten{ID: n.ID, Namespace: n.Namespace, Type: n.Type, NameSHA256: NameDigest(n.Name),
		Who: who, Why: why, At: b.now, Names: append([]string{n.Name}, n.Aliases...)}
	edges := map[string]bool{}
	for _, eid := range b.touching(id) {
		edges[eid] = true
	}
	f.Edges = len(edges)

	// Episode records list the nodes and edges they touched, under the
	// node's id or the id of a node merged into it.
	b.s.mu.RLock()
	ids := map[string]bool{id: true}
	for from := range b.s.v.redirects {
		if (Reader{v: b.s.v}).Resolve(from) == id {
			ids[from] = true
		}
	}
	var eps [][2]string
	for _, ep := range b.s.v.episodes {
		if slices.ContainsFunc(ep.Nodes, func(n string) bool { return ids[n] }) || slices.ContainsFunc(ep.Edges, func(e string) bool { return edges[e] }) {
			eps = append(eps, [2]string{ep.Namespace, ep.ID})
		}
	}
	b.s.mu.RUnlock()
	slices.SortFunc(eps, func(a, b [2]string) int { return cmpPair(a, b) })
	for _, k := range eps {
		ep := b.Episode(k[0], k[1])
		// Copies: the lists are shared with the view's episode (Batch.Episode).
		ep.Nodes = slices.DeleteFunc(slices.Clone(ep.Nodes), func(x string) bool { return ids[x] })
		ep.Edges = slices.DeleteFunc(slices.Clone(ep.Edges), func(x string) bool { return edges[x] })
		ep.edgePos = nil // the places moved
		if ids[ep.LastTool] {
			ep.LastTool = ""
		}
		if err := b.PutEpisode(ep); err != nil {
			return nil, err
		}
		f.EpisodeIDs = append(f.EpisodeIDs, ep.ID)
	}
	f.Episodes = len(eps)

	// Records that name the node or its facts.
	names := func(kind string, match func(key string, raw []byte) bool) error {
		return b.eachRecord(kind, func(key string, raw []byte) {
			if match(key, raw) {
				b.deleteKey(recordKey(kind, key))
				f.Records++
			}
		})
	}
	for _, r := range []struct {
		kind  string
		match func(key string, raw []byte) bool
	}{
		{recordRedirect, func(key string, raw []byte) bool { return key == id || string(raw) == id }},
		{recordMerge, func(_ string, raw []byte) bool {
			var m Merge
			return json.Unmarshal(raw, &m) == nil && (m.Survivor == id || m.Merged == id)
		}},
		{recordSupersession, func(_ string, raw []byte) bool {
			var s Supersession
			return json.Unmarshal(raw, &s) == nil && (s.Subject == id || edges[s.Old] || edges[s.New])
		}},
		{recordContradict, func(_ string, raw []byte) bool {
			var c Contradiction
			return json.Unmarshal(raw, &c) == nil && (c.Subject == id || edges[c.A] || edges[c.B])
		}},
	} {
		if err := names(r.kind, r.match); err != nil {
			return nil, err
		}
	}
	if err := b.DeleteNode(id); err != nil {
		return nil, err
	}
	return f, b.err
}

func cmpPair(a, b [2]string) int {
	if a[0] != b[0] {
		if a[0] < b[0] {
			return -1
		}
		return 1
	}
	switch {
	case a[1] < b[1]:
		return -1
	case a[1] > b[1]:
		return 1
	}
	return 0
}

// eachRecord calls fn with every record of kind as the batch's
// transaction sees it.
func (b *Batch) eachRecord(kind string, fn func(key string, raw []byte)) error {
	p := append(key(prefixRecord, kind), 0)
	it := b.txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	for it.Seek(p); it.ValidForPrefix(p); it.Next() {
		item := it.Item()
		k := string(item.Key()[len(p):])
		if err := item.Value(func(v []byte) error { fn(k, v); return nil }); err != nil {
			return fmt.Errorf("%w: read %s records: %v", ErrStorage, kind, err)
		}
	}
	return nil
}

func (b *Batch) deleteKey(k []byte) {
	if b.err != nil {
		return
	}
	if err := b.txn.Delete(k); err != nil {
		b.err = fmt.Errorf("%w: delete: %v", ErrStorage, err)
	}
}

// ScrubSteps rewrites the stored steps of an episode through fn, which
// returns the new encoding and whether it changed anything. It returns
// how many steps changed.
func (b *Batch) ScrubSteps(ns, episode string, fn func(raw []byte) ([]byte, bool, error)) (int, error) {
	return b.scrubPrefix(stepPrefix(ns, episode), fn)
}

// ScrubSpans rewrites the stored CMS spans of namespace ns through fn,
// as ScrubSteps does steps.
func (b *Batch) ScrubSpans(ns string, fn func(raw []byte) ([]byte, bool, error)) (int, error) {
	return b.scrubPrefix(append(key(prefixSpan, ns), 0), fn)
}

// ScrubSessions rewrites the stored sessions of namespace ns through fn.
func (b *Batch) ScrubSessions(ns string, fn func(raw []byte) ([]byte, bool, error)) (int, error) {
	return b.scrubPrefix(append(key(prefixSession, ns), 0), fn)
}

func (b *Batch) scrubPrefix(p []byte, fn func(raw []byte) ([]byte, bool, error)) (int, error) {
	type kv struct{ k, v []byte }
	var changed []kv
	it := b.txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true, PrefetchSize: 64})
	for it.Seek(p); it.ValidForPrefix(p); it.Next() {
		item := it.Item()
		var out []byte
		var ok bool
		if err := item.Value(func(v []byte) error {
			var err error
			out, ok, err = fn(v)
			return err
		}); err != nil {
			it.Close()
			return 0, err
		}
		if ok {
			changed = append(changed, kv{item.KeyCopy(nil), out})
		}
	}
	it.Close()
	for _, c := range changed {
		b.set(c.k, c.v)
	}
	return len(changed), b.err
}
