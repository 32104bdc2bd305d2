package particle

import (
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// TestSizesReachBadger: the store's memtables and value-log files are
// the store's defaults by default, the size asked for otherwise, and
// Badger's own where the store leaves them to Badger (in memory, where
// it holds everything, or a value-log size of 0).
func TestSizesReachBadger(t *testing.T) {
	badgers := badger.DefaultOptions("")
	for _, c := range []struct {
		name      string
		set       func(*Options, int64)
		get       func(badger.Options) int64
		def       int64
		leave     func(*Options) // leaves the size to Badger
		badgerDef int64
	}{
		{"memtable", func(o *Options, n int64) { o.MemTableSize = n }, func(b badger.Options) int64 { return b.MemTableSize },
			DefaultMemTableSize, func(o *Options) { o.InMemory = true }, badgers.MemTableSize},
		{"value-log file", func(o *Options, n int64) { o.ValueLogFileSize = n }, func(b badger.Options) int64 { return b.ValueLogFileSize },
			DefaultValueLogFileSize, func(o *Options) { o.ValueLogFileSize = 0 }, badgers.ValueLogFileSize},
	} {
		o := DefaultOptions(t.TempDir())
		if got := c.get(badgerOptions(o)); got != c.def {
			t.Errorf("default %s %d bytes, want %d", c.name, got, c.def)
		}
		c.set(&o, 8<<20)
		if got := c.get(badgerOptions(o)); got != 8<<20 {
			t.Errorf("%s %d bytes, want %d", c.name, got, 8<<20)
		}
		c.leave(&o)
		if got := c.get(badgerOptions(o)); got != c.badgerDef {
			t.Errorf("%s left to Badger: %d bytes, want Badger's %d", c.name, got, c.badgerDef)
		}
	}
}
