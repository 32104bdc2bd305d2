package table

// Tests of ctxgraph's change to CreateTable (its benchmark is in
// createtable_bench_unix_test.go; writeFile, CTXGRAPH.md).

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/y"
)

// memtableSized builds a table of about n MB (keys of a memtable's
// flush: 40-byte keys, value pointers).
func memtableSized(n int) *Builder {
	b := NewTableBuilder(Options{BlockSize: 4 << 10, TableSize: uint64(n) << 20,
		BloomFalsePositive: 0.01, Compression: options.None, ChkMode: options.OnTableAndBlockRead})
	val := bytes.Repeat([]byte{7}, 12)
	for i := 0; !b.ReachedCapacity(); i++ {
		k := y.KeyWithTs([]byte(fmt.Sprintf("node\x00key-%016d-padding-pad", i)), 1)
		b.Add(k, y.ValueStruct{Value: val, Meta: 1}, 0)
	}
	return b
}

// TestCreateTableReadsBack: a table written in pieces (writeFile) opens
// and holds every key in order.
func TestCreateTableReadsBack(t *testing.T) {
	b := memtableSized(4) // more than three write chunks
	tbl, err := CreateTable(NewFilename(1, t.TempDir()), b)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tbl.DecrRef() }()
	if tbl.Size() < 3<<20 {
		t.Fatalf("table of %d bytes, want at least 3 MiB", tbl.Size())
	}
	it := tbl.NewIterator(0)
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		want := fmt.Sprintf("node\x00key-%016d-padding-pad", n)
		if got := string(y.ParseKey(it.Key())); got != want {
			t.Fatalf("key %d: %q, want %q", n, got, want)
		}
		n++
	}
	if n == 0 || uint32(n) != tbl.KeyCount() {
		t.Fatalf("read %d keys, the table holds %d", n, tbl.KeyCount())
	}
}

// TestIndexSizeHintHoldsTheIndex: a table's index fits the buffer its
// builder starts with (indexSizeHint), which is not much larger, for a
// table of one block and one of about a thousand.
func TestIndexSizeHintHoldsTheIndex(t *testing.T) {
	one := NewTableBuilder(Options{BlockSize: 4 << 10, TableSize: 1 << 20,
		BloomFalsePositive: 0.01, Compression: options.None, ChkMode: options.OnTableAndBlockRead})
	for i := range 10 {
		one.Add(y.KeyWithTs([]byte(fmt.Sprintf("key-%d", i)), 1), y.ValueStruct{Value: []byte{1}}, 0)
	}
	for _, b := range []*Builder{one, memtableSized(4)} {
		bd := b.Done()
		f := y.NewFilter(b.keyHashes, y.BloomBitsPerKey(len(b.keyHashes), b.opts.BloomFalsePositive))
		hint := b.indexSizeHint(f)
		if len(b.blockList) == 0 || len(bd.index) > hint || hint > 2*len(bd.index)+1024 {
			t.Errorf("%d blocks: index of %d bytes, hint %d", len(b.blockList), len(bd.index), hint)
		}
		b.Close()
	}
}
