//go:build linux

package hugepage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestAnonMappings(t *testing.T) {
	maps := `00400000-0059b000 r-xp 00000000 fe:00 9979660      /usr/bin/ctxgraph
0059b000-005a6000 rw-p 0019b000 fe:00 9979660      /usr/bin/ctxgraph
c000000000-c010000000 rw-p 00000000 00:00 0
c010000000-c014000000 ---p 00000000 00:00 0
7f0c88e00000-7f0c8ae00000 rw-p 00000000 00:00 0    [anon: Go: heap]
7f0c8ae00000-7f0c8ae40000 rw-p 00000000 00:00 0
7f0c90000000-7f0c98000000 rw-s 00000000 00:05 1234  /dev/shm/x
7f0c98000000-7f0ca0000000 rw-p 00000000 fe:00 5678  /data/vlog/000001.vlog
7ffe5a000000-7ffe5c000000 rw-p 00000000 00:00 0    [stack]
`
	got, err := anonMappings(strings.NewReader(maps), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0xc000000000, 0xc010000000}, {0x7f0c88e00000, 0x7f0c8ae00000}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mappings %x, want %x (the heap's only: not files, shared memory, stacks, reservations or small ones)", got, want)
	}
	if _, err := anonMappings(strings.NewReader("zz rw-p 00000000 00:00 0\n"), 0); err == nil {
		t.Error("a line without a range was accepted")
	}
	if _, err := anonMappings(strings.NewReader("20-10 rw-p 00000000 00:00 0\n"), 0); err == nil {
		t.Error("a backwards range was accepted")
	}
}

// collapseErr is what this kernel says to collapsing anonymous memory
// (MADV_COLLAPSE) now, tried on a mapping of its own: nil, EINVAL (it
// cannot), or EAGAIN/ENOMEM (no huge page free at the moment).
func collapseErr(t *testing.T) error {
	b, err := unix.Mmap(-1, 0, 2*hugeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	a := alignUp(uintptr(unsafe.Pointer(&b[0])))
	return unix.Madvise(b[a-uintptr(unsafe.Pointer(&b[0])):][:hugeSize], unix.MADV_COLLAPSE)
}

// hugeBytesAt is the AnonHugePages of the mapping holding addr, from
// /proc/self/smaps.
func hugeBytesAt(t *testing.T, addr uintptr) int64 {
	var kb int64
	if n, _ := fmt.Sscanf(smapsField(t, addr, "AnonHugePages:"), "%d kB", &kb); n != 1 {
		t.Fatalf("no AnonHugePages for the mapping holding %x", addr)
	}
	return kb << 10
}

// smapsField is the rest of the line starting with field in the entry
// of /proc/self/smaps for the mapping holding addr.
func smapsField(t *testing.T, addr uintptr, field string) string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(sc.Text(), "%x-%x", &lo, &hi); n == 2 && strings.Contains(sc.Text(), " ") {
			in = lo <= addr && addr < hi
			continue
		}
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok && in {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no mapping holds %x", addr)
	return ""
}

// residentMapping maps n bytes of private anonymous memory (as the
// runtime maps its heap) and touches every 4 KiB page of it, unmapped
// when the test ends.
func residentMapping(t *testing.T, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}

// TestKeeperCollapsesTheHeap fills a 16 MiB anonymous mapping (as the
// runtime maps its heap) with 4 KiB pages and runs one collapse pass:
// where the kernel can collapse, the mapping then holds huge pages, and
// a second pass collapses nothing new; where it cannot, Run says so.
func TestKeeperCollapsesTheHeap(t *testing.T) {
	b := residentMapping(t, 16<<20)
	addr := uintptr(unsafe.Pointer(&b[0]))
	k := New(Options{MinMapping: 8 << 20, CollapseEvery: 10 * time.Millisecond, Pause: time.Microsecond})
	switch err := collapseErr(t); {
	case errors.Is(err, unix.EINVAL):
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := k.Run(ctx); !errors.Is(err, errUnsupported) {
			t.Fatalf("this kernel cannot collapse, and Run says %v", err)
		}
		return
	case err != nil:
		t.Skipf("the kernel has no huge page free now: %v", err)
	}
	before := hugeBytesAt(t, addr)
	if err := k.Collapse(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := k.Stats()
	if st.Passes != 1 || st.Collapsed < 7 {
		t.Errorf("one pass over a 16 MiB mapping: %+v", st)
	}
	if after := hugeBytesAt(t, addr); after < 14<<20 {
		t.Errorf("the mapping holds %d bytes of huge pages after the pass (%d before)", after, before)
	}
	if err := k.Collapse(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again := k.Stats(); again.Collapsed-st.Collapsed > 4 {
		t.Errorf("a second pass collapsed %d ranges again", again.Collapsed-st.Collapsed)
	}
}

// TestKeeperAdvisesNewMappings maps 16 MiB without touching it, lets
// Advise mark it, then touches it: its pages fault in huge, with no
// collapse (where the kernel gives huge pages to marked memory).
func TestKeeperAdvisesNewMappings(t *testing.T) {
	if Mode() == "never" || Mode() == "" {
		// Marked memory gets huge pages only in madvise or always mode.
		k := New(Options{MinMapping: 8 << 20})
		if err := k.Advise(); err != nil {
			t.Fatal(err)
		}
		return
	}
	// The control: a mapping marked by hand. If it gets no huge page,
	// the machine has none to give now, whatever the keeper does.
	c, err := unix.Mmap(-1, 0, 8<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(c)
	if err := unix.Madvise(c, unix.MADV_HUGEPAGE); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(c); i += 4096 {
		c[i] = 1
	}
	if hugeBytesAt(t, uintptr(unsafe.Pointer(&c[0]))) == 0 {
		t.Skip("a mapping marked by hand got no huge page: none free now")
	}
	b, err := unix.Mmap(-1, 0, 16<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	addr := uintptr(unsafe.Pointer(&b[0]))
	k := New(Options{MinMapping: 8 << 20})
	if err := k.Advise(); err != nil {
		t.Fatal(err)
	}
	if st := k.Stats(); st.Advised < 14<<20 || st.Passes != 0 {
		t.Errorf("after one look: %+v, want the 16 MiB mapping marked and no collapse", st)
	}
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	if got := hugeBytesAt(t, addr); got < 8<<20 {
		t.Errorf("a marked mapping touched afterwards holds %d bytes of huge pages", got)
	}
}

// TestKeeperRunEndsWithItsContext runs a keeper for a few looks and
// passes and cancels it: Run returns (both of its goroutines end).
func TestKeeperRunEndsWithItsContext(t *testing.T) {
	k := New(Options{MinMapping: 8 << 20, AdviseEvery: time.Millisecond, CollapseEvery: 5 * time.Millisecond, Pause: time.Microsecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, errUnsupported) {
			t.Errorf("Run ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestKeeperWaitsForQuiet: with Options.Quiet, a keeper marks no
// mapping and starts no collapse pass while Quiet reports false, stops a
// pass as soon as it does, and collapses once it reports true.
func TestKeeperWaitsForQuiet(t *testing.T) {
	residentMapping(t, 16<<20) // a heap to collapse, resident
	var quiet atomic.Bool
	k := New(Options{MinMapping: 8 << 20, CollapseEvery: 5 * time.Millisecond, QuietEvery: time.Millisecond,
		Pause: time.Microsecond, Quiet: quiet.Load})
	if err := k.Collapse(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := k.Stats(); st.Collapsed != 0 || st.Failed != 0 {
		t.Fatalf("a pass while busy: %+v, want it stopped before its first range", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	time.Sleep(100 * time.Millisecond)
	if st := k.Stats(); st.Passes != 1 || st.Advised != 0 {
		t.Fatalf("while busy: %+v, want no new pass and nothing advised", st)
	}
	quiet.Store(true)
	unsupported := errors.Is(collapseErr(t), unix.EINVAL)
	deadline := time.Now().Add(10 * time.Second)
	for k.Stats().Passes < 2 && !unsupported {
		if time.Now().After(deadline) {
			t.Fatalf("quiet for 10 s and no pass: %+v", k.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !(unsupported && errors.Is(err, errUnsupported)) {
		t.Fatalf("Run ended with %v", err)
	}
	if st := k.Stats(); st.Advised != 0 {
		t.Errorf("a quiet keeper advised %d bytes", st.Advised)
	}
}

// TestForLoadFaultsTheLoadInHugePages: where the host's mode is
// "madvise" and memory is free in 2 MiB blocks, ForLoad marks a range
// of the heap, and a load allocated after it (1 MiB slices, touched)
// lies mostly there, in huge pages. Elsewhere it marks nothing and says
// why.
func TestForLoadFaultsTheLoadInHugePages(t *testing.T) {
	// A daemon calls ForLoad on the fresh heap of its start: in a test
	// process that has already freed a load (this test run before, with
	// -count), the next load reuses those spans, below the range
	// reserved. So the test runs in a process of its own.
	if ranApart(t) {
		return
	}
	const n = 256 << 20
	adv := forLoad(n, false, Mode()) // as on a host that keeps the guest's free memory
	if nothingDone(t, "advised", adv.Advised, adv.Free, 2*n, "free in 2 MiB blocks", adv.Reason) {
		return
	}
	if want := advisable(n, adv.Free, max(adv.FreeAll-adv.Free, 0)); adv.Advised < want-2*hugeSize || adv.Advised > want || adv.hi-adv.lo != uintptr(adv.Advised) {
		t.Fatalf("advised %d bytes [%x, %x) of a %d-byte load with %d bytes free in 2 MiB blocks, want about %d", adv.Advised, adv.lo, adv.hi, n, adv.Free, want)
	}
	load, inside := touchLoad(192, adv)
	if inside < len(load)/2 {
		t.Fatalf("%d of the load's %d slices lie in the advised range", inside, len(load))
	}
	// The slices inside lie in memory marked for huge pages; whether
	// the kernel finds a free 2 MiB block for each fault depends on the
	// moment (other processes' memory), so that is logged, not required.
	for i := range load {
		if a := uintptr(unsafe.Pointer(&load[i][0])); adv.lo <= a && a < adv.hi && !slices.Contains(vmFlagsAt(t, a), "hg") {
			t.Fatalf("slice %d of the load, at %x in the advised range, lies in a mapping not marked for huge pages (VmFlags %v)", i, a, vmFlagsAt(t, a))
		}
	}
	t.Logf("%d MiB of the load in the advised range; the range's mapping holds %d MiB of huge pages", inside, hugeBytesAt(t, adv.lo)>>20)
}

// touchLoad allocates a load of n 1 MiB slices after ForLoad's advice
// adv, writes a byte in each of their pages, and counts the slices that
// start in the range adv advised or populated.
func touchLoad(n int, adv LoadAdvice) (load [][]byte, inside int) {
	load = make([][]byte, n)
	for i := range load {
		load[i] = make([]byte, 1<<20)
		for j := 0; j < len(load[i]); j += 4096 {
			load[i][j] = 1
		}
		if a := uintptr(unsafe.Pointer(&load[i][0])); adv.lo <= a && a < adv.hi {
			inside++
		}
	}
	return load, inside
}

// freshHeapEnv, set, has the ForLoad tests that need a fresh heap run
// their checks in the process they run in (ranApart).
const freshHeapEnv = "CTXGRAPH_HUGEPAGE_TEST_FRESH_HEAP"

// ranApart runs t alone in a process of its own and fails t unless it
// passes there; it reports whether it did (the caller then returns), or
// false in that process, where the caller goes on to its checks.
func ranApart(t *testing.T) bool {
	t.Helper()
	if os.Getenv(freshHeapEnv) != "" {
		return false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), freshHeapEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a process of its own:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("did not pass in a process of its own: %v", err)
	}
	return true
}

// vmFlagsAt is the VmFlags of the mapping holding addr, from
// /proc/self/smaps ("hg": marked MADV_HUGEPAGE).
func vmFlagsAt(t *testing.T, addr uintptr) []string {
	return strings.Fields(smapsField(t, addr, "VmFlags:"))
}

// TestForLoadFaultsTheLoadInAhead: told the host takes free memory back
// (mode "madvise", memory free), ForLoad marks nothing for huge pages
// but faults a share of a reservation in, and a load allocated after it (1 MiB
// slices, touched, as much as it populated) lies mostly there and
// faults few pages of its own.
// Elsewhere it says why not. ForLoad itself takes that path only on
// such a host, and says so.
func TestForLoadFaultsTheLoadInAhead(t *testing.T) {
	if ranApart(t) { // as TestForLoadFaultsTheLoadInHugePages
		adv := ForLoad(256 << 20)
		taken := strings.Contains(adv.Reason, "takes free memory back")
		switch want := HostReclaimsFree() && Mode() != "always"; {
		case want && (!taken || adv.Advised != 0):
			t.Errorf("on a host that takes free memory back: %+v", adv)
		case !want && (taken || adv.Populated != 0):
			t.Errorf("on a host that does not take free memory back: %+v", adv)
		}
		return
	}
	const n = 256 << 20
	// The daemon's load runs with the collector off (particle.PauseGC),
	// so the runtime's scavenger, whose goal follows the collector's,
	// leaves the free reservation resident; with it on, it may return
	// part of it before the load takes it.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	adv := forLoad(n, true, Mode())
	if adv.Advised != 0 {
		t.Fatalf("marked %d bytes for huge pages on a host that takes free memory back", adv.Advised)
	}
	if nothingDone(t, "populated", adv.Populated, adv.FreeAll, 2*n, "free", adv.Reason) {
		return
	}
	if want := populatable(n, adv.FreeAll); adv.Populated != want || adv.hi-adv.lo != uintptr(want) {
		t.Fatalf("populated %d bytes, reserved [%x, %x), of a %d-byte load, want %d of each", adv.Populated, adv.lo, adv.hi, n, want)
	}
	const mib = 128 // within the populated share
	inside, faults, pages := loadFaultsFew(t, mib, adv)
	if inside < mib/2 {
		t.Fatalf("%d of the load's %d slices in the populated range, %d faults for its %d pages", inside, mib, faults, pages)
	}
	t.Logf("%d MiB of the load in the populated range; %d faults for its %d pages", inside, faults, pages)
}

// TestForLoadFaultsTheFreedHeapInFirst: in a process that has freed
// much of its heap and returned it to the kernel (the bench restarts
// its daemon so), ForLoad on a host that takes free memory back faults
// in the holes that memory left first: the load takes the lowest free
// pages, so it fills those holes before anything above them. A load as
// large as the holes then faults few pages of its own. Where the holes
// hold less than the share to fault in, a reservation takes the rest.
func TestForLoadFaultsTheFreedHeapInFirst(t *testing.T) {
	if ranApart(t) { // the holes are this test's own
		return
	}
	held, holes, adv, ok := forLoadAfterFreeing(t, 64)
	if !ok {
		return
	}
	if r := residentBytes(t, holes); r != int64(len(holes))<<20 || adv.Reused < r || adv.Populated != populatable(freedLoad, adv.FreeAll) || adv.hi <= adv.lo {
		t.Fatalf("%d of the holes' %d bytes resident after ForLoad, which faulted in %d before its reservation [%x, %x) (%d in all)",
			r, len(holes)<<20, adv.Reused, adv.lo, adv.hi, adv.Populated)
	}
	loadFaultsFew(t, len(holes), adv)
	runtime.KeepAlive(held)
	t.Logf("%d MiB faulted in before the reservation, %d MiB in all", adv.Reused>>20, adv.Populated>>20)
}

// TestForLoadTakesTheHolesAlone: where the holes a freed heap left hold
// the whole share to fault in, ForLoad faults in the lowest of them and
// reserves nothing (so collects nothing either).
func TestForLoadTakesTheHolesAlone(t *testing.T) {
	if ranApart(t) {
		return
	}
	held, holes, adv, ok := forLoadAfterFreeing(t, 256)
	if !ok {
		return
	}
	want := populatable(freedLoad, adv.FreeAll)
	if r := residentBytes(t, holes); r < want/2 || adv.Reused != want || adv.Populated != want || adv.hi != adv.lo {
		t.Fatalf("%d of the holes' %d bytes resident after ForLoad, which faulted in %d of them (%d in all, want %d) and reserved [%x, %x)",
			r, len(holes)<<20, adv.Reused, adv.Populated, want, adv.lo, adv.hi)
	}
	loadFaultsFew(t, int(want>>20), adv)
	runtime.KeepAlive(held)
}

// freedLoad is the load the freed-heap tests ask ForLoad to ready.
const freedLoad = 256 << 20

// forLoadAfterFreeing builds a heap of 2·holes 1 MiB slices, touched,
// frees every other one and returns the memory to the kernel, as the
// bench's daemon leaves its heap before a restart, then calls forLoad
// for a freedLoad as on a host that takes free memory back. It returns
// the slices held, the holes' addresses and ForLoad's advice; ok is
// false when ForLoad did nothing here (nothingDone). The collector
// stays off from the start (on while the heap is built, it would free
// slices early for the next ones to reuse; off in the daemon's load)
// until the test ends.
func forLoadAfterFreeing(t *testing.T, holes int) (held [][]byte, at []uintptr, adv LoadAdvice, ok bool) {
	gc := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(gc) })
	for i := range 2 * holes {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		if i%2 == 0 {
			held = append(held, b)
		} else {
			at = append(at, uintptr(unsafe.Pointer(&b[0])))
		}
	}
	debug.FreeOSMemory() // the odd slices freed, and returned
	if r := residentBytes(t, at); r > int64(len(at))<<20/4 {
		t.Fatalf("%d of the freed slices' %d bytes still resident after FreeOSMemory", r, len(at)<<20)
	}
	adv = forLoad(freedLoad, true, Mode())
	return held, at, adv, !nothingDone(t, "populated", adv.Populated, adv.FreeAll, 2*freedLoad, "free", adv.Reason)
}

// loadFaultsFew allocates a load of mib 1 MiB slices after ForLoad's
// advice adv, touching each page, and fails t if it faulted more than a
// quarter of them in itself. It returns how many slices start in the
// range adv reserved (touchLoad), the faults and the pages.
func loadFaultsFew(t *testing.T, mib int, adv LoadAdvice) (inside int, faults, pages int64) {
	t.Helper()
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &before); err != nil {
		t.Fatal(err)
	}
	load, inside := touchLoad(mib, adv)
	if err := unix.Getrusage(unix.RUSAGE_SELF, &after); err != nil {
		t.Fatal(err)
	}
	if faults, pages = after.Minflt-before.Minflt, int64(len(load)<<20/4096); faults > pages/4 {
		t.Fatalf("%d faults for the load's %d pages", faults, pages)
	}
	return inside, faults, pages
}

// residentBytes is how many bytes of the 1 MiB ranges at addrs are
// resident.
func residentBytes(t *testing.T, addrs []uintptr) int64 {
	t.Helper()
	vec := make([]byte, 1<<20/4096)
	var n int64
	for _, a := range addrs {
		if err := mincore(a, 1<<20, vec); err != nil {
			t.Fatal(err)
		}
		for _, v := range vec {
			n += int64(v&1) * 4096
		}
	}
	return n
}

// TestForLoadFaultsInAheadInEveryModeButAlways: on a host that takes
// free memory back the load is faulted in ahead whatever the
// transparent huge page mode (it needs no huge pages) but "always",
// where the kernel would fault it in 2 MiB pages anyway.
func TestForLoadFaultsInAheadInEveryModeButAlways(t *testing.T) {
	const n = 64 << 20
	for _, mode := range []string{"madvise", "never", "", "always"} {
		adv := forLoad(n, true, mode)
		modeReason := strings.Contains(adv.Reason, "transparent huge page mode")
		switch {
		case mode == "always" && (!modeReason || adv.Populated != 0):
			t.Errorf("mode %q: %+v, want nothing done for the mode", mode, adv)
		case mode != "always" && (modeReason || adv.Advised != 0):
			t.Errorf("mode %q: %+v, want the load faulted in ahead", mode, adv)
		case mode != "always" && adv.Populated == 0 && adv.FreeAll >= 2*n:
			t.Errorf("mode %q: nothing faulted in with %d MiB free: %s", mode, adv.FreeAll>>20, adv.Reason)
		}
	}
}

// TestForLoadSkipsSmallLoads: a load under a huge page is left alone.
func TestForLoadSkipsSmallLoads(t *testing.T) {
	if adv := ForLoad(1 << 20); adv.Advised != 0 || adv.Reason == "" {
		t.Errorf("a 1 MiB load: %+v", adv)
	}
}

// TestForLoadRespectsTheMemoryLimit: under a Go memory limit smaller
// than twice the load, nothing is reserved.
func TestForLoadRespectsTheMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(256 << 20))
	if adv := ForLoad(256 << 20); adv.Advised != 0 || !strings.Contains(adv.Reason, "limit") && !strings.Contains(adv.Reason, "mode") {
		t.Errorf("a 256 MiB load under a 256 MiB memory limit: %+v", adv)
	}
}

// nothingDone reports whether ForLoad did nothing (done, the bytes it
// advised or populated, is 0), failing t if it gave no reason, or if
// the mode was madvise and free (the free memory that counts, as what
// says) was at least enough and the kernel did not refuse.
func nothingDone(t *testing.T, did string, done, free, enough int64, what, reason string) bool {
	t.Helper()
	if done != 0 {
		return false
	}
	if reason == "" {
		t.Fatalf("nothing %s, and no reason given", did)
	}
	if Mode() == "madvise" && free >= enough && !strings.Contains(reason, "refused") {
		t.Fatalf("mode madvise with %d MiB %s, and nothing %s: %s", free>>20, what, did, reason)
	}
	t.Logf("nothing %s here: %s", did, reason)
	return true
}
