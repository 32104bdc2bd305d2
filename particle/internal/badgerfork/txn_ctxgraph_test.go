package badger

// Tests of ctxgraph's Txn.Reserve (CTXGRAPH.md).

import (
	"fmt"
	"testing"
)

// TestReserveKeepsEveryWrite: a transaction that reserved room reads its
// own writes and commits them all; a Reserve after a write keeps that
// write; a read-only transaction ignores it.
func TestReserveKeepsEveryWrite(t *testing.T) {
	db, err := Open(syncedOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	txn := db.NewTransaction(true)
	txn.Reserve(64)
	if err := txn.Set([]byte("first"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	txn.Reserve(1 << 10) // a write is pending: no effect
	for i := range 100 {
		if err := txn.Set(fmt.Appendf(nil, "key-%03d", i), fmt.Appendf(nil, "value-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if item, err := txn.Get([]byte("first")); err != nil || item == nil {
		t.Fatalf("the transaction does not read its first write: %v", err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := string(readValue(t, db, []byte("first"))); got != "1" {
		t.Errorf("first = %q after the commit, want 1", got)
	}
	for i := range 100 {
		if got, want := string(readValue(t, db, fmt.Appendf(nil, "key-%03d", i))), fmt.Sprintf("value-%d", i); got != want {
			t.Errorf("key-%03d = %q, want %q", i, got, want)
		}
	}
	ro := db.NewTransaction(false)
	defer ro.Discard()
	ro.Reserve(16)
	if ro.pendingWrites != nil {
		t.Errorf("a read-only transaction made room for writes")
	}
}
