package badger

// Tests of ctxgraph's change to Badger (CTXGRAPH.md, pwrite.go). The
// fork carries none of Badger's own tests.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4/y"
)

// syncedOptions are options for a small store that syncs every write
// and sends values past 64 bytes to the value log.
func syncedOptions(dir string) Options {
	return DefaultOptions(dir).WithSyncWrites(true).WithValueThreshold(64).
		WithMemTableSize(4 << 20).WithValueLogFileSize(8 << 20).WithLogger(nil)
}

func setEntry(t *testing.T, db *DB, k, v []byte) {
	t.Helper()
	if err := db.Update(func(txn *Txn) error { return txn.Set(k, v) }); err != nil {
		t.Fatal(err)
	}
}

func readValue(t *testing.T, db *DB, k []byte) []byte {
	t.Helper()
	var out []byte
	if err := db.View(func(txn *Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		out, err = item.ValueCopy(nil)
		return err
	}); err != nil {
		t.Fatalf("get %q: %v", k, err)
	}
	return out
}

// TestMemtableLogWaitsForValueLogSync: with SyncWrites, a commit's
// entries reach the memtable's log file only after the value log they
// point into has its values and is being synced, even when they are
// more than the log's buffer writes out at once (pendWriteAt); then
// both are on file.
func TestMemtableLogWaitsForValueLogSync(t *testing.T) {
	db, err := Open(syncedOptions(t.TempDir()).WithMemTableSize(16 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	setEntry(t, db, []byte("warm"), bytes.Repeat([]byte("w"), 200))

	big := bytes.Repeat([]byte("value-in-flight "), 16) // 256 bytes: to the value log
	small := bytes.Repeat([]byte("i"), 60)              // inline: in the memtable's log
	const n = 15000                                     // > 1 MiB of the memtable's log
	keyOf := func(i int) []byte { return []byte(fmt.Sprintf("key-in-flight-%05d", i)) }
	walPath := db.mt.wal.path
	var calls int
	testHookBeforeVlogSync = func(lf *logFile) {
		calls++
		vlogBytes, err := os.ReadFile(lf.path)
		if err != nil {
			t.Error(err)
			return
		}
		if !bytes.Contains(vlogBytes, big) {
			t.Error("the value is not in the value log file when its sync starts")
		}
		walBytes, err := os.ReadFile(walPath)
		if err != nil {
			t.Error(err)
			return
		}
		for _, i := range []int{0, n / 2, n - 1} {
			if bytes.Contains(walBytes, keyOf(i)) {
				t.Errorf("%s reached the memtable's log before the value log was synced", keyOf(i))
			}
		}
	}
	defer func() { testHookBeforeVlogSync = nil }()
	if err := db.Update(func(txn *Txn) error {
		if err := txn.Set(keyOf(0), big); err != nil {
			return err
		}
		for i := 1; i < n; i++ {
			if err := txn.Set(keyOf(i), small); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	testHookBeforeVlogSync = nil
	if calls != 1 {
		t.Fatalf("value log synced %d times for one commit, want 1", calls)
	}
	walBytes, err := os.ReadFile(walPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		if !bytes.Contains(walBytes, keyOf(i)) {
			t.Fatalf("%s is not in the memtable's log after the commit", keyOf(i))
		}
	}
	if got := readValue(t, db, keyOf(0)); !bytes.Equal(got, big) {
		t.Fatalf("read %q", got)
	}
	if got := readValue(t, db, keyOf(n-1)); !bytes.Equal(got, small) {
		t.Fatalf("read %q", got)
	}
}

// TestMemtableLogZeroesTheNextHeader: each write of the memtable's log
// zeroes the header after its last entry (what Badger did through the
// map), so that a replay stops there even over stale bytes; the store
// reopens with every value.
func TestMemtableLogZeroesTheNextHeader(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(syncedOptions(dir).WithSyncWrites(sync))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]byte{}
			for i := range 20 {
				wal := db.mt.wal
				// Stale bytes where the next entries and the header
				// after them go, as a reused or torn file may hold.
				stale := bytes.Repeat([]byte{0xFF}, 4096)
				if _, err := wal.Fd.WriteAt(stale, int64(wal.writeAt)); err != nil {
					t.Fatal(err)
				}
				k := []byte(fmt.Sprintf("key-%03d", i))
				v := bytes.Repeat([]byte{byte('a' + i)}, 40+i*30) // inline and in the value log
				setEntry(t, db, k, v)
				want[string(k)] = v
				head := make([]byte, maxHeaderSize)
				if _, err := wal.Fd.ReadAt(head, int64(wal.writeAt)); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(head, make([]byte, maxHeaderSize)) {
					t.Fatalf("after write %d the next header reads %x, want zeros", i, head)
				}
			}
			// Reopened as after a crash: a copy of the files of the
			// open store, whose memtable (never flushed to a table)
			// is replayed from its log.
			copyDir := copyStoreFiles(t, dir)
			if tables, _ := filepath.Glob(filepath.Join(copyDir, "*.sst")); len(tables) > 0 {
				t.Fatalf("%d tables: the memtable was flushed, its log is not what is read", len(tables))
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = Open(syncedOptions(copyDir).WithSyncWrites(sync)); err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for k, v := range want {
				if got := readValue(t, db, []byte(k)); !bytes.Equal(got, v) {
					t.Fatalf("%s after reopen: %d bytes, want %d", k, len(got), len(v))
				}
			}
		})
	}
}

// copyStoreFiles copies the files of the store in dir (its lock apart)
// to a new directory, which it returns.
func copyStoreFiles(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || e.Name() == lockFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestEncodeEntryChecksum: an entry's trailing checksum is the CRC
// (Castagnoli) of its header, key and value, as Badger's readers check
// it, now computed without a hash allocated per entry.
func TestEncodeEntryChecksum(t *testing.T) {
	lf := &logFile{}
	for _, e := range []*Entry{
		{Key: []byte("k"), Value: nil},
		{Key: []byte("key-with-ts\x00\x00\x00\x00\x00\x00\x00\x01"), Value: bytes.Repeat([]byte("v"), 300), meta: bitValuePointer, UserMeta: 3, ExpiresAt: 99},
	} {
		var buf bytes.Buffer
		n, err := lf.encodeEntry(&buf, e, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := buf.Bytes()
		if n != len(out) {
			t.Fatalf("encoded %d bytes, reported %d", len(out), n)
		}
		want := crc32.Checksum(out[:n-crc32.Size], y.CastagnoliCrcTable)
		if got := binary.BigEndian.Uint32(out[n-crc32.Size:]); got != want {
			t.Fatalf("checksum %08x, want %08x", got, want)
		}
		var h header
		hlen := h.Decode(out)
		if !bytes.Equal(out[hlen:hlen+len(e.Key)], e.Key) || !bytes.Equal(out[hlen+len(e.Key):n-crc32.Size], e.Value) {
			t.Fatal("the key and value do not follow the header")
		}
	}
}

// TestHeldLogRefusesAWriteOutOfOrder: a held log that is handed a write
// that does not follow what it holds fails at its flush, and writes
// neither, instead of writing the second where the first goes.
func TestHeldLogRefusesAWriteOutOfOrder(t *testing.T) {
	db, err := Open(syncedOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wal := db.mt.wal
	at := int64(wal.writeAt)
	wal.holdPend(true)
	wal.bufWrite([]byte("first"), at)
	wal.bufWrite([]byte("elsewhere"), at+100)
	wal.holdPend(false)
	if err := wal.flushPend(); err == nil {
		t.Fatal("a write out of order while held was not reported")
	}
	got := make([]byte, 5)
	if _, err := wal.Fd.ReadAt(got, at); err != nil {
		t.Fatal(err)
	}
	if string(got) != "first" {
		t.Fatalf("the held bytes did not go out after the error: %q", got)
	}
}
