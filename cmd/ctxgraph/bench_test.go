package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraph/ctxgraph/cmd/internal/bench"
)

// writeRun writes a bench run's JSON as bench run --json does.
func writeRun(t *testing.T, file, preset string, figures map[string]float64) string {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := (&bench.Report{Preset: preset, Figures: figures}).WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestBenchCompare(t *testing.T) {
	dir := t.TempDir()
	a1 := writeRun(t, filepath.Join(dir, "a1.json"), "medium", map[string]float64{"reopen_s": 1.0, "ingest.steps_per_s": 5000})
	b1 := writeRun(t, filepath.Join(dir, "b1.json"), "medium", map[string]float64{"reopen_s": 0.5, "ingest.steps_per_s": 5500})
	a2 := writeRun(t, filepath.Join(dir, "a2.json"), "medium", map[string]float64{"reopen_s": 1.2, "ingest.steps_per_s": 5200})
	small := writeRun(t, filepath.Join(dir, "small.json"), "small", map[string]float64{"reopen_s": 0.2})

	out, _, err := runCLI(t, "bench", "compare", "--figures", "reopen_s", "base="+a1, "new="+b1, "base="+a2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "| reopen_s (target ≤ 5) | 1.100 (1.000–1.200) | 0.500 | -54.5% |") || strings.Contains(out, "steps_per_s") {
		t.Errorf("compare --figures reopen_s:\n%s", out)
	}
	// A file without a label is a group of its own, named by the file.
	out, _, err = runCLI(t, "bench", "compare", a1, b1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "| figure | "+a1+" (1) | "+b1+" (1) | "+b1+" against "+a1+" |") || !strings.Contains(out, "| ingest.steps_per_s (target ≥ 20,000) | 5,000 | 5,500 | +10.0% |") {
		t.Errorf("compare of two unlabelled runs:\n%s", out)
	}
	for _, args := range [][]string{
		{a1, small},                           // presets differ
		{a1, filepath.Join(dir, "nope.json")}, // no such file
		{"--figures", "planner.*", a1},        // nothing matches
		{},                                    // nothing to compare
	} {
		if _, _, err := runCLI(t, append([]string{"bench", "compare"}, args...)...); err == nil {
			t.Errorf("bench compare %q succeeded", args)
		}
	}
}
