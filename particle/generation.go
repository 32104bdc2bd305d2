package particle

import (
	"errors"
	"fmt"
	"hash/fnv"

	badger "github.com/dgraph-io/badger/v4"
)

// A Generation names a committed state of a store. Every committed batch
// writes the store's counts record, in its own transaction: the record's
// Badger version is the batch's commit timestamp and its value the
// running totals. So a new commit always gives a new Generation, and a
// store that has not been written since keeps its Generation across
// Close and Open (which write nothing).
//
// An index derived from the store (the keyword index) can save the
// Generation its contents match beside them; while the store's
// Generation is unchanged it can trust them without recomputing them.
type Generation struct {
	// Version is the commit timestamp of the last batch (0: none yet).
	Version uint64
	// Sum is the FNV-1a hash of the counts record that batch wrote: a
	// restored or copied store with the same version but another history
	// does not pass for this one.
	Sum uint64
}

// Generation returns the store's Generation. It waits for a commit in
// progress, so that every batch of the Generation has reached the
// store's subscribers; it fails with [ErrClosed] after Close. It does
// not wait for the adjacency a load leaves building (a write does): a
// start after a crash asks it for its catch-ups, beside that build.
func (s *Store) Generation() (Generation, error) {
	if err := s.lockCommits(); err != nil {
		return Generation{}, err
	}
	defer s.writeMu.Unlock()
	var g Generation
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(metaKey("counts"))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		g.Version = item.Version()
		return item.Value(func(b []byte) error {
			h := fnv.New64a()
			h.Write(b)
			g.Sum = h.Sum64()
			return nil
		})
	})
	if err != nil {
		return Generation{}, fmt.Errorf("particle: generation: %w", err)
	}
	return g, nil
}
