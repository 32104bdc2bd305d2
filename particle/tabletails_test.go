package particle

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// TestTableTailFindsTheIndex lays out a table's end as Badger does and
// finds where its index starts (less the slack for its last block);
// lengths that do not fit the file give nothing; and every table of a
// real store gives a tail within its file.
func TestTableTailFindsTheIndex(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, blocks, index, checksum int, indexLen, checksumLen uint32) *os.File {
		t.Helper()
		b := make([]byte, blocks+index)
		b = binary.BigEndian.AppendUint32(b, indexLen)
		b = append(b, make([]byte, checksum)...)
		b = binary.BigEndian.AppendUint32(b, checksumLen)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	f := write("a.sst", 300<<10, 20<<10, 8, 20<<10, 8)
	if start, size, ok := tableTail(f); !ok || start != 300<<10-tableTailSlack || size != 300<<10+20<<10+16 {
		t.Fatalf("tail at %d of %d (%v), want %d of %d", start, size, ok, 300<<10-tableTailSlack, 300<<10+20<<10+16)
	}
	f = write("small.sst", 1000, 500, 4, 500, 4)
	if start, _, ok := tableTail(f); !ok || start != 0 {
		t.Fatalf("a table smaller than the slack: tail at %d (%v), want 0", start, ok)
	}
	for name, lens := range map[string][2]uint32{"index too long": {1 << 30, 8}, "checksum too long": {100, 1 << 30}} {
		if _, _, ok := tableTail(write(name, 1000, 100, 8, lens[0], lens[1])); ok {
			t.Errorf("%s: a tail found", name)
		}
	}
	s := writeFleet(t, filepath.Join(dir, "store"), 13, testEntities, 3*benchEdgesPerTxn)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "store", "*.sst"))
	if len(tables) == 0 {
		t.Fatal("the store has no tables")
	}
	for _, p := range tables {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		start, size, ok := tableTail(f)
		f.Close()
		if !ok || start < 0 || start >= size {
			t.Errorf("%s: tail at %d of %d (%v)", p, start, size, ok)
		}
	}
}
