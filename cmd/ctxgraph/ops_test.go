package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
)

// TestOperatorCommands drives dlq, forget, backup, check and restore
// through the CLI against a daemon, as an operator would.
func TestOperatorCommands(t *testing.T) {
	dir := t.TempDir()
	cfg := daemon.DefaultConfig()
	cfg.Data, cfg.NATS.Addr, cfg.HTTP.Addr = dir, "127.0.0.1:0", "127.0.0.1:0"
	d, err := daemon.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	httpURL := "http://" + d.HTTPAddr()
	file := filepath.Join("..", "..", "testdata", "episodes.jsonl")
	if _, errOut, err := runCLI(t, "replay", "--nats", d.NATSURL(), "--quiet", "--wait", "20s", file); err != nil {
		t.Fatalf("replay: %v\n%s", err, errOut)
	}
	nc, err := nats.Connect(d.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"ctxgraph.rlds.bad.e1", "ctxgraph.rlds.bad.e2"} {
		if _, err := nc.Request(subj, []byte(`{"kind":"step",`), 5e9); err != nil {
			t.Fatal(err)
		}
	}
	nc.Close()
	var list string
	for i := 0; i < 500 && strings.Count(list, "malformed") < 2; i++ {
		list, _, err = runCLI(t, "dlq", "list", "--http", httpURL)
		if err != nil {
			t.Fatal(err)
		}
	}
	if strings.Count(list, "malformed") != 2 || !strings.Contains(list, "ctxgraph.rlds.bad.e1") {
		t.Fatalf("dlq list:\n%s", list)
	}
	id := regexp.MustCompile(`(?m)^(\d+)\s+RLDS`).FindStringSubmatch(list)[1]
	show, _, err := runCLI(t, "dlq", "show", id, "--http", httpURL)
	if err != nil || !strings.Contains(show, `{"kind":"step",`) || !strings.Contains(show, "deliveries: 1") {
		t.Fatalf("dlq show: %v\n%s", err, show)
	}
	if _, _, err := runCLI(t, "dlq", "drop", "--http", httpURL); err == nil {
		t.Error("dlq drop without ids or --all succeeded")
	}
	if out, _, err := runCLI(t, "dlq", "drop", "--all", "--stream", "RLDS", "--http", httpURL); err != nil || !strings.Contains(out, `"done"`) {
		t.Fatalf("dlq drop --all: %v\n%s", err, out)
	}
	if list, _, _ = runCLI(t, "dlq", "list", "--http", httpURL); strings.Contains(list, "malformed") {
		t.Errorf("dead letters left after drop --all:\n%s", list)
	}

	if _, _, err := runCLI(t, "forget", "--entity", "blue bowl", "--http", httpURL); err == nil || !strings.Contains(err.Error(), "--why") {
		t.Errorf("forget without --why: %v", err)
	}
	out, _, err := runCLI(t, "forget", "--entity", "blue bowl", "--why", "test", "--who", "tester", "--http", httpURL)
	if err != nil || !strings.Contains(out, `"who": "tester"`) || !strings.Contains(out, `"name_sha256"`) {
		t.Fatalf("forget: %v\n%s", err, out)
	}

	backup := filepath.Join(t.TempDir(), "x.backup")
	out, _, err = runCLI(t, "backup", "--out", backup, "--http", httpURL)
	if err != nil || !strings.Contains(out, "stream RLDS: applied through seq") {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "check", "--data", dir); err == nil {
		t.Error("check of a running daemon's store succeeded")
	}
	d.Shutdown(context.Background())
	out, _, err = runCLI(t, "check", "--data", dir)
	if err != nil || !strings.Contains(out, "check: ok") || !strings.Contains(out, "vector index") ||
		!regexp.MustCompile(`[1-9][0-9]* embeddings stored apart`).MatchString(out) {
		t.Fatalf("check: %v\n%s", err, out)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if out, _, err = runCLI(t, "restore", backup, "--data", restored); err != nil || !strings.Contains(out, "restored into") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	// The restored store holds the embeddings stored apart too.
	if out, _, err = runCLI(t, "check", "--data", restored, "--json"); err != nil || !strings.Contains(out, `"problems"`) ||
		!regexp.MustCompile(`"vectors": [1-9]`).MatchString(out) {
		t.Fatalf("check of the restored store: %v\n%s", err, out)
	}
	// A damaged backup is refused.
	raw, _ := os.ReadFile(backup)
	os.WriteFile(backup, raw[:len(raw)-10], 0o644)
	if _, _, err := runCLI(t, "restore", backup, "--data", filepath.Join(t.TempDir(), "r2")); err == nil {
		t.Error("restore of a truncated backup succeeded")
	}
}
