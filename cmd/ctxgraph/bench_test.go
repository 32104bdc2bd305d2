package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraph/ctxgraph/cmd/internal/bench"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
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

// TestBenchRunRestartsInAProcess runs bench run with its restart in a
// process of its own: this test binary, started as `ctxgraph serve`
// (cliEnv), on the run's data directory. The run reports when it served
// and answered, and it left the store whole and unlocked: a daemon
// started on it afterwards holds the edges the run counted.
func TestBenchRunRestartsInAProcess(t *testing.T) {
	t.Setenv(cliEnv, "1") // for the started process; this one reads it only at its start
	dir := t.TempDir()
	data, js := filepath.Join(dir, "data"), filepath.Join(dir, "run.json")
	_, errb, err := runCLI(t, "bench", "run", "--preset", "micro", "--dir", filepath.Join(dir, "workload"), "--data", data,
		"--phases", "reopen", "--threads", "1", "--json", js)
	if err != nil {
		t.Fatalf("bench run: %v\n%s", err, errb)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Figures map[string]float64 `json:"figures"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	f := rep.Figures
	serving, answered, rss := f["reopen.process_serving_s"], f["reopen.process_s"], f["reopen.process_rss_bytes"]
	if !(serving > 0 && answered >= serving && rss > 0) {
		t.Fatalf("restart figures: serving %v s, answered %v s, RSS %v bytes; want 0 < serving <= answered, RSS > 0\n%s", serving, answered, rss, errb)
	}
	if f["reopen.process.start.view_s"] <= 0 || f["reopen.process.start.view_s"] > serving {
		t.Errorf("the restarted process's view loaded in %v s of its %v s start", f["reopen.process.start.view_s"], serving)
	}
	if !strings.Contains(errb, "restarted in a process of its own") {
		t.Errorf("no progress line for the restart:\n%s", errb)
	}
	cfg := daemon.DefaultConfig()
	cfg.Data, cfg.NATS.Addr, cfg.HTTP.Addr = data, "127.0.0.1:0", "127.0.0.1:0"
	d, err := daemon.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("a daemon on the run's data after the restarted process stopped: %v", err)
	}
	defer d.Shutdown(context.Background())
	var edges int64
	for _, n := range d.Store().Counts().Edges {
		edges += n
	}
	if got, want := edges, int64(f["graph.edges"]); got != want || want == 0 {
		t.Fatalf("the store holds %d edges after the restart, the run counted %d", got, want)
	}
}
