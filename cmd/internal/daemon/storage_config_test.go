package daemon

import (
	"context"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

func TestStorageValueThresholdIsValidated(t *testing.T) {
	checkSizeBounds(t, "storage.value_threshold", func(c *Config, v int) { c.Storage.ValueThreshold = v },
		[]int{-1, 1<<20 + 1}, []int{0, 1 << 10, 1 << 20})
}

func TestMemoryConfigIsValidatedAndApplied(t *testing.T) {
	for _, m := range []struct {
		gc    int
		limit int64
	}{{0, 0}, {-2, 0}, {-1, 0}, {100, -1}} {
		cfg := testConfig(t.TempDir())
		cfg.Memory.GCPercent, cfg.Memory.LimitMiB = m.gc, m.limit
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "memory:") {
			t.Errorf("gc_percent %d limit_mib %d validated: %v", m.gc, m.limit, err)
		}
	}
	// A daemon started with gc_percent 300 and a limit sets both for
	// the process.
	prevGC, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(prevGC); debug.SetMemoryLimit(prevLimit) })
	cfg := testConfig(t.TempDir())
	cfg.Memory.GCPercent, cfg.Memory.LimitMiB = 300, 8192
	// Codes other stores of this process mapped (released as
	// collections find them unreachable, never added here: the new
	// store holds no edge) are budgeted out of Go's share.
	mapped := particle.MappedCodeBytes()
	<-startDaemon(t, cfg).LoadCollected()
	if gc := debug.SetGCPercent(100); gc != 300 {
		t.Errorf("GC percent %d after a start with gc_percent 300", gc)
	}
	if limit := debug.SetMemoryLimit(-1); limit > 8192<<20 || limit < 8192<<20-mapped {
		t.Errorf("memory limit %d after a start with limit_mib 8192, %d bytes of codes mapped before", limit, mapped)
	}
	// A store with edges maps their codes as it loads: the limit a
	// start sets leaves room for them, one chunk at least.
	dir := t.TempDir()
	d := startDaemon(t, testConfig(dir))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg = testConfig(dir)
	cfg.Memory.LimitMiB = 8192
	<-startDaemon(t, cfg).LoadCollected()       // its pause of the collector ended
	chunk := int64(4096 * cfg.Embed.Dimensions) // particle's codeChunkSeqs
	if limit := debug.SetMemoryLimit(-1); limit > 8192<<20-chunk {
		t.Errorf("memory limit %d after a start with limit_mib 8192 and a store whose codes are mapped, want at most %d", limit, 8192<<20-chunk)
	}
	// The defaults leave both alone.
	debug.SetGCPercent(150)
	<-startDaemon(t, testConfig(t.TempDir())).LoadCollected()
	if gc := debug.SetGCPercent(100); gc != 150 {
		t.Errorf("GC percent %d after a start with the default, want the 150 set before", gc)
	}
}

// checkSizeBounds: a config whose size (set by set) is bad is refused
// with the setting's name, one whose size is good is not.
func checkSizeBounds(t *testing.T, name string, set func(*Config, int), bad, good []int) {
	t.Helper()
	for _, v := range bad {
		cfg := testConfig(t.TempDir())
		set(&cfg, v)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s %d validated: %v", name, v, err)
		}
	}
	for _, v := range good {
		cfg := testConfig(t.TempDir())
		set(&cfg, v)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s %d refused: %v", name, v, err)
		}
	}
}

func TestStorageMemTableIsValidated(t *testing.T) {
	if got := testConfig(t.TempDir()).Storage.MemTableMiB; got != 16 {
		t.Errorf("default storage.memtable_mib %d, want 16", got)
	}
	checkSizeBounds(t, "storage.memtable_mib", func(c *Config, v int) { c.Storage.MemTableMiB = v },
		[]int{0, 3, 1025}, []int{4, 64, 1024})
}

func TestStorageValueLogFileIsValidated(t *testing.T) {
	if got := testConfig(t.TempDir()).Storage.ValueLogFileMiB; got != 64 {
		t.Errorf("default storage.value_log_file_mib %d, want 64", got)
	}
	checkSizeBounds(t, "storage.value_log_file_mib", func(c *Config, v int) { c.Storage.ValueLogFileMiB = v },
		[]int{0, -1, 2048}, []int{1, 64, 2047})
}

// TestGoMemoryLimitLeavesRoomForTheCodes: memory.limit_mib is the
// daemon's budget; Go's share is what the codes outside its heap leave,
// never under half.
func TestGoMemoryLimitLeavesRoomForTheCodes(t *testing.T) {
	const gib = int64(1) << 30
	for _, c := range []struct{ budget, outside, want int64 }{
		{4 * gib, 0, 4 * gib},
		{4 * gib, gib / 2, 4*gib - gib/2},
		{4 * gib, 3 * gib, 2 * gib},
	} {
		if got := goMemoryLimit(c.budget, c.outside); got != c.want {
			t.Errorf("goMemoryLimit(%d, %d) = %d, want %d", c.budget, c.outside, got, c.want)
		}
	}
}
