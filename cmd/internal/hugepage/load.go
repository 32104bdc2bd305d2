package hugepage

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// LoadAdvice is what ForLoad did: Advised bytes of the heap marked for
// huge pages ahead of a load, or Populated bytes faulted in, or why none
// were marked.
type LoadAdvice struct {
	Advised int64
	// Populated is the bytes of the heap faulted in ahead instead, in
	// 4 KiB pages, on a host that takes free memory back; Reused is how
	// many of them were free pages the heap held already (memory the
	// process had freed and returned), faulted in before any
	// reservation.
	Populated, Reused int64
	// Free is the free memory the kernel holds in blocks of a huge
	// page or more, as ForLoad read it (0 where it read none), and
	// FreeAll in blocks of every size (MemFree).
	Free, FreeAll int64
	// Reason says why nothing was advised ("" when something was; set
	// beside Populated).
	Reason string
	// lo and hi are the range advised, or the reservation populated
	// (empty when the heap's free pages held the share).
	lo, hi uintptr
}

// advisable is how much of a load of n bytes ForLoad reserves for huge
// pages, given the memory the kernel holds free in blocks of 2 MiB or
// more (huge) and in smaller ones (small): half the huge blocks' worth
// at most, in whole huge pages, and nothing unless those blocks hold
// half the load and free memory the whole of it.
//
// A huge fault needs a free 2 MiB block, or the kernel compacts memory
// first. The other half of the blocks is the margin for what else takes
// them meanwhile: the page cache of the files the start reads (in large
// folios, blocks of up to 2 MiB, on ext4) and the load's own 4 KiB
// faults once the smaller blocks are gone (the buddy allocator splits a
// block only when no smaller one is free). A 5.6–6.3 GB load's starts
// after a crash with 1.9–2.0 GB free in such blocks, about 0.9 GB
// marked, were slower in three pairs of three; with 4.3–5.3 GB, 2.1–2.5
// GB marked, starts were faster in five pairs of five (BENCHMARKS.md,
// sixty-first round). A load that free memory cannot hold reclaims page
// cache as it faults, and splits the blocks (the fiftieth round's
// slower starts, which marked them all).
func advisable(n, huge, small int64) int64 {
	if 2*huge < n || huge+small < n {
		return 0
	}
	a := min(n, huge/2)
	return a - a%hugeSize
}

// hugeOrder is the buddy allocator's order of a 2 MiB block of 4 KiB
// pages.
const hugeOrder = 9

// freeHugeBytes reads /proc/buddyinfo's format from r and returns the
// free memory held in blocks of hugeOrder or more: what a huge page's
// fault can take without compacting memory first.
func freeHugeBytes(r io.Reader) (int64, error) {
	var free int64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// Node 0, zone   Normal  41238  31459 ... (counts by order 0..10)
		f := strings.Fields(sc.Text())
		i := 0
		for i < len(f) && f[i] != "zone" {
			i++
		}
		if i+2 >= len(f) {
			continue
		}
		for order, s := range f[i+2:] {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("buddyinfo: %q: %w", sc.Text(), err)
			}
			if order >= hugeOrder {
				free += n << order * 4096
			}
		}
	}
	return free, sc.Err()
}

// commitRoom reads /proc/meminfo's format from r and returns how much
// more the kernel lets the process commit: CommitLimit less
// Committed_AS. Under strict overcommit (vm.overcommit_memory 2) an
// allocation past it fails, and the Go runtime dies of it.
func commitRoom(r io.Reader) (int64, error) {
	v, err := meminfo(r, "CommitLimit", "Committed_AS")
	if err != nil {
		return 0, err
	}
	return v[0] - v[1], nil
}

// memFree reads /proc/meminfo's format from r and returns MemFree: the
// memory the kernel holds free outright, in blocks of every size.
func memFree(r io.Reader) (int64, error) {
	v, err := meminfo(r, "MemFree")
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// meminfo reads /proc/meminfo's format from r and returns the named
// fields in bytes, in the order named; it fails if one is missing.
func meminfo(r io.Reader, names ...string) ([]int64, error) {
	v := make([]int64, len(names))
	found := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		i := slices.Index(names, strings.TrimSuffix(f[0], ":"))
		if i < 0 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("meminfo: %q: %w", sc.Text(), err)
		}
		v[i] = kb << 10
		found |= 1 << i
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if found != 1<<len(names)-1 {
		return nil, fmt.Errorf("meminfo: not every one of %s", strings.Join(names, ", "))
	}
	return v, nil
}

// virtioBalloonReporting is the virtio balloon's feature bit for free
// page reporting (VIRTIO_BALLOON_F_REPORTING).
const virtioBalloonReporting = 5

// reportsFreePages reports whether a virtio device's sysfs features
// (one '0' or '1' per feature bit, bit 0 first) include free page
// reporting.
func reportsFreePages(features string) bool {
	f := strings.TrimSpace(features)
	return len(f) > virtioBalloonReporting && f[virtioBalloonReporting] == '1'
}

// populateShare is the share of a load's estimate that ForLoad faults
// in ahead on a host that takes free memory back. The estimate (the
// snapshots' size and a quarter) counts the view snapshot's embeddings
// and strings, which stay mapped from its file: on the 1M-edge store
// the load's heap was about three quarters of it, and populating all of
// it held some 700 MB resident for nothing. Fresh starts by share,
// right after a stop: 1.0 2.9-3.8 s (RSS 3.7-3.8 GB), 0.75 2.8-3.4 s
// (3.1 GB), 0.6 2.7-2.9 s (3.0-3.1 GB), 0.45 3.6-4.0 s, none 3.6-4.3 s
// (2.9-3.0 GB) (BENCHMARKS.md, seventy-fifth round). The rest of the
// load faults in as it goes.
const populateShare = 0.6

// populatable is how much of a load of n bytes ForLoad faults in ahead
// on a host that takes free memory back, with free bytes free in all:
// populateShare of n in whole huge pages, while free memory holds all
// of n, else nothing.
func populatable(n, free int64) int64 {
	if free < n {
		return 0
	}
	return int64(float64(n)*populateShare) &^ (hugeSize - 1)
}
