package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/session"
	"github.com/ctxgraph/ctxgraph/wave"
)

// logBuf collects a daemon's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startDaemonLogged(t *testing.T, cfg Config) (*Daemon, *logBuf) {
	t.Helper()
	lb := &logBuf{}
	d, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	return d, lb
}

// eventually polls cond until it holds, failing the test after a
// generous bound (a hang, not a timing requirement).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readyz(t *testing.T, d *Daemon) (int, map[string]bool) {
	t.Helper()
	resp, err := http.Get("http://" + d.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]bool
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (c *controller) consumerInfo(stream, durable string) (pending, ackPending, redelivered int) {
	c.t.Helper()
	cons, err := c.js.Consumer(context.Background(), stream, durable)
	if err != nil {
		c.t.Fatal(err)
	}
	ci, err := cons.Info(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return int(ci.NumPending), ci.NumAckPending, ci.NumRedelivered
}

func TestStorageFailurePausesIngestAndResumesByItself(t *testing.T) {
	d, logs := startDaemonLogged(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	before := answerShape(c.ask(redBlockQuery))
	steps := d.Store().Counts().Steps

	d.Store().InjectFault(errors.New("no space left on device (injected)"))
	bot := client.Synthetic{Agent: "ur5-delta"}
	c.publishAll(bot.Episode("ep-delta-1", 6, time.Now()))

	// Ingest pauses: /readyz says storage is failing, the batch is held
	// unacked and retried with backoff, nothing is dead-lettered.
	eventually(t, "/readyz to report the storage failure", func() bool {
		code, checks := readyz(t, d)
		return code == http.StatusServiceUnavailable && !checks["storage"] && checks["nats"]
	})
	eventually(t, "several held retries", func() bool {
		return d.sumConsumers(func(k *consumer) int64 { return k.paused.Load() }) >= 4
	})
	_, ackPending, redelivered := c.consumerInfo(StreamRLDS, DurableRLDS)
	if ackPending == 0 || redelivered != 0 {
		t.Errorf("during the outage: %d unacked, %d redelivered; want the batch held, unacked, not redelivered", ackPending, redelivered)
	}
	if got := d.Store().Counts().Steps; got != steps {
		t.Errorf("steps changed during the outage: %d, want %d", got, steps)
	}
	// The planner keeps serving from memory.
	if got := answerShape(c.ask(redBlockQuery)); got != before {
		t.Error("planner answer changed during the storage outage")
	}
	if !strings.Contains(logs.String(), "storage failing") {
		t.Errorf("the log does not report the storage failure:\n%s", logs)
	}

	// Storage recovers: ingest resumes by itself, everything applies once.
	d.Store().InjectFault(nil)
	c.waitApplied()
	if got := d.Store().Counts().Steps; got != steps+6 {
		t.Errorf("steps after recovery = %d, want %d", got, steps+6)
	}
	if code, _ := readyz(t, d); code != http.StatusOK {
		t.Errorf("/readyz after recovery: %d", code)
	}
	if !strings.Contains(logs.String(), "storage recovered") {
		t.Errorf("the log does not report the recovery:\n%s", logs)
	}
	if dl := deadLetters(t, c, StreamRLDS); len(dl) != 0 {
		t.Errorf("storage failure dead-lettered messages: %v", reasons(dl))
	}
	assertUsesEvidence(t, d.Store(), bot, 6)
}

// assertUsesEvidence checks that the bot's agent -uses-> tool edge saw
// exactly n steps: each applied once.
func assertUsesEvidence(t *testing.T, s *particle.Store, bot client.Synthetic, n int) {
	t.Helper()
	if ev := bot.Evidence(s); ev != n {
		t.Errorf("%s uses %s: evidence %d, want %d (every step applied exactly once)", bot.Agent, bot.Tool(), ev, n)
	}
}

// poisonEmbedder is an OpenAI-compatible embeddings server that refuses
// any text mentioning "poison" while refuse is set, and logs when.
type poisonEmbedder struct {
	mu       sync.Mutex
	refuse   bool
	attempts []time.Time
}

func (p *poisonEmbedder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input []string `json:"input"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	p.mu.Lock()
	for _, s := range req.Input {
		if strings.Contains(s, "poison") {
			p.attempts = append(p.attempts, time.Now())
			if p.refuse {
				p.mu.Unlock()
				http.Error(w, `{"error":{"message":"input rejected"}}`, http.StatusBadRequest)
				return
			}
		}
	}
	p.mu.Unlock()
	writeFakeEmbeddings(w, req.Input, 16)
}

func TestPoisonMessageIsRetriedThenDeadLetteredWhileTheStreamFlows(t *testing.T) {
	emb := &poisonEmbedder{refuse: true}
	srv := httptest.NewServer(emb)
	defer srv.Close()
	cfg := testConfig(t.TempDir())
	cfg.Embed.Provider, cfg.Embed.Dimensions, cfg.Embed.BaseURL, cfg.Embed.Model = "openai", 16, srv.URL, "test"
	cfg.Ingest.MaxDeliver = 4
	cfg.Ingest.Backoff = 200 * time.Millisecond
	d := startDaemon(t, cfg)
	c := connect(t, d)

	t0 := time.Now()
	poison := &rlds.Message{Kind: rlds.KindStep, Agent: "ur5-eps", EpisodeID: "ep-poison", Step: &rlds.Step{
		Index: 0, Timestamp: t0, Annotations: &rlds.Annotations{Entities: []string{"poison pill"}}}}
	body, _ := json.Marshal(poison)
	c.publishRaw(poison.Subject("ctxgraph"), body)
	// Behind it, a healthy robot's episode.
	bot := client.Synthetic{Agent: "ur5-zeta"}
	c.publishAll(bot.Episode("ep-zeta-1", 20, t0))
	var flowed time.Time
	eventually(t, "the healthy episode to apply", func() bool {
		ep, err := d.Store().Episode(particle.DefaultNamespace, "ep-zeta-1")
		if err == nil && ep.Ended && ep.Steps == 20 {
			flowed = time.Now()
			return true
		}
		return false
	})
	var dl []DeadLetter
	eventually(t, "the poison message to be dead-lettered", func() bool {
		dl = deadLetters(t, c, StreamRLDS)
		return len(dl) > 0
	})
	if len(dl) != 1 {
		t.Fatalf("dead letters: %v", reasons(dl))
	}
	got := dl[0]
	if got.Deliveries != 4 || got.Subject != poison.Subject("ctxgraph") || !bytes.Equal(got.Payload, body) ||
		!strings.Contains(got.Error, "gave up after 4 deliveries") || !strings.Contains(got.Error, "400") {
		t.Errorf("dead letter = %+v", got)
	}
	if !flowed.Before(got.At) {
		t.Errorf("the healthy episode applied at %v, not before the poison was given up at %v: the stream waited", flowed, got.At)
	}
	// Each redelivery waited at least the doubled backoff.
	emb.mu.Lock()
	attempts := slices.Clone(emb.attempts)
	emb.mu.Unlock()
	if len(attempts) < 4 {
		t.Fatalf("the poison was attempted %d times, want 4", len(attempts))
	}
	for i := 1; i < 4; i++ {
		want := cfg.Ingest.Backoff << (i - 1)
		if gap := attempts[i].Sub(attempts[i-1]); gap < want*9/10 {
			t.Errorf("retry %d came after %v, want at least %v", i, gap, want)
		}
	}
	assertUsesEvidence(t, d.Store(), bot, 20)

	// The operator fixes the cause and replays it.
	emb.mu.Lock()
	emb.refuse = false
	emb.mu.Unlock()
	var list DLQList
	if code := httpDo(t, d, "GET", "/v1/dlq?stream=RLDS", nil, &list); code != 200 || len(list.Entries) != 1 || list.Entries[0].Payload != nil {
		t.Fatalf("GET /v1/dlq: %d %+v", code, list)
	}
	id := list.Entries[0].ID
	var shown DLQEntry
	if code := httpDo(t, d, "GET", fmt.Sprintf("/v1/dlq/%d", id), nil, &shown); code != 200 || !bytes.Equal(shown.Payload, body) {
		t.Fatalf("GET /v1/dlq/%d: %d %+v", id, code, shown)
	}
	if code := httpDo(t, d, "POST", fmt.Sprintf("/v1/dlq/%d/replay", id), nil, nil); code != 200 {
		t.Fatalf("replay: %d", code)
	}
	c.waitApplied()
	if ep, err := d.Store().Episode(particle.DefaultNamespace, "ep-poison"); err != nil || ep.Steps != 1 {
		t.Errorf("replayed step not applied: %+v %v", ep, err)
	}
	if dl := deadLetters(t, c, StreamRLDS); len(dl) != 0 {
		t.Errorf("dead letters after the replay: %v", reasons(dl))
	}
	if code := httpDo(t, d, "GET", "/v1/dlq", nil, &list); code != 200 || len(list.Entries) != 0 {
		t.Errorf("DLQ after the replay: %+v", list)
	}
	if code := httpDo(t, d, "GET", fmt.Sprintf("/v1/dlq/%d", id), nil, nil); code != 404 {
		t.Errorf("replayed dead letter still shown: %d", code)
	}
}

func TestDLQDrop(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	for i := range 3 {
		c.publishRaw(fmt.Sprintf("ctxgraph.rlds.bad.e%d", i), []byte(`{"kind":"step",`))
	}
	c.publishRaw("ctxgraph.cms.0", []byte(`{"id":""}`))
	c.waitApplied()
	var list DLQList
	httpDo(t, d, "GET", "/v1/dlq?limit=2", nil, &list)
	if len(list.Entries) != 2 || list.Next == 0 {
		t.Fatalf("first page: %+v", list)
	}
	httpDo(t, d, "GET", "/v1/dlq?stream=CMS", nil, &list)
	if len(list.Entries) != 1 || list.Entries[0].Stream != StreamCMS {
		t.Fatalf("CMS dead letters: %+v", list)
	}
	if code := httpDo(t, d, "DELETE", fmt.Sprintf("/v1/dlq/%d", list.Entries[0].ID), nil, nil); code != 200 {
		t.Fatalf("drop: %d", code)
	}
	if code := httpDo(t, d, "DELETE", "/v1/dlq?stream=RLDS", nil, nil); code != 400 {
		t.Errorf("drop everything without all=true: %d, want 400", code)
	}
	var bulk DLQBulk
	if code := httpDo(t, d, "DELETE", "/v1/dlq?stream=RLDS&all=true", nil, &bulk); code != 200 || len(bulk.Done) != 3 {
		t.Fatalf("drop all: %d %+v", code, bulk)
	}
	httpDo(t, d, "GET", "/v1/dlq", nil, &list)
	if len(list.Entries) != 0 {
		t.Errorf("left after dropping: %+v", list)
	}
	if code := httpDo(t, d, "POST", "/v1/dlq/999/replay", nil, nil); code != 404 {
		t.Errorf("replay of a missing dead letter: %d", code)
	}
}

// graphIdentity is the stored graph by names, not ids (an edge created
// by a replay gets a new id): nodes, edges with their evidence, episodes
// with their step counts.
func graphIdentity(s *particle.Store) string {
	var lines []string
	s.Read(func(r particle.Reader) {
		name := func(id string) string {
			if n := r.Node(id); n != nil {
				return string(n.Type) + ":" + n.Name
			}
			return "?" + id
		}
		r.Nodes(func(n *particle.Node) bool {
			lines = append(lines, "N "+name(n.ID))
			return true
		})
		r.Edges(func(e *particle.Edge) bool {
			lines = append(lines, fmt.Sprintf("E %s -%s/%s-> %s x%d", name(e.Source), e.Type, e.Predicate(), name(e.Target), e.Evidence))
			return true
		})
		r.Episodes(func(e *particle.Episode) bool {
			lines = append(lines, fmt.Sprintf("P %s steps %d ended %v", e.ID, e.Steps, e.Ended))
			return true
		})
	})
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// answerNames is an answer by names and evidence, without ids or timings.
func answerNames(a *planner.Answer) string {
	var lines []string
	for _, n := range a.Nodes {
		lines = append(lines, fmt.Sprintf("N %s %s %.6f", n.Type, n.Name, n.Score))
	}
	for _, e := range a.Edges {
		lines = append(lines, fmt.Sprintf("E %s -%s-> %s x%d %.6f", e.SourceName, e.Predicate, e.TargetName, e.Evidence, e.Confidence))
	}
	return strings.Join(lines, "\n")
}

func backupTo(t *testing.T, d *Daemon) (string, *BackupManifest) {
	t.Helper()
	resp, err := http.Post("http://"+d.HTTPAddr()+"/v1/backup", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("backup: %s %s", resp.Status, b)
	}
	file := filepath.Join(t.TempDir(), "ctxgraph.backup")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m, err := VerifyBackup(file)
	if err != nil {
		t.Fatal(err)
	}
	return file, m
}

func checkDir(t *testing.T, cfg Config) {
	t.Helper()
	res, err := Check(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		b, _ := json.MarshalIndent(res, "", "  ")
		t.Errorf("check %s found problems:\n%s", cfg.Data, b)
	}
}

func TestBackupRestoresTheSameAnswersAndReplaysWhatCameAfter(t *testing.T) {
	dirA := t.TempDir()
	cfgA := testConfig(dirA)
	d := startDaemon(t, cfgA)
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.publishSpans("spans.jsonl")
	c.waitApplied()
	atBackup, answerAtBackup := graphIdentity(d.Store()), answerNames(c.ask(redBlockQuery))
	file, m := backupTo(t, d)
	if p := m.Positions[StreamRLDS]; p.Applied != 40 || p.LastSeq != 40 {
		t.Errorf("RLDS position = %+v, want applied through 40", p)
	}
	if p := m.Positions[StreamCMS]; p.Applied != 3 {
		t.Errorf("CMS position = %+v, want applied through 3", p)
	}

	// More arrives after the backup, and a second backup is taken while
	// it streams in: whatever that one holds, the replay completes it.
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, agent := range []string{"ur5-gamma", "ur5-kappa", "ur5-omega"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, js, err := client.Connect(d.NATSURL(), agent)
			if err != nil {
				t.Error(err)
				return
			}
			defer nc.Close()
			p := client.NewPublisher(js, "ctxgraph", 400)
			for _, msg := range (client.Synthetic{Agent: agent}).Episode(fmt.Sprintf("ep-%d", i), 40, t0) {
				if err := p.Publish(context.Background(), msg); err != nil {
					t.Error(err)
					return
				}
			}
			if err := p.Flush(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	midFile, mid := backupTo(t, d)
	wg.Wait()
	c.waitApplied()
	final := graphIdentity(d.Store())
	finalSteps := d.Store().Counts().Steps
	if finalSteps != 32+120 {
		t.Fatalf("steps = %d, want 152", finalSteps)
	}

	// Restored into a fresh directory: the store as it was at the backup.
	dirB := t.TempDir()
	if _, err := Restore(file, dirB, false, nil); err != nil {
		t.Fatal(err)
	}
	dB := startDaemon(t, testConfig(dirB))
	cB := connect(t, dB)
	if got := answerNames(cB.ask(redBlockQuery)); got != answerAtBackup {
		t.Errorf("restored daemon answers differently:\nwant %s\ngot  %s", answerAtBackup, got)
	}
	if got := graphIdentity(dB.Store()); got != atBackup {
		t.Error("restored graph differs from the graph at the backup")
	}
	dB.Shutdown(context.Background())
	checkDir(t, testConfig(dirB))

	// Restored into its own directory, whose log lives on: the mid-ingest
	// backup, then everything after its position re-consumed, each
	// message applied exactly once.
	d.Shutdown(context.Background())
	if _, err := Restore(midFile, dirA, false, nil); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("restore over a store without force: %v", err)
	}
	if _, err := Restore(midFile, dirA, true, nil); err != nil {
		t.Fatal(err)
	}
	if aside, _ := filepath.Glob(filepath.Join(dirA, "pre-restore-*", "graph")); len(aside) != 1 {
		t.Errorf("previous store not moved aside: %v", aside)
	}
	t.Logf("mid-ingest backup: RLDS applied through %d of %d", mid.Positions[StreamRLDS].Applied, mid.Positions[StreamRLDS].LastSeq)
	dA := startDaemon(t, cfgA)
	cA := connect(t, dA)
	cA.waitApplied()
	if got := graphIdentity(dA.Store()); got != final {
		t.Errorf("restored and replayed graph differs from the graph before the restore:\n%s", diffLines(final, got))
	}
	if got := dA.Store().Counts().Steps; got != finalSteps {
		t.Errorf("steps after restore and replay = %d, want %d", got, finalSteps)
	}
	for _, agent := range []string{"ur5-gamma", "ur5-kappa", "ur5-omega"} {
		assertUsesEvidence(t, dA.Store(), client.Synthetic{Agent: agent}, 40)
	}
	if _, err := os.Stat(filepath.Join(dirA, "restore.json")); !os.IsNotExist(err) {
		t.Errorf("restore marker left behind: %v", err)
	}
	dA.Shutdown(context.Background())
	checkDir(t, cfgA)

	// A restart keeps the consumer where it is: nothing is applied twice.
	dA2 := startDaemon(t, cfgA)
	connect(t, dA2).waitApplied()
	if got := graphIdentity(dA2.Store()); got != final {
		t.Errorf("graph changed on the restart after the restore:\n%s", diffLines(final, got))
	}
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	if len(out) > 40 {
		out = append(out[:40], fmt.Sprintf("… %d lines differ", len(out)))
	}
	return strings.Join(out, "\n")
}

func TestBackupFileDamageIsRefused(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.NATS.SyncAlways = true // power-cut durability of the log
	d := startDaemon(t, cfg)
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl")[:10])
	c.waitApplied()
	file, _ := backupTo(t, d)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"truncated":    raw[:len(raw)*2/3],
		"bit flipped":  func() []byte { b := slices.Clone(raw); b[len(b)/2] ^= 0x40; return b }(),
		"no trailer":   raw[:bytes.LastIndexByte(raw[:len(raw)-1], '\n')+1],
		"not a backup": []byte("hello\n"),
	} {
		f := filepath.Join(t.TempDir(), "bad.backup")
		os.WriteFile(f, bad, 0o644)
		dir := t.TempDir()
		if _, err := Restore(f, dir, false, nil); !errors.Is(err, errBadBackup) {
			t.Errorf("%s: restore error %v, want a refusal", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "graph")); !os.IsNotExist(err) {
			t.Errorf("%s: a store was created from a damaged backup", name)
		}
	}
}

func TestForgetRemovesAnEntityFromEveryLayer(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	d := startDaemon(t, cfg)
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.publishSpans("spans.jsonl")
	c.waitApplied()
	if code := httpDo(t, d, "POST", "/v1/sessions", session.Session{ID: "shift-1", ActiveEntities: []string{"red block", "blue bowl"}}, nil); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	red, err := d.Store().ResolveNode(particle.EntityID(particle.DefaultNamespace, particle.NodeEntity, "red block"))
	if err != nil {
		t.Fatal(err)
	}
	var touching []*particle.Edge
	d.Store().Read(func(r particle.Reader) {
		r.Out(red.ID, func(e *particle.Edge) bool { touching = append(touching, e); return true })
		r.In(red.ID, func(e *particle.Edge) bool { touching = append(touching, e); return true })
	})
	if len(touching) == 0 {
		t.Fatal("fixture: the red block has no edges")
	}
	if code := httpDo(t, d, "DELETE", "/v1/entities/"+red.ID, nil, nil); code != 400 {
		t.Errorf("forget without a reason: %d, want 400", code)
	}
	var f particle.Forgotten
	if code := httpDo(t, d, "DELETE", "/v1/entities/"+red.ID+"?why=data+subject+request", nil, &f); code != 200 {
		t.Fatalf("forget: %d", code)
	}
	if f.Who != "operator:test" || f.Why != "data subject request" || f.Edges != len(touching) || f.Steps == 0 || f.Spans == 0 || f.Sessions != 1 {
		t.Errorf("forgotten = %+v (edges touching %d)", f, len(touching))
	}
	if err := d.WaitIndexed(context.Background()); err != nil {
		t.Fatal(err)
	}

	gone := func(d *Daemon, forgotten int) {
		t.Helper()
		// The graph and the planner.
		if code := httpDo(t, d, "GET", "/v1/nodes/"+red.ID, nil, nil); code != 404 {
			t.Errorf("GET the forgotten node: %d", code)
		}
		a := connect(t, d).ask(planner.Request{Query: "red block", Entities: []string{"red block"}, Hops: 2, Budget: 500})
		for _, n := range a.Nodes {
			if n.ID == red.ID || n.Name == "red block" {
				t.Errorf("planner answer holds the forgotten node %+v", n)
			}
		}
		for _, e := range a.Edges {
			if e.SourceName == "red block" || e.TargetName == "red block" {
				t.Errorf("planner answer holds an edge of the forgotten node: %+v", e)
			}
		}
		// The vector index.
		for _, seq := range append([]uint64{red.Seq}, seqsOf(touching)...) {
			if hits := d.index.Search(make([]float32, 384), 1, &wave.Filter{Allow: func(id uint64) bool { return id == seq }}); len(hits) > 0 {
				t.Errorf("vector index still holds seq %d", seq)
			}
		}
		// Stored steps, spans, sessions.
		d.Store().Read(func(r particle.Reader) {
			r.Episodes(func(ep *particle.Episode) bool {
				if slices.Contains(ep.Nodes, red.ID) {
					t.Errorf("episode %s still lists the node", ep.ID)
				}
				d.Store().Steps(ep.Namespace, ep.ID, func(_ int, raw []byte) error {
					s, err := rlds.DecodeStep(raw)
					if err != nil {
						t.Fatal(err)
					}
					if an := s.Annotations; an != nil {
						b, _ := json.Marshal(an)
						if strings.Contains(strings.ToLower(string(b)), "red block") {
							t.Errorf("step %d of %s still names it: %s", s.Index, ep.ID, b)
						}
					}
					return nil
				})
				return true
			})
		})
		d.Store().Spans(particle.DefaultNamespace, func(raw []byte) error {
			var sp struct{ Entities []string }
			json.Unmarshal(raw, &sp)
			if slices.Contains(sp.Entities, "red block") {
				t.Errorf("span still names it: %s", raw)
			}
			return nil
		})
		var s session.Session
		httpDo(t, d, "GET", "/v1/sessions/shift-1", nil, &s)
		if slices.Contains(s.ActiveEntities, "red block") || (forgotten == 1) != slices.Contains(s.ActiveEntities, "blue bowl") {
			t.Errorf("session entities = %v", s.ActiveEntities)
		}
		var fs []particle.Forgotten
		httpDo(t, d, "GET", "/v1/forgotten", nil, &fs)
		if len(fs) != forgotten || fs[0].ID != red.ID || fs[0].NameSHA256 != particle.NameDigest("red block") || fs[0].Why != "data subject request" {
			t.Errorf("forgotten records = %+v", fs)
		}
	}
	gone(d, 1)

	// By name, over POST /v1/forget.
	var f2 particle.Forgotten
	if code := httpDo(t, d, "POST", "/v1/forget", ForgetRequest{Name: "Blue  Bowl", Who: "bob", Why: "retired"}, &f2); code != 200 || f2.Who != "bob" {
		t.Fatalf("forget by name: %d %+v", code, f2)
	}
	if code := httpDo(t, d, "POST", "/v1/forget", ForgetRequest{Name: "blue bowl", Why: "again"}, nil); code != 404 {
		t.Errorf("forget twice: %d, want 404", code)
	}

	// It stays gone after a restart, and the store checks clean.
	d.Shutdown(context.Background())
	checkDir(t, cfg)
	d2 := startDaemon(t, cfg)
	if err := d2.WaitIndexed(context.Background()); err != nil {
		t.Fatal(err)
	}
	gone(d2, 2)
}

func seqsOf(es []*particle.Edge) []uint64 {
	var out []uint64
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

func TestRetentionRemovesFadedEdgesOnlyWhenConfigured(t *testing.T) {
	cfg := testConfig(t.TempDir())
	d := startDaemon(t, cfg)
	c := connect(t, d)
	// The testdata episodes were recorded in January 2026: their edges'
	// salience has decayed since. The bot's episode is happening now.
	c.publishAll(readMessages(t, "episodes.jsonl"))
	bot := client.Synthetic{Agent: "ur5-now"}
	c.publishAll(bot.Episode("ep-now", 5, time.Now()))
	c.waitApplied()
	temporal := func(d *Daemon) (old, fresh int) {
		d.Store().Read(func(r particle.Reader) {
			r.Edges(func(e *particle.Edge) bool {
				if e.Type != particle.EdgeTemporal {
					return true
				}
				if time.Since(e.Salience.LastUpdated) > 24*time.Hour {
					old++
				} else {
					fresh++
				}
				return true
			})
		})
		return old, fresh
	}
	old, fresh := temporal(d)
	if old == 0 || fresh == 0 {
		t.Fatalf("fixture: %d old and %d fresh temporal edges", old, fresh)
	}

	// Off by default: a pass without rules removes nothing, even far on.
	if rep, err := d.RunRetention(context.Background(), time.Now().Add(10000*time.Hour)); err != nil || rep.Edges+rep.Nodes != 0 {
		t.Fatalf("retention without rules: %+v %v", rep, err)
	}
	d.Shutdown(context.Background())

	cfg.Retention.Enabled = true
	cfg.Retention.Rules = []particle.RetentionRule{{Kind: "edge", Type: "temporal", Below: 0.05, For: 24 * time.Hour}}
	d = startDaemon(t, cfg)
	edges := sumCounts(d.Store().Counts().Edges)
	rep, err := d.RunRetention(context.Background(), time.Now())
	if err != nil || rep.Edges != old || !rep.Archived {
		t.Fatalf("now: %+v %v, want the %d old temporal edges archived", rep, err, old)
	}
	if o, f := temporal(d); o != 0 || f != fresh {
		t.Errorf("after the pass: %d old and %d fresh temporal edges, want 0 and %d", o, f, fresh)
	}
	// Six hours' half-life: 0.2 → 0.05 in 12h, then 24h below.
	rep, err = d.RunRetention(context.Background(), time.Now().Add(37*time.Hour))
	if err != nil || rep.Edges != fresh {
		t.Fatalf("37h on: %+v %v, want the %d fresh temporal edges archived", rep, err, fresh)
	}
	if got := sumCounts(d.Store().Counts().Edges); got != edges-int64(old+fresh) {
		t.Errorf("edges = %d, want %d", got, edges-int64(old+fresh))
	}
	if _, err := d.Store().Record(particle.RecordArchiveEdge, ""); !errors.Is(err, particle.ErrNotFound) {
		t.Errorf("archive lookup: %v", err)
	}
	archived := 0
	d.Store().Records(particle.RecordArchiveEdge, func(string, []byte) error { archived++; return nil })
	if archived != old+fresh {
		t.Errorf("%d archived edges, want %d", archived, old+fresh)
	}
	d.Shutdown(context.Background())
	checkDir(t, cfg)

	bad := cfg
	bad.Retention.Rules = []particle.RetentionRule{{Kind: "node", Type: "episode", Below: 0.1}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "retention.rules[0]") {
		t.Errorf("a retention rule for episodes validated: %v", err)
	}
}

func TestCheckRefusesARunningStore(t *testing.T) {
	cfg := testConfig(t.TempDir())
	startDaemon(t, cfg)
	if _, err := Check(context.Background(), cfg, nil); !errors.Is(err, errInUse) {
		t.Errorf("check of a running daemon's store: %v, want errInUse", err)
	}
}

func TestGCAndRetentionRunOnTheirSchedules(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Storage.GCInterval = 20 * time.Millisecond
	cfg.Retention.Enabled, cfg.Retention.Interval = true, 20*time.Millisecond
	cfg.Retention.Rules = []particle.RetentionRule{{Kind: "edge", Type: "temporal", Below: 0.05, For: time.Hour}}
	d := startDaemon(t, cfg)
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl")) // recorded in January: long faded
	c.waitApplied()
	metric := func(name string) float64 {
		resp, err := http.Get("http://" + d.HTTPAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				var f float64
				fmt.Sscan(v, &f)
				return f
			}
		}
		return 0
	}
	eventually(t, "value-log gc passes", func() bool { return metric("ctxgraph_storage_gc_runs_total") >= 2 })
	eventually(t, "the retention pass", func() bool {
		return metric(`ctxgraph_retention_removed_total{kind="edge"}`) > 0
	})
	// A pass can run while the episodes are still being applied and
	// leave the edges applied after it to the next: the scheduled passes
	// must take every faded one in the end.
	temporal := func() int {
		left := 0
		d.Store().Read(func(r particle.Reader) {
			r.Edges(func(e *particle.Edge) bool {
				if e.Type == particle.EdgeTemporal {
					left++
				}
				return true
			})
		})
		return left
	}
	eventually(t, "every faded temporal edge removed by the scheduled passes", func() bool { return temporal() == 0 })
	if metric("ctxgraph_storage_ok") != 1 {
		t.Error("ctxgraph_storage_ok is not 1")
	}
}

// losingIndex is an index that accepts one vector and does not keep it:
// the loss checkVectors exists to find.
type losingIndex struct {
	wave.Index
	lost uint64
}

func (x *losingIndex) Add(id uint64, vec []float32, m wave.Meta) error {
	if x.lost == 0 || x.lost == id {
		x.lost = id
		return nil
	}
	return x.Index.Add(id, vec, m)
}

// TestCheckVectorsRebuildsTheConfiguredIndex: check rebuilds a vector
// index of each kind from the store, as a start without a snapshot
// does, and finds it whole; one that lost a vector is reported.
func TestCheckVectorsRebuildsTheConfiguredIndex(t *testing.T) {
	cfg, _ := stoppedWithEpisodes(t)
	s, err := particle.Open(particle.DefaultOptions(filepath.Join(cfg.Data, "graph")))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, _ := embeddings(s, cfg.Embed.Dimensions)
	if len(want) == 0 {
		t.Fatal("fixture: no embeddings stored")
	}
	for _, kind := range []string{"ivf", "hnsw", "flat"} {
		kc := cfg
		kc.Vectors.Index = kind
		dc := checkVectors(s, newVectorIndex(kc, cfg.Embed.Dimensions))
		if len(dc.Problems) != 0 || dc.Items != len(want) {
			t.Errorf("%s: %d items (want %d), problems %q", kind, dc.Items, len(want), dc.Problems)
		}
	}
	dc := checkVectors(s, &losingIndex{Index: newVectorIndex(cfg, cfg.Embed.Dimensions)})
	lost := fmt.Sprintf("index holds %d vectors, the store %d embeddings", len(want)-1, len(want))
	if !slices.Contains(dc.Problems, lost) {
		t.Errorf("a lost vector: problems %q, want %q", dc.Problems, lost)
	}
}

// stoppedWithEpisodes is the config of a daemon that took in the
// testdata episodes and stopped cleanly, and that daemon.
func stoppedWithEpisodes(t *testing.T) (Config, *Daemon) {
	t.Helper()
	cfg := testConfig(t.TempDir())
	d := startDaemon(t, cfg)
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	d.Shutdown(context.Background())
	return cfg, d
}

func TestCheckFindsAStaleVectorSnapshot(t *testing.T) {
	cfg, d := stoppedWithEpisodes(t)
	if _, err := os.Stat(d.vectorSnapshot()); err != nil {
		t.Skipf("no vector snapshot after a clean shutdown (index %q): %v", cfg.Vectors.Index, err)
	}
	checkDir(t, cfg)

	// Change the graph behind the stopped daemon's back, as a tool that
	// keeps the deletion markers does: the snapshot, stamped with the
	// graph's earlier generation, is caught up as the next start will.
	graph := filepath.Join(cfg.Data, "graph")
	o := particle.DefaultOptions(graph)
	o.KeepDeletionMarkers = true
	s, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(context.Background(), func(b *particle.Batch) error {
		return b.DeleteNode(particle.EntityID(particle.DefaultNamespace, particle.NodeEntity, "red block"))
	}); err != nil {
		t.Fatal(err)
	}
	now, err := s.Generation()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	snapshotChecks := func() (snap, splits *DerivedCheck, ok bool) {
		t.Helper()
		res, err := Check(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range res.Derived {
			switch res.Derived[i].Name {
			case "vector snapshot":
				snap = &res.Derived[i]
			case "vector splits snapshot":
				splits = &res.Derived[i]
			}
		}
		if snap == nil {
			t.Fatalf("no vector snapshot check: %+v", res.Derived)
		}
		return snap, splits, res.OK()
	}
	snap, splits, ok := snapshotChecks()
	if !ok || len(snap.Problems) != 0 || !strings.Contains(snap.Note, "caught up with the store") || splits != nil {
		t.Errorf("a snapshot the next start catches up: ok %v, %+v, splits %+v", ok, snap, splits)
	}

	// Stamped as if saved at the graph's generation, the same snapshot is
	// stale, and check says so.
	if err := writeGeneration(vectorStampBeside(d.vectorSnapshot()), now); err != nil {
		t.Fatal(err)
	}
	snap, splits, ok = snapshotChecks()
	if len(snap.Problems) == 0 || ok {
		t.Errorf("stale snapshot not reported: %+v", snap)
	}
	if splits == nil || len(splits.Problems) == 0 || splits.Items == 0 {
		t.Errorf("stale splits snapshot not reported: %+v", splits)
	}
}
