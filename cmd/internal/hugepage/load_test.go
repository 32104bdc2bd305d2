package hugepage

import (
	"strings"
	"testing"
)

// TestFreeHugeBytes reads /proc/buddyinfo's format: free blocks of 2 MiB
// (order 9) and more count, smaller ones do not.
func TestFreeHugeBytes(t *testing.T) {
	const info = `Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3
Node 0, zone    DMA32      2      3      0      2      3      2      1      4      4      2    752
Node 0, zone   Normal  41238  31459  17451  15561   6224   2925   1024    193    245    925   2195
`
	got, err := freeHugeBytes(strings.NewReader(info))
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	want := int64((1+2+925)*2*mib + (3+752+2195)*4*mib)
	if got != want {
		t.Errorf("free in 2 MiB blocks or more: %d MiB, want %d MiB", got/mib, want/mib)
	}
	if _, err := freeHugeBytes(strings.NewReader("Node 0, zone Normal 1 2 x\n")); err == nil {
		t.Error("a count that is not a number was accepted")
	}
	if n, err := freeHugeBytes(strings.NewReader("")); err != nil || n != 0 {
		t.Errorf("no zones: %d, %v", n, err)
	}
}

// TestCommitRoom reads /proc/meminfo's format: the commit limit less
// what is committed, and an error where either is missing.
func TestCommitRoom(t *testing.T) {
	const info = `MemTotal:       24683620 kB
CommitLimit:    12341808 kB
Committed_AS:      47736 kB
VmallocTotal:   34359738367 kB
`
	got, err := commitRoom(strings.NewReader(info))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(12341808-47736) << 10; got != want {
		t.Errorf("commit room %d, want %d", got, want)
	}
	if _, err := commitRoom(strings.NewReader("MemTotal: 1 kB\nCommitLimit: 5 kB\n")); err == nil {
		t.Error("a meminfo without Committed_AS was read")
	}
	if _, err := commitRoom(strings.NewReader("CommitLimit: x kB\nCommitted_AS: 1 kB\n")); err == nil {
		t.Error("a limit that is not a number was read")
	}
}

// TestAdvisable sizes ForLoad's reservation: the whole load while the
// free 2 MiB blocks hold twice it, half of those blocks' worth when they
// hold less (in whole huge pages), nothing when they hold less than half
// the load or free memory does not hold all of it.
func TestAdvisable(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ n, huge, small, want int64 }{
		{1024 * mib, 4096 * mib, 2048 * mib, 1024 * mib}, // plenty free: the whole load
		{1024 * mib, 2048 * mib, 1024 * mib, 1024 * mib}, // exactly twice, and the load beside
		{5615 * mib, 5844 * mib, 8400 * mib, 2922 * mib}, // a page cache's fragments: half of them (the 1M-edge start)
		{1024 * mib, 1023 * mib, 4096 * mib, 510 * mib},  // half, rounded down to a huge page
		{1024 * mib, 512 * mib, 4096 * mib, 256 * mib},   // blocks for half the load: a quarter of it
		{6069 * mib, 1986 * mib, 8453 * mib, 0},          // blocks for a third: nothing (the slower starts after a crash)
		{2 * mib, 1 * mib, 4096 * mib, 0},                // under a huge page
		{1024 * mib, 0, 4096 * mib, 0},
		{2400 * mib, 14400 * mib, 900 * mib, 2400 * mib}, // a fresh machine: nearly all free memory in large blocks
		{5842 * mib, 4000 * mib, 1000 * mib, 0},          // free memory short of the load: it would reclaim page cache as it faults
	} {
		if got := advisable(c.n, c.huge, c.small); got != c.want {
			t.Errorf("a %d MiB load, %d MiB free in 2 MiB blocks and %d in smaller ones: %d MiB advised, want %d",
				c.n/mib, c.huge/mib, c.small/mib, got/mib, c.want/mib)
		}
	}
}

// TestMemFree reads MemFree from /proc/meminfo's format, and fails
// without it.
func TestMemFree(t *testing.T) {
	got, err := memFree(strings.NewReader("MemTotal:       24683620 kB\nMemFree:        14355092 kB\nMemAvailable:   24176512 kB\n"))
	if err != nil || got != 14355092<<10 {
		t.Errorf("MemFree %d, %v; want %d", got, err, int64(14355092)<<10)
	}
	if _, err := memFree(strings.NewReader("MemTotal: 1 kB\n")); err == nil {
		t.Error("a meminfo without MemFree was read")
	}
}

// TestReportsFreePages reads a virtio device's sysfs features: free page
// reporting is bit 5, the sixth character.
func TestReportsFreePages(t *testing.T) {
	for _, c := range []struct {
		features string
		want     bool
	}{
		// This bench's VM's balloon: stats, deflate on OOM, reporting.
		{"01100101000000000000000000000000100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\n", true},
		{"0110000100000000000000000000000010000000", false}, // the same without reporting
		{"000001", true},
		{"00000", false}, // too short to hold the bit
		{"", false},
	} {
		if got := reportsFreePages(c.features); got != c.want {
			t.Errorf("reportsFreePages(%q) = %v, want %v", c.features, got, c.want)
		}
	}
}
