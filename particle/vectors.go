package particle

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// A node's or edge's embedding is stored apart from its record, under
// vectorKey (format 3, codecv2.go), and written only when it changes. The
// view remembers which items' embeddings are stored so (view.apart): an
// item loaded from a record of an earlier format holds its embedding
// inline, and its first rewrite stores the embedding apart.

// vectorJoin reads the embeddings stored apart for a table's records
// beside a scan of the records in key order, with one iterator over the
// vector table that moves forward as the scan does: vectors lie in the
// order of their records (vectorKey), so each record costs a step of it,
// not a look-up. Reading a vector before its record's value also keeps
// the two reads apart: neither holds Badger's value log while the other
// reads it.
type vectorJoin struct {
	it     *badger.Iterator
	want   []byte // the vector key sought, reused
	buf    []byte // the last vector read, reused
	sought bool
}

// newVectorJoin starts a join over the vectors of table in txn. Close it.
func newVectorJoin(txn *badger.Txn, table prefix) *vectorJoin {
	return &vectorJoin{it: txn.NewIterator(badger.IteratorOptions{Prefix: []byte{byte(prefixVector), byte(table)}})}
}

func (j *vectorJoin) close() { j.it.Close() }

// vectorSeekAfter is how many vectors without a record of the scan (left
// by a failed write, reported by Check) the join steps over before it
// seeks instead.
const vectorSeekAfter = 16

// of returns the vector stored for the record under key k, nil if there
// is none. Keys must come in ascending order. What it returns is valid
// until the next call.
func (j *vectorJoin) of(k []byte) ([]byte, error) {
	j.want = append(append(j.want[:0], byte(prefixVector)), k...)
	if !j.sought {
		j.it.Seek(j.want)
		j.sought = true
	}
	for steps := 0; j.it.Valid(); steps++ {
		item := j.it.Item()
		switch c := bytes.Compare(item.Key(), j.want); {
		case c > 0:
			return nil, nil
		case c == 0:
			v, err := item.ValueCopy(j.buf[:0])
			if err != nil {
				return nil, fmt.Errorf("%w: read the embedding of %q: %v", ErrStorage, k, err)
			}
			j.buf = v
			return v, nil
		}
		if steps == vectorSeekAfter {
			j.it.Seek(j.want)
			continue
		}
		j.it.Next()
	}
	return nil, nil
}

// getVector returns the vector stored for the record under key k in txn,
// nil if there is none.
func getVector(txn *badger.Txn, k []byte) ([]byte, error) {
	item, err := txn.Get(vectorKey(k))
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return nil, nil
	case errors.Is(err, badger.ErrDBClosed):
		return nil, ErrClosed
	case err != nil:
		return nil, fmt.Errorf("%w: read the embedding of %q: %v", ErrStorage, k, err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: read the embedding of %q: %v", ErrStorage, k, err)
	}
	return v, nil
}

// storedNodeVector is the embedding of the view's node id at seq if it
// is stored apart, else nil.
func (v *view) storedNodeVector(seq uint64, id string) []float32 {
	if v.apart.has(seq) && seq < uint64(len(v.nodeSeq)) && v.nodeSeq[seq] != nil && v.nodeSeq[seq].ID == id {
		return v.nodeSeq[seq].Embedding
	}
	return nil
}

// storedEdgeVector is storedNodeVector for an edge.
func (v *view) storedEdgeVector(seq uint64, id string) []float32 {
	if v.apart.has(seq) && seq < uint64(len(v.edgeSeq)) && v.edgeSeq[seq] != nil && v.edgeSeq[seq].ID == id {
		return v.edgeSeq[seq].Embedding
	}
	return nil
}

// seqBits is a set of seqs, a bit each.
type seqBits []uint64

func (s seqBits) has(seq uint64) bool {
	i := seq / 64
	return i < uint64(len(s)) && s[i]&(1<<(seq%64)) != 0
}

// set adds seq to the set (on) or takes it out. Seq 0 (none) stays out.
func (s *seqBits) set(seq uint64, on bool) {
	if seq == 0 {
		return
	}
	i := seq / 64
	if i >= uint64(len(*s)) {
		if !on {
			return
		}
		*s = append(*s, make([]uint64, int(i)+1-len(*s))...)
	}
	if on {
		(*s)[i] |= 1 << (seq % 64)
	} else {
		(*s)[i] &^= 1 << (seq % 64)
	}
}
