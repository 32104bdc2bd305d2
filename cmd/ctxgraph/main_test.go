package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
)

func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestHelpDescribesEveryCommand(t *testing.T) {
	out, _, err := runCLI(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	root := newRoot(io.Discard, io.Discard)
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if !strings.Contains(out, c.Name()) {
			t.Errorf("--help does not list %s", c.Name())
		}
		sub, _, err := runCLI(t, c.Name(), "--help")
		if err != nil || !strings.Contains(sub, "Usage:") {
			t.Errorf("%s --help: %v", c.Name(), err)
		}
	}
	serve, _, _ := runCLI(t, "serve", "--help")
	for _, flag := range []string{"--data", "--nats-addr", "--http-addr", "--config", "--cpuprofile"} {
		if !strings.Contains(serve, flag) {
			t.Errorf("serve --help lacks %s", flag)
		}
	}
}

// TestServeWritesACPUProfile runs serve with --cpuprofile until it is
// interrupted: the file then holds a gzipped pprof profile.
func TestServeWritesACPUProfile(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.pprof")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--cpuprofile", prof, "--data", filepath.Join(dir, "data"),
			"--nats-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "error"}, &out, &errb)
	}()
	time.Sleep(time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, errb.String())
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("--cpuprofile wrote %d bytes (%v), want a gzipped profile", len(b), err)
	}
}

func TestReplayThenContextThroughTheCLI(t *testing.T) {
	cfg := daemon.DefaultConfig()
	cfg.Data, cfg.NATS.Addr, cfg.HTTP.Addr = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0"
	d, err := daemon.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	file := filepath.Join("..", "..", "testdata", "episodes.jsonl")
	_, errOut, err := runCLI(t, "replay", "--nats", d.NATSURL(), "--quiet", "--retime", "--wait", "20s", file)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "published 40 messages (4 episodes") || !strings.Contains(errOut, "applied everything") {
		t.Errorf("replay summary: %s", errOut)
	}
	// Replaying again stores nothing new.
	_, errOut, _ = runCLI(t, "replay", "--nats", d.NATSURL(), "--quiet", file)
	if !strings.Contains(errOut, "40 already stored") {
		t.Errorf("second replay: %s", errOut)
	}
	out, _, err := runCLI(t, "context", "--nats", d.NATSURL(), "--query", "where is the red block", "--entity", "red block", "--entity", "unicorn", "--hops", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"red block -[located_in]-> blue bowl", "from episode ep-alpha-0001 step 4", `Unknowns: 1  entity "unicorn"`, "Context state vector: 384-d", "Timings (µs)"} {
		if !strings.Contains(out, want) {
			t.Errorf("context output lacks %q:\n%s", want, out)
		}
	}
	// --format prints the rendering as is; --strategy picks the retrieval.
	out, _, err = runCLI(t, "context", "--nats", d.NATSURL(), "--query", "blue bowl", "--strategy", "keyword", "--format", "text")
	if err != nil || !strings.Contains(out, "strategy keyword") || !strings.Contains(out, "blue bowl is an entity") {
		t.Errorf("context --strategy keyword --format text: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "context", "--nats", d.NATSURL(), "--query", "x", "--hops", "99"); err == nil || !strings.Contains(err.Error(), "hops") {
		t.Errorf("bad request error = %v", err)
	}
	stats, _, err := runCLI(t, "stats", "--http", "http://"+d.HTTPAddr())
	if err != nil || !strings.Contains(stats, `"steps":32`) {
		t.Errorf("stats: %v %s", err, stats)
	}
}
