package hugepage

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// LoadAdvice is what ForLoad did: Advised bytes of the heap marked for
// huge pages ahead of a load, or why none were.
type LoadAdvice struct {
	Advised int64
	// Free is the free memory the kernel holds in blocks of a huge
	// page or more, as ForLoad read it (0 where it read none).
	Free int64
	// Reason says why nothing was advised ("" when something was).
	Reason string
	// lo and hi are the range advised.
	lo, hi uintptr
}

// advisable is how much of a load of n bytes ForLoad reserves for huge
// pages when the kernel holds free bytes in blocks of 2 MiB or more: the
// whole load while that leaves at least as much free in such blocks for
// everything else the machine faults meanwhile, else half the free
// blocks' worth, in whole huge pages; 0 when that is under one.
func advisable(n, free int64) int64 {
	a := min(n, free/2)
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
	var limit, committed int64 = -1, -1
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || (f[0] != "CommitLimit:" && f[0] != "Committed_AS:") {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("meminfo: %q: %w", sc.Text(), err)
		}
		if f[0] == "CommitLimit:" {
			limit = kb << 10
		} else {
			committed = kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if limit < 0 || committed < 0 {
		return 0, fmt.Errorf("meminfo: no CommitLimit or Committed_AS")
	}
	return limit - committed, nil
}
