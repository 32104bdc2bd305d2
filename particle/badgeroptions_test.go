package particle

import (
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// TestMemTableSizeReachesBadger: the store's memtables are
// DefaultMemTableSize by default, the size asked for otherwise, and
// Badger's own default in memory (where it holds everything).
func TestMemTableSizeReachesBadger(t *testing.T) {
	o := DefaultOptions(t.TempDir())
	if got := badgerOptions(o).MemTableSize; got != DefaultMemTableSize {
		t.Errorf("default memtable %d bytes, want %d", got, DefaultMemTableSize)
	}
	o.MemTableSize = 8 << 20
	if got := badgerOptions(o).MemTableSize; got != 8<<20 {
		t.Errorf("memtable %d bytes, want %d", got, 8<<20)
	}
	o.InMemory = true
	if got, badgers := badgerOptions(o).MemTableSize, badger.DefaultOptions("").MemTableSize; got != badgers {
		t.Errorf("in memory: memtable %d bytes, want Badger's %d", got, badgers)
	}
}
