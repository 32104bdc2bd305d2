package daemon

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraph/ctxgraph/cmd/internal/hugepage"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/session"
)

func TestDefaultConfigFileIsTheBuiltInDefault(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join(testdataDir(), "..", "configs", "ctxgraph.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := DefaultConfig(); !reflect.DeepEqual(cfg, want) {
		t.Errorf("configs/ctxgraph.yaml differs from DefaultConfig:\nfile    %+v\ndefault %+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("default config invalid: %v", err)
	}
	bad := DefaultConfig()
	bad.Ingest.BatchSize = 0
	bad.Salience.Decay = "sideways"
	bad.HTTP.Addr = "nowhere"
	err = bad.Validate()
	for _, want := range []string{"batch_size", "sideways", "http.addr"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate should report %q, got %v", want, err)
		}
	}
}

func TestSessionsOverHTTPAndNATSWithPush(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()

	// Subscribed before the session exists: every change is pushed, in
	// order (the daemon publishes them on one connection), the creation
	// first.
	pushes := make(chan *nats.Msg, 16)
	sub, err := c.nc.ChanSubscribe("ctxgraph.session.kitchen-shift.context", pushes)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c.nc.Flush()
	nextPush := func() session.Session {
		t.Helper()
		select {
		case m := <-pushes:
			var pushed session.Session
			if err := json.Unmarshal(m.Data, &pushed); err != nil {
				t.Fatalf("pushed session: %v", err)
			}
			return pushed
		case <-time.After(5 * time.Second):
			t.Fatal("no push on ctxgraph.session.kitchen-shift.context")
		}
		return session.Session{}
	}

	var s session.Session
	if code := httpDo(t, d, "POST", "/v1/sessions", session.Session{ID: "kitchen-shift", Agent: "ur5-alpha", Goals: []string{"pick up the red block and put it in the blue bowl"}}, &s); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	if len(s.ContextStateVector) != 384 || s.StateUpdates != 0 {
		t.Fatalf("new session state: %d-d, %d updates", len(s.ContextStateVector), s.StateUpdates)
	}
	if code := httpDo(t, d, "POST", "/v1/sessions", session.Session{ID: "kitchen-shift"}, nil); code != 400 {
		t.Errorf("duplicate session: %d, want 400", code)
	}

	// A planner request in the session uses its goals and moves its state.
	a := c.ask(planner.Request{SessionID: "kitchen-shift", Tools: []string{"parallel gripper"}})
	if len(a.Unknowns) != 0 || a.ContextState == nil || math.Abs(a.ContextState.Norm-1) > 1e-3 {
		t.Fatalf("session answer: unknowns %v state %+v", a.Unknowns, a.ContextState)
	}
	if p := nextPush(); p.ID != "kitchen-shift" || p.StateUpdates != 0 {
		t.Errorf("creation push: %q, %d updates", p.ID, p.StateUpdates)
	}
	if p := nextPush(); p.StateUpdates != 1 {
		t.Errorf("push after the planner request: %d updates, want 1", p.StateUpdates)
	}

	// Update over NATS, read back over HTTP.
	body, _ := json.Marshal(map[string]any{"patch": map[string]any{"tools": []string{"suction cup"}, "active_entities": []string{"peg"}}})
	reply, err := c.nc.Request("ctxgraph.session.kitchen-shift.update", body, 5*time.Second)
	if err != nil || reply.Header.Get("Status") != "" {
		t.Fatalf("update over NATS: %v %s", err, reply.Data)
	}
	var got session.Session
	httpDo(t, d, "GET", "/v1/sessions/kitchen-shift", nil, &got)
	if !reflect.DeepEqual(got.Tools, []string{"suction cup"}) || !reflect.DeepEqual(got.ActiveEntities, []string{"peg"}) || got.StateUpdates != 1 {
		t.Errorf("session after update = %+v", got)
	}
	// Bad updates are refused with a reason, over both transports.
	if code := httpDo(t, d, "PATCH", "/v1/sessions/kitchen-shift", map[string]any{"vector": []float32{1, 2}}, nil); code != 400 {
		t.Errorf("wrong-dimension vector: %d, want 400", code)
	}
	reply, _ = c.nc.Request("ctxgraph.session.nope.get", nil, 5*time.Second)
	if reply.Header.Get("Status") != "404" {
		t.Errorf("unknown session over NATS: status %q", reply.Header.Get("Status"))
	}
	// A tenant or project that cannot name a namespace (here one that
	// would share "lab/a/x" with tenant "lab", project "a/x") is a bad
	// request on every route that takes one.
	reply, _ = c.nc.Request("ctxgraph.session.kitchen-shift.get", []byte(`{"tenant":"lab/a","project":"x"}`), 5*time.Second)
	if reply.Header.Get("Status") != "400" || !strings.Contains(string(reply.Data), "tenant") {
		t.Errorf("session read with tenant lab/a over NATS: status %q %s", reply.Header.Get("Status"), reply.Data)
	}
	for _, path := range []string{"/v1/sessions?tenant=lab/a", "/v1/sessions/kitchen-shift?project=a%00b", "/v1/export?table=edges&tenant=a+b"} {
		if code := httpDo(t, d, "GET", path, nil, nil); code != 400 {
			t.Errorf("GET %s: %d, want 400", path, code)
		}
	}
	if code := httpDo(t, d, "POST", "/v1/context", planner.Request{Query: "red block", Tenant: "lab", Project: "a/x"}, nil); code != 400 {
		t.Errorf("planner request with project a/x: %d, want 400", code)
	}
	// Sessions persist across a restart.
	dir := d.cfg.Data
	d.Shutdown(context.Background())
	d2 := startDaemon(t, testConfig(dir))
	var after session.Session
	if code := httpDo(t, d2, "GET", "/v1/sessions/kitchen-shift", nil, &after); code != 200 || !reflect.DeepEqual(after.ContextStateVector, got.ContextStateVector) {
		t.Errorf("session after restart: %d", code)
	}
}

func TestHealthReadyStatsAndMetrics(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	c.ask(redBlockQuery) // over NATS
	if code := httpDo(t, d, "POST", "/v1/context", planner.Request{Query: "red block"}, nil); code != 200 {
		t.Fatalf("POST /v1/context: %d", code)
	}
	// Seeded by the vector index (the default IVF), whose work per
	// prefilter the metrics count.
	if code := httpDo(t, d, "POST", "/v1/context", planner.Request{Query: "red block", Strategy: planner.StrategySemantic}, nil); code != 200 {
		t.Fatalf("POST /v1/context: %d", code)
	}
	// The NATS reply's encoding and hand-off were timed; the HTTP
	// answer's encoding counts in the stage, not as a NATS reply. The
	// responder records its times once the reply is handed off, which
	// can be after the client has it: wait for the record.
	rt := d.ReplyTimes()
	for deadline := time.Now().Add(10 * time.Second); rt.Replies == 0 && time.Now().Before(deadline); rt = d.ReplyTimes() {
		time.Sleep(time.Millisecond)
	}
	if rt.Replies != 1 || rt.Encode <= 0 || rt.Respond <= 0 {
		t.Errorf("reply times = %+v, want one reply with both stages timed", rt)
	}

	for _, p := range []string{"/healthz", "/readyz"} {
		if code := httpDo(t, d, "GET", p, nil, nil); code != 200 {
			t.Errorf("%s: %d", p, code)
		}
	}
	var st Stats
	httpDo(t, d, "GET", "/v1/stats", nil, &st)
	if st.Counts.Steps != 32 || st.Counts.Episodes != 4 || st.Ingest[StreamRLDS].Applied != 40 || st.Vectors == 0 {
		t.Errorf("stats = %+v", st)
	}
	resp, err := http.Get("http://" + d.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ctxgraph_ingest_messages_total{result="applied",stream="RLDS"} 40`,
		`ctxgraph_planner_stage_seconds_bucket{stage="prefilter"`,
		`ctxgraph_planner_stage_seconds_count{stage="total"} 3`,
		`ctxgraph_planner_stage_seconds_count{stage="encode"} 3`,
		`ctxgraph_planner_stage_seconds_count{stage="reply"} 1`,
		`ctxgraph_store_steps 32`,
		`ctxgraph_ingest_lag_messages 0`,
		"ctxgraph_store_view_from_snapshot 0\n", // a fresh store
		`ctxgraph_start_seconds `,
		`ctxgraph_ingest_batch_seconds_count{stream="RLDS"}`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The start's phases are each reported, and the view's load took time.
	for _, p := range (StartTimes{}).Phases() {
		prefix := `ctxgraph_start_phase_seconds{phase="` + p.Name + `"} `
		var v float64 = -1
		for _, line := range strings.Split(string(raw), "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				v, _ = strconv.ParseFloat(rest, 64)
			}
		}
		if v < 0 || p.Name == "view" && v == 0 {
			t.Errorf("/metrics: start phase %s = %v", p.Name, v)
		}
	}
	// The semantic request's prefilter (and the others', if their
	// strategy searched the index) scanned lists, scored items and
	// rescored some.
	for _, h := range []string{"ctxgraph_planner_prefilter_lists", "ctxgraph_planner_prefilter_scored", "ctxgraph_planner_prefilter_rescored"} {
		var n, sum float64
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, h+"_count "); ok {
				n, _ = strconv.ParseFloat(v, 64)
			}
			if v, ok := strings.CutPrefix(line, h+"_sum "); ok {
				sum, _ = strconv.ParseFloat(v, 64)
			}
		}
		if n < 1 || sum < n {
			t.Errorf("/metrics: %s count %v, sum %v; want at least one prefilter, each with work", h, n, sum)
		}
	}
	// Counters that must have counted: the bytes written, by table (the
	// 32 steps' and the graph's), and the writer's time, by stage.
	for _, c := range []struct {
		name, label string
		values      []string
	}{
		{"ctxgraph_store_written_bytes_total", "table", []string{"steps", "edges", "nodes", "episodes"}},
		{"ctxgraph_store_update_seconds_total", "stage", []string{"apply", "encode", "commit", "publish"}},
	} {
		for _, v := range c.values {
			m := regexp.MustCompile(c.name + `\{` + c.label + `="` + v + `"\} (\S+)`).FindStringSubmatch(string(raw))
			if len(m) != 2 {
				t.Errorf("/metrics lacks %s{%s=%q}", c.name, c.label, v)
				continue
			}
			if n, err := strconv.ParseFloat(m[1], 64); err != nil || n <= 0 {
				t.Errorf("/metrics: %s{%s=%q} is %q", c.name, c.label, v, m[1])
			}
		}
	}
	if m := regexp.MustCompile(`(?m)^ctxgraph_store_updates_total (\S+)$`).FindStringSubmatch(string(raw)); len(m) != 2 || m[1] == "0" {
		t.Errorf("/metrics: committed batches %q", m)
	}
	if m := regexp.MustCompile(`(?m)^ctxgraph_store_written_keys_total (\S+)$`).FindStringSubmatch(string(raw)); len(m) != 2 || m[1] == "0" {
		t.Errorf("/metrics: keys written %q", m)
	}
	if m := regexp.MustCompile(`(?m)^ctxgraph_vector_index_bytes (\S+)$`).FindStringSubmatch(string(raw)); len(m) != 2 || m[1] == "0" {
		t.Errorf("/metrics: vector index bytes %q", m)
	}
	// The index's lists: at least one, and the list an item lies in no
	// shorter than one entry nor longer than the longest.
	lists := map[string]float64{}
	for _, name := range []string{"ctxgraph_vector_index_lists", "ctxgraph_vector_index_list_length_seen", "ctxgraph_vector_index_list_length_max"} {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(string(raw))
		if len(m) != 2 {
			t.Errorf("/metrics lacks %s", name)
			continue
		}
		lists[name], _ = strconv.ParseFloat(m[1], 64)
	}
	if seen := lists["ctxgraph_vector_index_list_length_seen"]; lists["ctxgraph_vector_index_lists"] < 1 || seen < 1 || seen > lists["ctxgraph_vector_index_list_length_max"] {
		t.Errorf("/metrics: the vector index's lists %v", lists)
	}
	// The planner calls above scored edges by their codes, whose chunk
	// is mapped outside the heap.
	if m := regexp.MustCompile(`(?m)^ctxgraph_store_edge_codes_mapped_bytes (\S+)$`).FindStringSubmatch(string(raw)); len(m) != 2 || m[1] == "0" {
		t.Errorf("/metrics: edge codes mapped %q", m)
	}
	for _, split := range []string{"agent", "time"} {
		if m := regexp.MustCompile(`ctxgraph_vector_index_split_ready\{split="` + split + `"\} ([01])\n`).FindStringSubmatch(string(raw)); len(m) != 2 {
			t.Errorf("/metrics lacks the split by %s's readiness", split)
		}
	}
}

func TestOpenAICompatibleEmbedderFromConfig(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		calls.Add(1)
		writeFakeEmbeddings(w, req.Input, 8)
	}))
	defer srv.Close()
	t.Setenv("CTXGRAPH_TEST_KEY", "sk-test")
	cfg := testConfig(t.TempDir())
	cfg.Embed.Provider, cfg.Embed.Dimensions, cfg.Embed.BaseURL = "openai", 8, srv.URL
	cfg.Embed.Model, cfg.Embed.APIKeyEnv = "test-embed", "CTXGRAPH_TEST_KEY"
	d := startDaemon(t, cfg)
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl")[:10])
	c.waitApplied()
	a := c.ask(planner.Request{Query: "red block", Budget: 20})
	if calls.Load() == 0 || len(a.Nodes) == 0 || a.ContextState.Dim != 8 {
		t.Errorf("provider calls %d, nodes %d, state dim %d", calls.Load(), len(a.Nodes), a.ContextState.Dim)
	}
}

// writeFakeEmbeddings answers an OpenAI-style embeddings request with a
// deterministic vector of dims per input (the fake providers of tests).
func writeFakeEmbeddings(w http.ResponseWriter, inputs []string, dims int) {
	type item struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	var out struct {
		Data []item `json:"data"`
	}
	for i, s := range inputs {
		v := make([]float32, dims)
		for j, r := range s {
			v[(j+int(r))%dims] += float32(r%7) + 1
		}
		out.Data = append(out.Data, item{Index: i, Embedding: v})
	}
	json.NewEncoder(w).Encode(out)
}

// TestHugePagesKeeperRuns starts daemons at the defaults
// (memory.huge_pages on, memory.collapse_idle off), with collapse_idle
// on, and with huge_pages off but collapse_idle on: each serves as
// usual, and only the second runs a keeper, where the host's THP mode is
// madvise, whose collapsed heap /metrics counts (off Linux, or on a
// kernel that cannot, the keeper only warns). In mode "always" or
// "never" no keeper runs.
func TestHugePagesKeeperRuns(t *testing.T) {
	for _, c := range []struct{ huge, collapse bool }{{true, false}, {true, true}, {false, true}} {
		cfg := testConfig(t.TempDir())
		if !cfg.Memory.HugePages || cfg.Memory.CollapseIdle {
			t.Fatalf("defaults: memory.huge_pages %v, memory.collapse_idle %v; want on, off", cfg.Memory.HugePages, cfg.Memory.CollapseIdle)
		}
		cfg.Memory.HugePages, cfg.Memory.CollapseIdle = c.huge, c.collapse
		keeper := c.huge && c.collapse && hugepage.Mode() == "madvise"
		if got := servesWithKeeper(t, cfg); got != keeper {
			t.Errorf("memory.huge_pages %v, collapse_idle %v, THP mode %q: keeper metric %v, want %v", c.huge, c.collapse, hugepage.Mode(), got, keeper)
		}
	}
}

// TestHugePagesWaitForAnIdleDaemon checks the keeper's gate: the daemon
// is idle only when no ingest batch was applied and no planner call
// began within the given spans, so that no collapse runs under a
// request (a collapse stalls what touches the memory it moves).
func TestHugePagesWaitForAnIdleDaemon(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	if !d.idle(0, 0)() {
		t.Error("not idle when asking no quiet at all")
	}
	// A gate starts counting ingest's quiet when it is made.
	if d.idle(time.Hour, 0)() {
		t.Error("idle at once when asking an hour of quiet ingest")
	}
	time.Sleep(100 * time.Millisecond)
	before := d.Planner().Idle()
	if !d.idle(0, before/2)() {
		t.Errorf("not idle for %v with no planner call for %v", before/2, before)
	}
	if a := c.ask(redBlockQuery); len(a.Edges) == 0 {
		t.Fatal("no answer")
	}
	if after := d.Planner().Idle(); after >= before {
		t.Errorf("planner idle for %v after a call, %v before it: the call did not count", after, before)
	}
	if d.idle(0, before)() {
		t.Errorf("idle for %v right after a planner call", before)
	}
	// A call another planner makes over the graph counts when noted
	// (the bench's recall pass and exact baseline note theirs).
	time.Sleep(100 * time.Millisecond)
	quiet := d.Planner().Idle()
	d.Planner().NoteCall()
	if noted := d.Planner().Idle(); noted >= quiet || d.idle(0, quiet)() {
		t.Errorf("planner idle for %v after a noted call, %v before it", noted, quiet)
	}
}

// servesWithKeeper starts a daemon with cfg, checks it answers, and
// reports whether /metrics has the huge-page keeper's series.
func servesWithKeeper(t *testing.T, cfg Config) bool {
	t.Helper()
	d := startDaemon(t, cfg)
	defer d.Shutdown(context.Background())
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	if a := c.ask(redBlockQuery); len(a.Edges) == 0 {
		t.Error("no answer with the keeper running")
	}
	resp, err := http.Get("http://" + d.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return strings.Contains(string(raw), "ctxgraph_heap_huge_pages_mib ")
}
