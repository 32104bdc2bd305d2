package particle

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// Snapshot is a consistent, read-only view of what Badger holds at one
// instant: every method reads inside the same Badger read transaction,
// so a long export sees no write committed after it began, however
// much ingest goes on meanwhile, and never waits for a writer (nor makes
// one wait).
//
// Unlike [Reader], a Snapshot streams from disk: the iterators decode
// one record at a time, so memory stays bounded by what the caller
// keeps, whatever the store's size. Records it returns are the caller's
// to keep and change.
//
// A Snapshot is valid only inside the function given to
// [Store.Snapshot] and is not safe for concurrent use.
type Snapshot struct {
	ctx context.Context
	txn *badger.Txn
	pol *ruleSet // the policy when the snapshot began (policy.go)
	// policyNodes caches endpoint nodes for policy checks.
	policyNodes map[string]*Node
}

// Snapshot calls fn with a consistent snapshot of the store and
// discards it when fn returns. Iterators stop with ctx's error once ctx
// is done.
func (s *Store) Snapshot(ctx context.Context, fn func(sn *Snapshot) error) error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	return fn(&Snapshot{ctx: ctx, txn: txn, pol: s.policies()})
}

// ctxCheckEvery is how many records an iterator reads between checks of
// its context.
const ctxCheckEvery = 256

// scan calls fn with each key and value under prefix p, in key order.
// Both slices are valid only during the call.
func (sn *Snapshot) scan(p []byte, what string, fn func(k, v []byte) error) error {
	return sn.scanWith(p, what, nil, fn)
}

// scanWith is scan, calling before (if set) with each key before its
// value is read.
func (sn *Snapshot) scanWith(p []byte, what string, before func(k []byte) error, fn func(k, v []byte) error) error {
	it := sn.txn.NewIterator(badger.IteratorOptions{Prefix: p})
	defer it.Close()
	n := 0
	for it.Seek(p); it.ValidForPrefix(p); it.Next() {
		if n++; n%ctxCheckEvery == 0 {
			if err := sn.ctx.Err(); err != nil {
				return err
			}
		}
		item := it.Item()
		var err error
		if before != nil {
			err = before(item.Key())
		}
		if err == nil {
			err = item.Value(func(v []byte) error { return fn(item.Key(), v) })
		}
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				return fmt.Errorf("particle: %s: %w", what, err)
			}
			return err
		}
	}
	return nil
}

// nsPrefix selects one table: every namespace when ns is "", else ns.
func nsPrefix(p prefix, ns string) []byte {
	if ns == "" {
		return []byte{byte(p)}
	}
	return append(key(p, ns), 0)
}

// scanRecords decodes each value of table t under p with decode, given
// the embedding stored apart for it (vectorJoin), and calls fn.
func scanRecords[T any](sn *Snapshot, t prefix, p []byte, what string, decode func(b, vec []byte) (*T, error), fn func(*T) error) error {
	j := newVectorJoin(sn.txn, t)
	defer j.close()
	var vec []byte
	return sn.scanWith(p, what, func(k []byte) (err error) {
		vec, err = j.of(k)
		return err
	}, func(_, v []byte) error {
		r, err := decode(v, vec)
		if err != nil {
			return err
		}
		return fn(r)
	})
}

// Nodes calls fn with every node of namespace ns ("" for all), in key
// order (namespace, id).
func (sn *Snapshot) Nodes(ns string, fn func(*Node) error) error {
	return scanRecords(sn, prefixNode, nsPrefix(prefixNode, ns), "nodes", decodeNode, fn)
}

// Edges calls fn with every edge of namespace ns ("" for all), in key
// order (namespace, id); edge ids are time-ordered, so this is the order
// the edges were created in.
func (sn *Snapshot) Edges(ns string, fn func(*Edge) error) error {
	return scanRecords(sn, prefixEdge, nsPrefix(prefixEdge, ns), "edges", decodeEdge, fn)
}

// Episodes calls fn with every episode of namespace ns ("" for all), in
// key order (namespace, id).
func (sn *Snapshot) Episodes(ns string, fn func(*Episode) error) error {
	return sn.scan(nsPrefix(prefixEpisode, ns), "episodes", func(_, v []byte) error {
		e, err := decodeEpisode(v)
		if err != nil {
			return err
		}
		if err := joinEdgeChunks(sn.txn, e); err != nil {
			return err
		}
		return fn(e)
	})
}

// Steps calls fn with each stored step of an episode, in index order.
// raw is valid only during the call.
func (sn *Snapshot) Steps(ns, episode string, fn func(idx int, raw []byte) error) error {
	return sn.scan(stepPrefix(ns, episode), "steps", func(k, v []byte) error {
		idx, ok := stepIndexOf(k)
		if !ok {
			return fmt.Errorf("%w: step key %x", ErrCorrupt, k)
		}
		return fn(idx, v)
	})
}

// get calls fn with the value of k; ErrNotFound names what when absent.
func (sn *Snapshot) get(k []byte, what string, fn func(v []byte) error) error {
	item, err := sn.txn.Get(k)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	case errors.Is(err, badger.ErrDBClosed):
		return ErrClosed
	case err != nil:
		return fmt.Errorf("%w: read %s: %v", ErrStorage, what, err)
	}
	return item.Value(fn)
}

// getRecord decodes the value of k, with the embedding stored apart for
// it, with decode.
func getRecord[T any](sn *Snapshot, k []byte, what string, decode func(b, vec []byte) (*T, error)) (*T, error) {
	vec, err := getVector(sn.txn, k)
	if err != nil {
		return nil, err
	}
	var r *T
	err = sn.get(k, what, func(v []byte) (err error) {
		r, err = decode(v, vec)
		return err
	})
	return r, err
}

// Node returns node id of namespace ns as the snapshot holds it.
func (sn *Snapshot) Node(ns, id string) (*Node, error) {
	return getRecord(sn, nodeKey(ns, id), "node "+id, decodeNode)
}

// Edge returns edge id of namespace ns as the snapshot holds it.
func (sn *Snapshot) Edge(ns, id string) (*Edge, error) {
	return getRecord(sn, edgeKey(ns, id), "edge "+id, decodeEdge)
}

// Episode returns episode id of namespace ns as the snapshot holds it.
func (sn *Snapshot) Episode(ns, id string) (*Episode, error) {
	var e *Episode
	err := sn.get(episodeKey(ns, id), "episode "+id, func(v []byte) (err error) {
		e, err = decodeEpisode(v)
		return err
	})
	if err == nil {
		err = joinEdgeChunks(sn.txn, e)
	}
	return e, err
}

// Blob returns the bytes stored under a "blob:<hex>" reference.
func (sn *Snapshot) Blob(ref string) ([]byte, error) {
	return sn.AppendBlob(nil, ref)
}

// AppendBlob appends the bytes stored under a "blob:<hex>" reference to
// dst, so that a caller can reuse one buffer for many blobs.
func (sn *Snapshot) AppendBlob(dst []byte, ref string) ([]byte, error) {
	h, ok := strings.CutPrefix(ref, "blob:")
	if !ok {
		return dst, fmt.Errorf("%w: blob reference %q", ErrInvalid, ref)
	}
	err := sn.get(blobKey(h), "blob "+h, func(v []byte) error {
		dst = append(dst, v...)
		return nil
	})
	return dst, err
}

// RecordKind names a table of records that carry embeddings.
type RecordKind uint8

// The record kinds of [Snapshot.EmbeddingDims].
const (
	KindNode RecordKind = iota + 1
	KindEdge
	KindEpisode
)

// EmbeddingDims counts the records of kind k in namespace ns ("" for
// all) by the length of their embedding (0 for none). It reads only the
// value headers, not the JSON, so that a writer can fix a schema's
// vector width before it streams the records.
func (sn *Snapshot) EmbeddingDims(k RecordKind, ns string) (map[int]int64, error) {
	var p prefix
	switch k {
	case KindNode:
		p = prefixNode
	case KindEdge:
		p = prefixEdge
	case KindEpisode:
		p = prefixEpisode
	default:
		return nil, fmt.Errorf("%w: record kind %d", ErrInvalid, k)
	}
	dims := map[int]int64{}
	err := sn.scan(nsPrefix(p, ns), "embedding dims", func(_, v []byte) error {
		n, err := embeddingLen(v)
		if err != nil {
			return err
		}
		dims[n]++
		return nil
	})
	return dims, err
}
