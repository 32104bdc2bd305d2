package table

// Tests and a benchmark of ctxgraph's change to CreateTable
// (writeFile; CTXGRAPH.md).

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/y"
)

// memtableSized builds a table of about n MB (keys of a memtable's
// flush: 40-byte keys, value pointers).
func memtableSized(n int) *Builder {
	b := NewTableBuilder(Options{BlockSize: 4 << 10, TableSize: uint64(n) << 20,
		BloomFalsePositive: 0.01, Compression: options.None, ChkMode: options.OnTableAndBlockRead})
	val := bytes.Repeat([]byte{7}, 12)
	for i := 0; b.ReachedCapacity() == false; i++ {
		k := y.KeyWithTs([]byte(fmt.Sprintf("node\x00key-%016d-padding-pad", i)), 1)
		b.Add(k, y.ValueStruct{Value: val, Meta: 1}, 0)
	}
	return b
}

// TestCreateTableReadsBack: a table written in pieces (writeFile) opens
// and holds every key in order.
func TestCreateTableReadsBack(t *testing.T) {
	b := memtableSized(4) // three write chunks and more
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

// BenchmarkCreateTable writes a memtable-sized (16 MB) table, as a
// flush does, and reports its CPU time (of which the system's).
func BenchmarkCreateTable(b *testing.B) {
	dir := b.TempDir()
	var id uint64
	var user, sys time.Duration
	for b.Loop() {
		b.StopTimer()
		bd := memtableSized(16)
		id++
		var r0 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		b.StartTimer()
		tbl, err := CreateTable(NewFilename(id, dir), bd)
		b.StopTimer()
		var r1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		user += time.Duration(r1.Utime.Nano() - r0.Utime.Nano())
		sys += time.Duration(r1.Stime.Nano() - r0.Stime.Nano())
		if err != nil {
			b.Fatal(err)
		}
		_ = tbl.DecrRef()
		b.StartTimer()
	}
	b.ReportMetric(float64(user.Microseconds())/float64(b.N)/1e3, "user-ms/op")
	b.ReportMetric(float64(sys.Microseconds())/float64(b.N)/1e3, "sys-ms/op")
}
