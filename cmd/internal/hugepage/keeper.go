package hugepage

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// Stats are what a keeper has done so far.
type Stats struct {
	// Passes is the number of collapse passes over the process's
	// mappings.
	Passes int
	// Collapsed is the number of 2 MiB ranges collapsed into huge pages.
	Collapsed int
	// Failed counts ranges the kernel refused (not resident yet, or no
	// huge page free); they are tried again on the next pass.
	Failed int
	// Advised is the bytes of the mappings marked MADV_HUGEPAGE.
	Advised int64
}

// Options configure a keeper.
type Options struct {
	// AdviseEvery is the time between looks for new mappings to mark
	// MADV_HUGEPAGE (default 20ms): the runtime maps heap in 64 MiB
	// arenas and fills them as it allocates, so a mapping marked soon
	// after it appears gets most of its pages huge as they fault in,
	// with no copy. A look reads /proc/self/maps (tens of µs).
	AdviseEvery time.Duration
	// CollapseEvery is the time between collapse passes (default 30s),
	// the first one after it too: they collapse what was resident before
	// its mapping was marked (a store loaded before the keeper started,
	// pages faulted in before the look), and ranges the runtime released
	// and refilled. A pass over ranges collapsed before costs nothing.
	CollapseEvery time.Duration
	// Pause is the rest after each collapse (default 2ms). A collapse
	// copies 2 MiB, stops the process's page faults and flushes the TLBs
	// of its other threads (on a VM, for milliseconds: BENCHMARKS.md,
	// forty-first round); resting between them spreads that out.
	Pause time.Duration
	// Quiet, when set, makes the keeper wait for the heap to hold still:
	// it marks no mapping MADV_HUGEPAGE (so a growing heap faults in 4
	// KiB pages, as without a keeper), and a collapse pass starts only
	// when Quiet reports true, CollapseEvery after the last one, checked
	// every QuietEvery, and stops at the first range after it reports
	// false. The daemon reports quiet when no ingest batch has committed
	// for a while (what a pass collapses then stays whole) and no
	// planner call has begun for a while (a collapse would stall it).
	Quiet func() bool
	// QuietEvery is the time between asks of Quiet (default 1s).
	QuietEvery time.Duration
	// MinMapping is the smallest mapping considered (default 32 MiB):
	// the Go heap's, not thread stacks or small runtime structures.
	MinMapping int64
	// Logger receives one line per pass that collapsed anything. Nil
	// discards.
	Logger *slog.Logger
}

func (o *Options) ensureDefaults() {
	if o.AdviseEvery <= 0 {
		o.AdviseEvery = 20 * time.Millisecond
	}
	if o.CollapseEvery <= 0 {
		o.CollapseEvery = 30 * time.Second
	}
	if o.Pause <= 0 {
		o.Pause = 2 * time.Millisecond
	}
	if o.QuietEvery <= 0 {
		o.QuietEvery = time.Second
	}
	if o.MinMapping <= 0 {
		o.MinMapping = 32 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Keeper keeps the process's heap in huge pages.
type Keeper struct {
	o Options
	// advised holds the mappings marked, as last seen; only the
	// goroutine running Advise uses it.
	advised map[mapping]struct{}
	// done holds the 2 MiB ranges collapsed, by start address; only
	// the goroutine running Collapse uses it.
	done map[uintptr]struct{}

	mu    sync.Mutex // guards stats
	stats Stats
}

// New returns a keeper; Run starts it.
func New(o Options) *Keeper {
	o.ensureDefaults()
	return &Keeper{o: o, advised: map[mapping]struct{}{}, done: map[uintptr]struct{}{}}
}

// Stats returns what the keeper has done so far.
func (k *Keeper) Stats() Stats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stats
}

// Mode is the kernel's transparent huge page mode for anonymous memory:
// "always", "madvise", "never", or "" where there is none to read.
func Mode() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(b)) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			return strings.Trim(f, "[]")
		}
	}
	return ""
}

// mapping is one line of /proc/self/maps: [lo, hi).
type mapping struct{ lo, hi uintptr }

// hugeSize is the size of a transparent huge page on the platforms the
// keeper supports (x86-64 and arm64 with 4 KiB base pages).
const hugeSize = 2 << 20
