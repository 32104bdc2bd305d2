package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport/arrowexporttest"
)

// TestExportThroughTheCLI replays the testdata episodes, then exports
// with the CLI from the daemon's HTTP stream: steps as Parquet files of
// 10 rows, edges as an Arrow file for the visitor role, and a LeRobot
// dataset directory.
func TestExportThroughTheCLI(t *testing.T) {
	cfg := daemon.DefaultConfig()
	cfg.Data, cfg.NATS.Addr, cfg.HTTP.Addr = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0"
	d, err := daemon.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	file := filepath.Join("..", "..", "testdata", "episodes.jsonl")
	if _, errOut, err := runCLI(t, "replay", "--nats", d.NATSURL(), "--quiet", "--wait", "20s", file); err != nil {
		t.Fatalf("replay: %v\n%s", err, errOut)
	}
	url := "http://" + d.HTTPAddr()
	dir := t.TempDir()

	out := filepath.Join(dir, "steps.parquet")
	_, errOut, err := runCLI(t, "export", "--http", url, "--table", "steps", "--format", "parquet", "--out", out, "--rows-per-file", "10", "--quiet")
	if err != nil {
		t.Fatalf("export: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "exported 32 steps rows") {
		t.Errorf("summary: %s", errOut)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "steps-*.parquet"))
	var rows []int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, recs := arrowexporttest.Read(t, arrowexport.FormatParquet, b)
		rows = append(rows, arrowexporttest.Rows(recs))
	}
	if len(rows) != 4 || rows[0] != 10 || rows[3] != 2 {
		t.Errorf("files %v hold %v rows, want 10, 10, 10, 2", files, rows)
	}

	out = filepath.Join(dir, "edges.arrow")
	if _, errOut, err := runCLI(t, "export", "--http", url, "--table", "edges", "--format", "arrow", "--out", out, "--role", "visitor", "--quiet"); err != nil {
		t.Fatalf("export edges: %v\n%s", err, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	_, recs := arrowexporttest.Read(t, arrowexport.FormatArrow, b)
	for _, e := range arrowexporttest.Decode(t, recs, arrowexport.DecodeEdges) {
		if e.Assertion != nil && e.Assertion.Predicate == "calibration_offset" {
			t.Error("the visitor's export holds the edge the visitor is denied")
		}
	}

	out = filepath.Join(dir, "lerobot")
	if _, errOut, err := runCLI(t, "export", "--http", url, "--format", "lerobot", "--out", out, "--agent", "franka-beta", "--quiet"); err != nil {
		t.Fatalf("export lerobot: %v\n%s", err, errOut)
	}
	var info struct {
		TotalEpisodes int     `json:"total_episodes"`
		TotalFrames   int     `json:"total_frames"`
		FPS           float64 `json:"fps"`
	}
	if b, err := os.ReadFile(filepath.Join(out, "meta", "info.json")); err != nil || json.Unmarshal(b, &info) != nil {
		t.Fatalf("info.json: %v", err)
	}
	if info.TotalEpisodes != 2 || info.TotalFrames != 16 || info.FPS != 2 {
		t.Errorf("info.json %+v, want franka-beta's 2 episodes, 16 frames, 2 fps", info)
	}
	for _, f := range []string{"data/chunk-000/episode_000000.parquet", "data/chunk-000/episode_000001.parquet", "meta/episodes.jsonl", "meta/tasks.jsonl", "meta/episodes_stats.jsonl", "meta/stats.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("lerobot layout: %v", err)
		}
	}

	// Bad flags fail before any request.
	for _, args := range [][]string{
		{"--table", "cats"}, {"--format", "csv"}, {"--table", "edges", "--format", "lerobot"}, {"--since", "soon"}, {"--min-salience", "3"},
	} {
		if _, _, err := runCLI(t, append([]string{"export", "--http", url, "--quiet", "--out", filepath.Join(dir, "x")}, args...)...); err == nil {
			t.Errorf("export %v: no error", args)
		}
	}
}
