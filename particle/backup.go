package particle

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/dgraph-io/badger/v4"
)

// Backup writes a consistent snapshot of the whole store to w, in
// Badger's backup format (a stream of length-prefixed protobuf KV
// lists), while writers go on: it reads at one Badger timestamp, so it
// holds every committed batch up to that moment and nothing of any
// later one. It returns that timestamp.
func (s *Store) Backup(w io.Writer) (uint64, error) {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return 0, ErrClosed
	}
	// One producer reads everything through one read transaction: with
	// more, each would open its own and the ranges would be read at
	// different moments (a batch could land half in the backup).
	st := s.db.NewStream()
	st.LogPrefix = "particle.Backup"
	st.NumGo = 1
	ts, err := st.Backup(w, 0)
	if err != nil {
		return 0, fmt.Errorf("particle: backup: %w", err)
	}
	return ts, nil
}

// Restore creates the store in dir from a [Store.Backup] stream. dir
// must not hold a store already. The restored store opens like any
// other; its view is loaded from what was restored. logger may be nil.
func Restore(dir string, r io.Reader, logger *slog.Logger) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("particle: restore: %s is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("particle: restore: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	bo := badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithLogger(badgerLogger{logger.With("component", "badger")}).
		WithNumVersionsToKeep(1)
	db, err := badger.Open(bo)
	if err != nil {
		return fmt.Errorf("particle: restore: open %s: %w", dir, err)
	}
	if err := db.Load(r, 256); err != nil {
		db.Close()
		return fmt.Errorf("particle: restore: load: %w", err)
	}
	if err := db.Sync(); err != nil {
		db.Close()
		return fmt.Errorf("particle: restore: sync: %w", err)
	}
	return db.Close()
}

// CollectGarbage runs Badger's value-log garbage collection until it
// finds nothing more to rewrite: every value-log file at least ratio
// stale is rewritten and its space reclaimed. It returns how many files
// were rewritten.
func (s *Store) CollectGarbage(ratio float64) (int, error) {
	n := 0
	for n < 1000 {
		s.mu.RLock()
		closed := s.closed
		s.mu.RUnlock()
		if closed {
			return n, ErrClosed
		}
		err := s.db.RunValueLogGC(ratio)
		switch {
		case err == nil:
			n++
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			return n, nil
		default:
			return n, fmt.Errorf("%w: value-log gc: %v", ErrStorage, err)
		}
	}
	return n, nil
}
