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
	// Passes is the number of passes over the process's mappings.
	Passes int
	// Collapsed is the number of 2 MiB ranges collapsed into huge pages.
	Collapsed int
	// Failed counts ranges the kernel refused (not resident yet, or no
	// huge page free); they are tried again on the next pass.
	Failed int
	// Advised is the bytes marked MADV_HUGEPAGE by the last pass.
	Advised int64
}

// Options configure a keeper.
type Options struct {
	// Interval is the time between passes (default 5s): the heap grows
	// with ingest, and each pass collapses what grew since (a pass
	// with nothing new costs a read of /proc/self/maps).
	Interval time.Duration
	// Pause is the rest after each collapse (default 2ms). A collapse
	// briefly stops the process's page faults and flushes the TLBs of
	// its other threads; resting between them spreads that out, so that
	// ingest and the planner hardly notice a pass.
	Pause time.Duration
	// MinMapping is the smallest mapping considered (default 32 MiB):
	// the Go heap's, not thread stacks or small runtime structures.
	MinMapping int64
	// Logger receives one line per pass that collapsed anything. Nil
	// discards.
	Logger *slog.Logger
}

func (o *Options) ensureDefaults() {
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.Pause <= 0 {
		o.Pause = 2 * time.Millisecond
	}
	if o.MinMapping <= 0 {
		o.MinMapping = 32 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Keeper collapses the process's heap into huge pages, pass after pass.
type Keeper struct {
	o Options
	// done holds the 2 MiB ranges collapsed, by start address; only
	// the goroutine running passes uses it.
	done map[uintptr]struct{}

	mu    sync.Mutex // guards stats
	stats Stats
}

// Stats returns what the keeper has done so far.
func (k *Keeper) Stats() Stats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stats
}

// New returns a keeper; Run starts it.
func New(o Options) *Keeper {
	o.ensureDefaults()
	return &Keeper{o: o, done: map[uintptr]struct{}{}}
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

// hugeSize is the size of a transparent huge page on the platforms the
// keeper supports (x86-64 and arm64 with 4 KiB base pages).
const hugeSize = 2 << 20
