package daemon

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestStorageValueThresholdIsValidated(t *testing.T) {
	for _, v := range []int{-1, 1<<20 + 1} {
		cfg := testConfig(t.TempDir())
		cfg.Storage.ValueThreshold = v
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "storage.value_threshold") {
			t.Errorf("value_threshold %d validated: %v", v, err)
		}
	}
	for _, v := range []int{0, 1 << 10, 1 << 20} {
		cfg := testConfig(t.TempDir())
		cfg.Storage.ValueThreshold = v
		if err := cfg.Validate(); err != nil {
			t.Errorf("value_threshold %d refused: %v", v, err)
		}
	}
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
	startDaemon(t, cfg)
	if gc := debug.SetGCPercent(100); gc != 300 {
		t.Errorf("GC percent %d after a start with gc_percent 300", gc)
	}
	if limit := debug.SetMemoryLimit(-1); limit != 8192<<20 {
		t.Errorf("memory limit %d after a start with limit_mib 8192", limit)
	}
	// The defaults leave both alone.
	debug.SetGCPercent(150)
	startDaemon(t, testConfig(t.TempDir()))
	if gc := debug.SetGCPercent(100); gc != 150 {
		t.Errorf("GC percent %d after a start with the default, want the 150 set before", gc)
	}
}

func TestStorageMemTableIsValidated(t *testing.T) {
	if got := testConfig(t.TempDir()).Storage.MemTableMiB; got != 16 {
		t.Errorf("default storage.memtable_mib %d, want 16", got)
	}
	for _, v := range []int{0, 3, 1025} {
		cfg := testConfig(t.TempDir())
		cfg.Storage.MemTableMiB = v
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "storage.memtable_mib") {
			t.Errorf("memtable_mib %d validated: %v", v, err)
		}
	}
	for _, v := range []int{4, 64, 1024} {
		cfg := testConfig(t.TempDir())
		cfg.Storage.MemTableMiB = v
		if err := cfg.Validate(); err != nil {
			t.Errorf("memtable_mib %d refused: %v", v, err)
		}
	}
}
