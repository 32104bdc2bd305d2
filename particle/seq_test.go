package particle

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// TestSeqsRideOnTheBatches: the compact ids (seqs) a batch hands out are
// stored with it, in its own transaction. They follow one another
// across a failed batch (whose ids are handed out again), a Close and
// Open (which write nothing), a crash (which loses no committed id to
// a later batch) and a store whose sequence a lease of Badger's left
// ahead; a sequence value that is not 8 bytes fails the Open.
func TestSeqsRideOnTheBatches(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *Store { return openScratchStore(t, dir) }
	put := func(s *Store, ids ...string) {
		t.Helper()
		if _, err := s.Update(ctx, func(b *Batch) error {
			for _, id := range ids {
				if err := b.PutNode(&Node{ID: id, Type: NodeEntity, Name: id}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	seqOf := func(s *Store, id string) (seq uint64) {
		t.Helper()
		s.Read(func(r Reader) {
			if n := r.Node(id); n != nil {
				seq = n.Seq
			}
		})
		if seq == 0 {
			t.Fatalf("node %s has no seq", id)
		}
		return seq
	}
	stored := func(s *Store) uint64 {
		t.Helper()
		next, err := readSeq(s.db)
		if err != nil {
			t.Fatal(err)
		}
		return next
	}

	s := open()
	put(s, "a", "b", "c")
	if got := []uint64{seqOf(s, "a"), seqOf(s, "b"), seqOf(s, "c")}; fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("seqs of a new store's first batch: %v, want [1 2 3]", got)
	}
	if next := stored(s); next != 3 {
		t.Fatalf("stored next id %d after ids 1-3, want 3 (the next handed out is 4)", next)
	}
	failed := errors.New("refused")
	if _, err := s.Update(ctx, func(b *Batch) error {
		if err := b.PutNode(&Node{ID: "lost", Type: NodeEntity, Name: "lost"}); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("failing batch: %v", err)
	}
	put(s, "d")
	if seq := seqOf(s, "d"); seq != 4 {
		t.Fatalf("seq after a failed batch %d, want 4 (its id handed out again)", seq)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open()
	version := s.db.MaxVersion()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	if v := s.db.MaxVersion(); v != version {
		t.Fatalf("an Open and Close with no batch moved Badger from version %d to %d", version, v)
	}
	put(s, "e")
	if seq := seqOf(s, "e"); seq != 5 {
		t.Fatalf("seq after a Close and Open %d, want 5", seq)
	}
	crash(t, s)

	s = open()
	if seq := seqOf(s, "e"); seq != 5 {
		t.Fatalf("after a crash the committed node has seq %d, want 5", seq)
	}
	put(s, "f")
	if seq := seqOf(s, "f"); seq != 6 {
		t.Fatalf("seq after a crash %d, want 6", seq)
	}
	// A store of before the ids rode on the batches: Badger's sequence
	// leased ids up to 1000 and the run died.
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(metaKey("seq"), binary.BigEndian.AppendUint64(nil, 1000))
	}); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	s = open()
	put(s, "g")
	if seq := seqOf(s, "g"); seq != 1001 {
		t.Fatalf("seq after a lease to 1000 %d, want 1001", seq)
	}
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(metaKey("seq"), []byte{1, 2, 3})
	}); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	o := DefaultOptions(dir)
	o.SyncWrites = false
	if s, err := Open(o); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open with a 3-byte sequence value: %v, want ErrCorrupt", err)
	}
}
