//go:build linux

package hugepage

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ForLoad readies the heap for a load that will allocate about n bytes
// (a start's view and vector index) when the host's transparent huge
// page mode is "madvise": it grows the heap by up to n bytes of address
// space it never touches, marks them MADV_HUGEPAGE, and frees them, so
// that the load's allocations, which the runtime takes from that free
// space first, fault in 2 MiB pages instead of 4 KiB ones.
//
// On the 1M-edge store a start faulted in 4 KiB pages some 570,000
// times, each a trip through the kernel and, under a hypervisor, through
// the host's page tables as well; in 2 MiB pages about 27,000 times, and
// the load's own code ran faster with fewer TLB misses (BENCHMARKS.md,
// fifty-third round). A huge page's fault needs a free 2 MiB block,
// though: with memory full of page cache the kernel compacts memory on
// every such fault, which made a start slower (fiftieth round). So
// ForLoad marks no more than half of what the kernel holds free in
// blocks of 2 MiB or more (/proc/buddyinfo), the first part of the load
// when that holds less than all of it (a machine whose page cache has
// cut its free memory into small blocks: sixty-first round), and only
// while those blocks hold half the load and free memory all of it
// (advisable).
// On a host that takes the guest's free memory back (a VM whose balloon
// device reports free pages: virtio's free page reporting, as this
// bench's VM does two seconds after they are freed), a 2 MiB page of
// that memory faults in in about 5 ms; 4 KiB pages come from blocks
// under 2 MiB, which are never reported, and cost the same either way.
// Only the memory a huge-page load freed seconds before is warm in
// 2 MiB blocks; that freed by a 4 KiB load is not. So on such a host
// ForLoad marks nothing: the 1M-edge start took 3.4-5.1 s in 4 KiB
// pages at every gap after a stop (median 4.2), in huge pages 2.3-3.0 s
// within 4 s of a huge-page start's exit but 4.1-6.7 s after a 4 KiB
// one's, 4.8 s 8 s after a stop, 6.0-6.4 s 20 s after and 9.5 s after
// minutes (seventy-fifth round). Timing a few pages at the start does
// not tell which a load will meet: they come from the memory freed last
// (seventy-fourth round). It faults the load's heap in ahead instead,
// in 4 KiB pages, with MADV_POPULATE_WRITE: populateShare of n bytes
// (while free memory holds all n) of the heap's pages that are not
// resident, lowest first, where the load allocates first. In a process
// that freed and returned much of its heap before, those are the holes
// that memory left (populateHeap); in a fresh one, or for what the
// holes do not hold, a reservation's, which it then frees for the load
// to take (reservePopulated). On a VM a fault is a trip through the
// hypervisor, and the kernel's loop is cheaper a page. The 1M-edge
// start took 2.5-2.9 s right after a stop and 2.7-4.2 s 20 s after
// one, against 3.6-4.8 s with the load's own faults (system CPU 1.1-1.4
// s against 3.6-4.6). What the load does not use of the reservation
// stays resident until the runtime's scavenger returns it; of the
// holes, until the heap next uses and frees it (the runtime counts them
// as returned, so its scavenger leaves them). The share is under the
// load's estimate, and the load takes the holes first.
// Faulting in ahead needs no huge pages, so it is done in mode "never"
// (or without THP) too; not in mode "always", where the kernel would
// fault the load in 2 MiB pages of the memory its host takes back,
// ahead or not.
// It marks nothing where the mode is "always" (the kernel does it
// unasked) or "never", nor under a Go memory limit smaller than twice
// n, nor under strict overcommit without room to commit the
// reservation and the load (the reservation is an allocation, and one
// the kernel refuses kills a Go process).
func ForLoad(n int64) LoadAdvice { return forLoad(n, HostReclaimsFree(), Mode()) }

// forLoad is ForLoad on a host that takes free memory back or not, in
// transparent huge page mode mode.
func forLoad(n int64, reclaims bool, mode string) LoadAdvice {
	if n < hugeSize {
		return LoadAdvice{Reason: "a load too small to matter"}
	}
	if mode != "madvise" && (!reclaims || mode == "always") {
		return LoadAdvice{Reason: "transparent huge page mode " + quoteMode(mode)}
	}
	if limit := debug.SetMemoryLimit(-1); limit < 2*n {
		// The reservation would count against the limit, and the
		// collector would work to free it at every step of the load.
		return LoadAdvice{Reason: "a Go memory limit under twice the load"}
	}
	free, err := readProc("/proc/buddyinfo", freeHugeBytes)
	if err != nil {
		return LoadAdvice{Reason: err.Error()}
	}
	total, err := readProc("/proc/meminfo", memFree)
	if err != nil {
		return LoadAdvice{Free: free, Reason: err.Error()}
	}
	// What to reserve, and what to tell: marked for huge pages, or, on a
	// host that takes free memory back, faulted in ahead in 4 KiB pages
	// (a share of the load's estimate, while free memory holds the whole).
	var a int64
	short := "too little memory free in 2 MiB blocks, or in all for the load (a huge page's fault would compact memory)"
	reason, refused := "", "the kernel refused MADV_HUGEPAGE"
	if reclaims {
		a = populatable(n, total)
		short = "too little memory free to fault the load in ahead"
		reason = "this host takes free memory back (virtio free page reporting): its 2 MiB pages fault in slower than 4 KiB ones"
		refused = reason + "; the kernel refused MADV_POPULATE_WRITE"
	} else {
		a = advisable(n, free, max(total-free, 0))
	}
	if a == 0 {
		return LoadAdvice{Free: free, FreeAll: total, Reason: short}
	}
	if strict, err := os.ReadFile("/proc/sys/vm/overcommit_memory"); err != nil || strings.TrimSpace(string(strict)) == "2" {
		// Under strict overcommit the reservation is committed memory:
		// past the limit the allocation would kill the process.
		room, err := readProc("/proc/meminfo", commitRoom)
		if err != nil || room < a+n {
			return LoadAdvice{Free: free, FreeAll: total, Reason: "strict overcommit leaves too little room to reserve the load's heap"}
		}
	}
	adv := LoadAdvice{Free: free, FreeAll: total, Reason: reason}
	if reclaims {
		// A share of the load in 4 KiB pages is faulted in: the
		// holes freed memory left in the heap first, then, for the
		// rest, a reservation (not marked).
		adv.Reused = populateHeap(a)
		adv.Populated = adv.Reused
		if rest := a - adv.Reused; rest >= hugeSize {
			var more int64
			adv.lo, adv.hi, more = reservePopulated(a, rest)
			adv.Populated += more
			runtime.GC() // the reserve's pages go back to the heap, resident
		}
	} else {
		adv.lo, adv.hi = reserveHuge(a)
		adv.Advised = int64(adv.hi - adv.lo)
		runtime.GC() // the reserve's pages go back to the heap, marked
	}
	if adv.Advised == 0 && adv.Populated == 0 {
		return LoadAdvice{Free: free, FreeAll: total, Reason: refused}
	}
	return adv
}

// reserveHuge allocates n bytes it never touches (fresh address space:
// the runtime does not zero it), marks the 2 MiB-aligned range inside
// them MADV_HUGEPAGE and returns that range (empty if the kernel
// refused). The allocation is garbage once it returns.
//
//go:noinline
func reserveHuge(n int64) (lo, hi uintptr) {
	b := make([]byte, n)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo, hi = alignUp(start), alignDown(start+uintptr(n))
	if hi <= lo || madvise(lo, hi-lo, unix.MADV_HUGEPAGE) != nil {
		return 0, 0
	}
	return lo, hi
}

// heapProbe is an object of the heap, whose address says where the
// heap lies (populateHeap).
var heapProbe *[64]byte

// populateHeap faults in up to budget bytes of the heap's pages that
// are not resident, lowest first (populateLowest over heapMappings):
// the holes that memory the process freed and returned to the kernel
// left, which the load's allocations, taking the lowest free pages,
// fill first, and then the free end of the heap. In a fresh process
// there are few; in one that freed much of its heap (the bench restarts
// the daemon inside its process so, after returning its memory), the
// load's first gigabytes. It returns the bytes faulted in.
func populateHeap(budget int64) int64 {
	heapProbe = new([64]byte)
	at := uintptr(unsafe.Pointer(heapProbe))
	heapProbe = nil
	ranges, err := readAnonMappings(0)
	if err != nil {
		return 0
	}
	return populateLowest(heapMappings(ranges, at), budget)
}

// reservePopulated allocates n bytes it never touches (fresh address
// space: the runtime does not zero it) and faults in budget bytes of
// its pages that are not resident, lowest first. It runs after
// populateHeap has faulted in every missing page of the heap it found,
// so the reservation's are all that is left; n leaves room for budget
// beside the pages populateHeap faulted in that the reservation took
// (the heap's free end). It returns the reservation's range and the
// bytes faulted in. The allocation is garbage once it returns.
//
//go:noinline
func reservePopulated(n, budget int64) (lo, hi uintptr, populated int64) {
	b := make([]byte, n)
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi = lo + uintptr(n)
	populated = populateLowest([]mapping{{lo, hi}}, budget)
	runtime.KeepAlive(b)
	return lo, hi, populated
}

// heapMappings returns the heap around address at: the anonymous
// read-write mapping holding at and those next to it, each ending where
// the next begins. The Go runtime maps its heap's arenas one after
// another from a base (random since Go 1.26), between reserved,
// inaccessible ones, and the kernel merges them into one mapping or a
// few; memory the heap freed stays mapped there (the runtime returns it
// with madvise). Without a mapping holding at, it is nothing.
func heapMappings(ranges []mapping, at uintptr) []mapping {
	i := slices.IndexFunc(ranges, func(m mapping) bool { return m.lo <= at && at < m.hi })
	if i < 0 {
		return nil
	}
	first, last := i, i
	for first > 0 && ranges[first-1].hi == ranges[first].lo {
		first--
	}
	for last+1 < len(ranges) && ranges[last+1].lo == ranges[last].hi {
		last++
	}
	return ranges[first : last+1]
}

// populateGap is how many resident pages populateLowest bridges between
// two runs of missing ones, faulting both in with one call (the kernel
// skips resident pages in its loop).
const populateGap = 16

// populateChunk caps a run that populateLowest faults in with one call,
// in pages (16 MiB), so that its workers share a long run.
const populateChunk = 4096

// populateLowest faults in, in address order, the pages of ranges that
// are not resident (mincore) until budget bytes of them are, with
// MADV_POPULATE_WRITE: each becomes a zeroed page, as the runtime
// expects of memory it returned to the kernel. The runs of missing
// pages are faulted in by GOMAXPROCS workers: the kernel's loop zeroes
// each page, and the start waits for nothing else meanwhile. It
// returns the bytes faulted in.
func populateLowest(ranges []mapping, budget int64) int64 {
	runs := missingRuns(ranges, budget)
	var next atomic.Int64
	var populated atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(runs)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(runs)); i = next.Add(1) - 1 {
				if r := runs[i]; madvise(r.lo, r.hi-r.lo, unix.MADV_POPULATE_WRITE) == nil {
					populated.Add(r.missing)
				}
			}
		})
	}
	wg.Wait()
	return populated.Load()
}

// missingRun is a range to fault in and how many of its bytes are not
// resident.
type missingRun struct {
	lo, hi  uintptr
	missing int64
}

// missingRuns lists, in address order, the runs of pages of ranges that
// are not resident, until they hold budget bytes: each bridges gaps of
// fewer than populateGap resident pages and spans at most
// populateChunk pages.
func missingRuns(ranges []mapping, budget int64) []missingRun {
	page := uintptr(os.Getpagesize())
	var runs []missingRun
	var vec []byte
	var total int64
	for _, m := range ranges {
		if total >= budget {
			break
		}
		n := (m.hi - m.lo) / page
		vec = slices.Grow(vec[:0], int(n))[:n]
		if n == 0 || mincore(m.lo, n*page, vec) != nil {
			continue
		}
		for i := uintptr(0); i < n && total < budget; {
			if vec[i]&1 != 0 {
				i++
				continue
			}
			end, missing := i, int64(0)
			for k := i; k < n && k-end < populateGap && k-i < populateChunk && total+missing < budget; k++ {
				if vec[k]&1 == 0 {
					end = k + 1
					missing += int64(page)
				}
			}
			runs = append(runs, missingRun{m.lo + i*page, m.lo + end*page, missing})
			total += missing
			i = end
		}
	}
	return runs
}

// mincore fills vec with the residency of the n bytes of pages at addr
// (bit 0 set: resident).
func mincore(addr, n uintptr, vec []byte) error {
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, addr, n, uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		return e
	}
	return nil
}

// readProc reads the kernel's file at path with parse.
func readProc(path string, parse func(io.Reader) (int64, error)) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parse(f)
}

func quoteMode(m string) string {
	if m == "" {
		return "unknown (no THP here)"
	}
	return `"` + m + `"`
}

// HostReclaimsFree reports whether this machine's host takes back the
// memory the guest frees: a virtio balloon device that negotiated free
// page reporting (feature bit 5 in its sysfs features).
func HostReclaimsFree() bool {
	devs, _ := filepath.Glob("/sys/bus/virtio/drivers/virtio_balloon/virtio*/features")
	for _, f := range devs {
		if b, err := os.ReadFile(f); err == nil && reportsFreePages(string(b)) {
			return true
		}
	}
	return false
}
