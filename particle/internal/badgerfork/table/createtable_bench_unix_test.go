//go:build unix

package table

import (
	"syscall"
	"testing"
	"time"
)

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
