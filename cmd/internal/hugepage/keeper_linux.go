//go:build linux

package hugepage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// madvCollapse is MADV_COLLAPSE (Linux 6.1): collapse the resident
// pages of a range into huge pages now, whatever the THP mode.
const madvCollapse = unix.MADV_COLLAPSE

// Run keeps the heap in huge pages until ctx ends. Two goroutines do
// it: one advises new mappings every AdviseEvery, at normal priority
// (a madvise is cheap, and it must come before the runtime touches the
// pages), unless Options.Quiet is set; the other collapses what is
// resident every CollapseEvery (with Quiet, once quiet too), on an OS
// thread of its own at the lowest priority (a collapse copies 2 MiB).
// Run returns when ctx ends, or with an error if the kernel cannot
// collapse memory at all.
func (k *Keeper) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	advised := make(chan error, 1)
	if k.o.Quiet != nil {
		advised <- nil // nothing to advise: the heap grows in 4 KiB pages
	} else {
		go k.adviseLoop(ctx, advised)
	}
	collapsed := make(chan error, 1)
	go func() {
		// The thread dies with the goroutine (it stays locked), so its
		// priority does not pass to other goroutines.
		runtime.LockOSThread()
		if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19); err != nil {
			k.o.Logger.Debug("huge pages: cannot lower the keeper's priority", "err", err)
		}
		collapsed <- k.collapseLoop(ctx)
	}()
	// Run ends when both have ended: with ctx, or with the first error,
	// which ends the other.
	var err error
	select {
	case err = <-advised:
		if err != nil {
			cancel()
		}
		err = errors.Join(err, <-collapsed)
	case err = <-collapsed:
		cancel()
		err = errors.Join(err, <-advised)
	}
	return err
}

// adviseLoop advises new mappings every AdviseEvery until ctx ends (nil
// on done) or an advice fails.
func (k *Keeper) adviseLoop(ctx context.Context, done chan<- error) {
	t := time.NewTicker(k.o.AdviseEvery)
	defer t.Stop()
	for {
		if err := k.Advise(); err != nil {
			done <- err
			return
		}
		select {
		case <-ctx.Done():
			done <- nil
			return
		case <-t.C:
		}
	}
}

// waitQuiet returns true at once without Options.Quiet, else once Quiet
// reports true (asked every QuietEvery), false if ctx ends first.
func (k *Keeper) waitQuiet(ctx context.Context) bool {
	for k.o.Quiet != nil && !k.o.Quiet() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(k.o.QuietEvery):
		}
	}
	return ctx.Err() == nil
}

func (k *Keeper) collapseLoop(ctx context.Context) error {
	t := time.NewTimer(k.o.CollapseEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !k.waitQuiet(ctx) {
			return nil
		}
		before := k.Stats().Collapsed
		if err := k.Collapse(ctx); err != nil {
			return err
		}
		if now := k.Stats().Collapsed; now > before {
			k.o.Logger.Info("huge pages: heap collapsed", "mib", 2*(now-before), "total_mib", 2*now)
		}
		t.Reset(k.o.CollapseEvery)
	}
}

// errUnsupported is a kernel that cannot collapse anything.
var errUnsupported = errors.New("hugepage: the kernel cannot collapse memory into huge pages (needs Linux 6.1 and transparent huge pages)")

// mappings reads the large anonymous mappings of the process.
func (k *Keeper) mappings() ([]mapping, error) { return readAnonMappings(k.o.MinMapping) }

// readAnonMappings reads the process's anonymous read-write mappings of
// at least min bytes (anonMappings).
func readAnonMappings(min int64) ([]mapping, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("hugepage: %w", err)
	}
	return anonMappings(strings.NewReader(string(maps)), min)
}

// Advise marks MADV_HUGEPAGE the mappings not marked yet: pages the
// process touches there from now on fault in as huge pages, with no
// copy. Calls must not run concurrently.
func (k *Keeper) Advise() error {
	ranges, err := k.mappings()
	if err != nil {
		return err
	}
	var bytes int64
	seen := make(map[mapping]struct{}, len(ranges))
	for _, r := range ranges {
		lo, hi := alignUp(r.lo), alignDown(r.hi)
		if hi <= lo {
			continue
		}
		seen[r] = struct{}{}
		if _, ok := k.advised[r]; !ok {
			// (A mapping that cannot be advised is left to the
			// collapse, which reports a kernel that cannot.)
			_ = madvise(lo, hi-lo, unix.MADV_HUGEPAGE)
		}
		bytes += int64(hi - lo)
	}
	k.advised = seen
	k.mu.Lock()
	k.stats.Advised = bytes
	k.mu.Unlock()
	return nil
}

// Collapse collapses the resident pages of the mappings into huge pages,
// 2 MiB at a time, resting Pause after each, skipping what it collapsed
// before. It stops early if ctx ends or, with Options.Quiet, as soon as
// Quiet reports false. Calls must not run concurrently.
func (k *Keeper) Collapse(ctx context.Context) error {
	ranges, err := k.mappings()
	if err != nil {
		return err
	}
	collapsed, refused := 0, 0
	var lastErr error
	defer func() {
		k.mu.Lock()
		k.stats.Passes++
		k.stats.Collapsed += collapsed
		k.stats.Failed += refused
		k.mu.Unlock()
	}()
	for _, r := range ranges {
		for a := alignUp(r.lo); a+hugeSize <= r.hi; a += hugeSize {
			if ctx.Err() != nil || k.o.Quiet != nil && !k.o.Quiet() {
				return nil // the rest at the next pass
			}
			if _, ok := k.done[a]; ok {
				continue
			}
			if err := madvise(a, hugeSize, madvCollapse); err != nil {
				// EINVAL: not resident (or no THP at all); EAGAIN,
				// ENOMEM: no huge page free now. Tried again next pass.
				refused++
				lastErr = err
				continue
			}
			k.done[a] = struct{}{}
			collapsed++
			time.Sleep(k.o.Pause)
		}
	}
	k.forgetUnmapped(ranges)
	if collapsed == 0 && len(k.done) == 0 && refused > 0 && errors.Is(lastErr, unix.EINVAL) {
		// Nothing ever collapsed, and the kernel says it cannot: with a
		// resident heap of at least MinMapping, that is no support.
		return fmt.Errorf("%w: %v", errUnsupported, lastErr)
	}
	return nil
}

// forgetUnmapped drops remembered ranges no mapping covers any more (the
// runtime released them), so that memory mapped there again is
// collapsed too.
func (k *Keeper) forgetUnmapped(ranges []mapping) {
	for a := range k.done {
		if !covered(ranges, a) {
			delete(k.done, a)
		}
	}
}

func covered(ranges []mapping, a uintptr) bool {
	for _, r := range ranges {
		if r.lo <= a && a+hugeSize <= r.hi {
			return true
		}
	}
	return false
}

// anonMappings returns the private, anonymous, read-write mappings of at
// least min bytes listed in a /proc/<pid>/maps text: unnamed ones, and
// those named "[anon:...]" (the Go runtime names its heap so on kernels
// that allow it) or "[heap]".
func anonMappings(r io.Reader, min int64) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[1] != "rw-p" || f[4] != "0" {
			continue
		}
		if len(f) > 5 {
			name := strings.Join(f[5:], " ")
			if !strings.HasPrefix(name, "[anon:") && name != "[heap]" {
				continue
			}
		}
		los, his, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("hugepage: maps line %q: no range", sc.Text())
		}
		lo, err1 := strconv.ParseUint(los, 16, 64)
		hi, err2 := strconv.ParseUint(his, 16, 64)
		if err := errors.Join(err1, err2); err != nil || hi < lo {
			return nil, fmt.Errorf("hugepage: maps line %q: bad range: %v", sc.Text(), err)
		}
		if int64(hi-lo) >= min {
			out = append(out, mapping{uintptr(lo), uintptr(hi)})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hugepage: read maps: %w", err)
	}
	return out, nil
}

func alignUp(a uintptr) uintptr   { return (a + hugeSize - 1) &^ (hugeSize - 1) }
func alignDown(a uintptr) uintptr { return a &^ (hugeSize - 1) }

func madvise(addr, n uintptr, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, addr, n, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}
