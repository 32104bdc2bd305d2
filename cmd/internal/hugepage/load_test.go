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
// hold less (in whole huge pages), nothing when that is under one.
func TestAdvisable(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ n, free, want int64 }{
		{1024 * mib, 4096 * mib, 1024 * mib}, // plenty free: the whole load
		{1024 * mib, 2048 * mib, 1024 * mib}, // exactly twice
		{5615 * mib, 5844 * mib, 2922 * mib}, // a page cache's fragments: half of them (the 1M-edge start)
		{1024 * mib, 1023 * mib, 510 * mib},  // half, rounded down to a huge page
		{1024 * mib, 3 * mib, 0},             // under a huge page
		{1024 * mib, 0, 0},
	} {
		if got := advisable(c.n, c.free); got != c.want {
			t.Errorf("a %d MiB load, %d MiB free in 2 MiB blocks: %d MiB advised, want %d", c.n/mib, c.free/mib, got/mib, c.want/mib)
		}
	}
}
