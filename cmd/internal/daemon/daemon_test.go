package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport/arrowexporttest"
)

func testdataDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata")
}

// testConfig is a daemon on random loopback ports in dir.
func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.Data = dir
	cfg.NATS.Addr = "127.0.0.1:0"
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Ingest.Backoff = 20 * time.Millisecond
	return cfg
}

func startDaemon(t *testing.T, cfg Config) *Daemon {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	d, err := Start(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	return d
}

// controller is a robot controller's view of the daemon: a real nats.go
// client over TCP.
type controller struct {
	t  *testing.T
	d  *Daemon
	nc *nats.Conn
	js jetstream.JetStream
}

func connect(t *testing.T, d *Daemon) *controller {
	t.Helper()
	nc, js, err := client.Connect(d.NATSURL(), "test-controller")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &controller{t: t, d: d, nc: nc, js: js}
}

func readMessages(t *testing.T, name string) []*rlds.Message {
	t.Helper()
	var out []*rlds.Message
	err := client.ReadJSONL(filepath.Join(testdataDir(), name), func(m *rlds.Message) error {
		out = append(out, m)
		return nil
	}, func(le *client.LineError) { t.Fatalf("testdata: %v", le) })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (c *controller) publishAll(msgs []*rlds.Message) *client.Publisher {
	c.t.Helper()
	return c.publishAs(msgs, false)
}

// publishAs publishes msgs as JSON, or as msgpack when asMsgpack is set.
func (c *controller) publishAs(msgs []*rlds.Message, asMsgpack bool) *client.Publisher {
	c.t.Helper()
	return c.publishGrouped(msgs, 1, asMsgpack)
}

// publishGrouped publishes msgs with up to n steps a message.
func (c *controller) publishGrouped(msgs []*rlds.Message, n int, asMsgpack bool) *client.Publisher {
	c.t.Helper()
	ctx := context.Background()
	p := client.NewPublisher(c.js, "ctxgraph", 0)
	p.Msgpack, p.StepsPerMessage = asMsgpack, n
	for _, m := range msgs {
		if err := p.Publish(ctx, m); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		c.t.Fatal(err)
	}
	return p
}

func (c *controller) publishRaw(subj string, body []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.js.Publish(ctx, subj, body); err != nil {
		c.t.Fatalf("publish %s: %v", subj, err)
	}
}

func (c *controller) publishSpans(name string) {
	c.t.Helper()
	c.publishSpansAs(name, false)
}

// publishSpansAs publishes the spans of testdata file name as they are
// (JSON), or written as msgpack when asMsgpack is set.
func (c *controller) publishSpansAs(name string, asMsgpack bool) {
	c.t.Helper()
	f, err := os.Open(filepath.Join(testdataDir(), name))
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s struct {
			Level int `json:"level"`
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			c.t.Fatal(err)
		}
		body := sc.Bytes()
		if asMsgpack {
			sp, err := cms.Decode(body, 0)
			if err != nil {
				c.t.Fatal(err)
			}
			body = sp.AppendMsgpack(nil)
		}
		c.publishRaw(fmt.Sprintf("ctxgraph.cms.%d", s.Level), body)
	}
}

// waitApplied waits until the in-process daemon has applied everything
// published and indexed its vectors.
func (c *controller) waitApplied() {
	c.t.Helper()
	c.waitConsumed()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.d.WaitIndexed(ctx); err != nil {
		c.t.Fatal(err)
	}
}

// waitConsumed waits until the daemon's consumers have applied
// everything published to the RLDS and CMS streams (what waitApplied
// asks of a daemon in another process).
func (c *controller) waitConsumed() {
	c.t.Helper()
	err := client.WaitApplied(context.Background(), c.js, 30*time.Second,
		map[string]string{StreamRLDS: DurableRLDS, StreamCMS: DurableCMS})
	if err != nil {
		c.t.Fatal(err)
	}
}

// ask sends a planner request over NATS and decodes the answer, failing
// the test on an error reply.
func (c *controller) ask(req planner.Request) *planner.Answer {
	c.t.Helper()
	var a planner.Answer
	if err := json.Unmarshal([]byte(c.askRaw(req)), &a); err != nil {
		c.t.Fatal(err)
	}
	return &a
}

// askErr sends raw bytes to the planner and returns the error reply.
func (c *controller) askErr(body []byte) (string, ErrorBody) {
	c.t.Helper()
	reply, err := c.nc.Request("ctxgraph.planner.context", body, 5*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	var eb ErrorBody
	if err := json.Unmarshal(reply.Data, &eb); err != nil {
		c.t.Fatalf("error reply is not JSON: %s", reply.Data)
	}
	return reply.Header.Get("Status"), eb
}

func findEdge(a *planner.Answer, src, pred, dst string) *planner.EdgeOut {
	for i := range a.Edges {
		e := &a.Edges[i]
		if e.SourceName == src && e.Predicate == pred && e.TargetName == dst {
			return e
		}
	}
	return nil
}

var redBlockQuery = planner.Request{
	Query: "where is the red block", Entities: []string{"red block"}, Hops: 2, K: 10, Budget: 200,
}

func TestStepsReachPlannerWithProvenanceAndSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	d, c := testdataDaemon(t, dir)

	a := c.ask(redBlockQuery)
	e := findEdge(a, "red block", "located_in", "blue bowl")
	if e == nil {
		t.Fatalf("edge red block -located_in-> blue bowl missing; edges: %v", edgeNames(a))
	}
	if len(e.Provenance) != 1 || e.Provenance[0].EpisodeID != "ep-alpha-0001" || e.Provenance[0].StepIndex == nil || *e.Provenance[0].StepIndex != 4 {
		t.Errorf("provenance = %+v, want episode ep-alpha-0001 step 4", e.Provenance)
	}
	if e.Confidence <= 0 || e.Confidence > 1 {
		t.Errorf("confidence %v outside (0,1]", e.Confidence)
	}
	if a.ContextState == nil || a.ContextState.Dim != 384 {
		t.Errorf("context state = %+v, want a 384-d vector", a.ContextState)
	}
	// CMS spans touched the red block: its node names the span ids.
	var red *planner.NodeOut
	for i := range a.Nodes {
		if a.Nodes[i].Name == "red block" {
			red = &a.Nodes[i]
		}
	}
	if red == nil || !slices.Contains(red.Spans, "span-0001") || !slices.Contains(red.Episodes, "ep-alpha-0001") {
		t.Errorf("red block node = %+v, want cms span span-0001 and episode ep-alpha-0001", red)
	}
	// Every sighting of the gripper in use reinforced one edge: six
	// steps in each of two episodes.
	var uses []*particle.Edge
	d.Store().Read(func(r particle.Reader) {
		agent := r.Lookup(particle.DefaultNamespace, particle.NodeAgent, "ur5-alpha")
		r.Out(agent.ID, func(e *particle.Edge) bool {
			if e.Type == particle.EdgeToolUse {
				uses = append(uses, e)
			}
			return true
		})
	})
	if len(uses) != 1 || uses[0].Evidence != 12 {
		t.Errorf("ur5-alpha uses edges = %d (evidence %v), want 1 with evidence 12", len(uses), uses)
	}
	st := d.Store().Counts()
	if st.Steps != 32 || st.Episodes != 4 || st.Spans != 3 {
		t.Errorf("counts = steps %d episodes %d spans %d, want 32, 4, 3", st.Steps, st.Episodes, st.Spans)
	}

	before := answerShape(a)
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	snap := particle.ViewSnapshotPath(filepath.Join(dir, "graph"))
	if _, err := os.Stat(snap); err != nil {
		t.Errorf("no view snapshot after a clean shutdown: %v", err)
	}
	d2 := startDaemon(t, testConfig(dir))
	if _, err := os.Stat(snap); !os.IsNotExist(err) || !d2.Store().LoadedFromSnapshot() {
		t.Errorf("view snapshot not loaded at start (from snapshot %v; the file: %v)", d2.Store().LoadedFromSnapshot(), err)
	}
	c2 := connect(t, d2)
	after := answerShape(c2.ask(redBlockQuery))
	if before != after {
		t.Errorf("answer after restart differs:\nbefore %s\nafter  %s", before, after)
	}
	if got := d2.Store().Counts(); got.Steps != st.Steps || sumCounts(got.Edges) != sumCounts(st.Edges) {
		t.Errorf("counts after restart %+v, want %+v", got, st)
	}
}

// answerShape is an answer without its timings: what must not change.
func answerShape(a *planner.Answer) string {
	var b strings.Builder
	for _, n := range a.Nodes {
		fmt.Fprintf(&b, "N %s %s %.6f|", n.ID, n.Name, n.Score)
	}
	for _, e := range a.Edges {
		fmt.Fprintf(&b, "E %s %s %d %.6f|", e.ID, e.Predicate, e.Evidence, e.Confidence)
	}
	return b.String()
}

func edgeNames(a *planner.Answer) []string {
	var out []string
	for _, e := range a.Edges {
		out = append(out, e.SourceName+" -"+e.Predicate+"-> "+e.TargetName)
	}
	return out
}

func sumCounts[K comparable](m map[K]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// graphState is everything about the stored graph that a duplicate must
// not change: every edge with its evidence and salience, every node.
func graphState(s *particle.Store) string {
	var lines []string
	s.Read(func(r particle.Reader) {
		r.Nodes(func(n *particle.Node) bool {
			lines = append(lines, fmt.Sprintf("N %s %s %.9f %d", n.ID, n.Name, n.Belief.Score, len(n.Attributes.RLDSEpisodeIDs)))
			return true
		})
		r.Edges(func(e *particle.Edge) bool {
			lines = append(lines, fmt.Sprintf("E %s %d %.9f %.9f %d", e.ID, e.Evidence, e.Salience.Score, e.Confidence, len(e.Provenance)))
			return true
		})
	})
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func TestPublishingTwiceChangesNothing(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	msgs := readMessages(t, "episodes.jsonl")
	c.publishAll(msgs)
	c.waitApplied()
	want, wantCounts := graphState(d.Store()), d.Store().Counts()

	// Inside the dedupe window, JetStream drops the repeats.
	p := c.publishAll(msgs)
	if p.Dups != int64(len(msgs)) {
		t.Errorf("JetStream reported %d duplicates, want %d", p.Dups, len(msgs))
	}
	// Without Nats-Msg-Id they reach the consumer, which must still
	// apply each message once.
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		c.publishRaw(m.Subject("ctxgraph"), b)
	}
	c.waitApplied()
	if got := graphState(d.Store()); got != want {
		t.Errorf("graph changed after publishing the same episodes again")
	}
	if got := d.Store().Counts(); got.Steps != wantCounts.Steps || got.Episodes != wantCounts.Episodes {
		t.Errorf("counts changed: %+v, want %+v", got, wantCounts)
	}
}

func TestDeniedRoleNeverReceivesEdge(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	req := planner.Request{Query: "fixture calibration offset of the hole", Entities: []string{"fixture", "hole"}, Hops: 2, Budget: 500}

	req.Roles = []string{"operator"}
	if findEdge(c.ask(req), "fixture", "calibration_offset", "hole") == nil {
		t.Fatal("operator should see the calibration edge")
	}
	req.Roles = []string{"visitor"}
	a := c.ask(req)
	if e := findEdge(a, "fixture", "calibration_offset", "hole"); e != nil {
		t.Fatalf("visitor received the denied edge %s", e.ID)
	}
	req.Roles = []string{"visitor", "operator"} // deny beats allow
	if findEdge(c.ask(req), "fixture", "calibration_offset", "hole") != nil {
		t.Fatal("a denied role must lose even beside an allowed one")
	}
	// Nor over HTTP by id.
	var id string
	d.Store().Read(func(r particle.Reader) {
		r.Edges(func(e *particle.Edge) bool {
			if e.Predicate() == "calibration_offset" {
				id = e.ID
			}
			return id == ""
		})
	})
	resp, err := http.Get("http://" + d.HTTPAddr() + "/v1/edges/" + id + "?role=visitor")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET denied edge as visitor: %s, want 404", resp.Status)
	}
}

// deadLetters reads every record on ctxgraph.dlq.<stream>.
func deadLetters(t *testing.T, c *controller, stream string) []DeadLetter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := c.js.OrderedConsumer(ctx, StreamDLQ, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"ctxgraph.dlq." + stream}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []DeadLetter
	n := int(info.NumPending)
	for i := 0; i < n; i++ {
		m, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var dl DeadLetter
		if err := json.Unmarshal(m.Data(), &dl); err != nil {
			t.Fatal(err)
		}
		out = append(out, dl)
	}
	return out
}

func TestBadInputIsDeadLetteredAndNothingIsLost(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Ingest.MaxMessageBytes = 64 << 10
	d := startDaemon(t, cfg)
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	want := graphState(d.Store())
	before := answerShape(c.ask(redBlockQuery))

	step := func(ep string, idx int, extra string) []byte {
		return []byte(fmt.Sprintf(`{"kind":"step","agent":"bad-bot","episode_id":%q,"step":{"index":%d,"timestamp":"2026-01-02T00:00:00Z"%s}}`, ep, idx, extra))
	}
	huge := strings.Repeat("x", 100<<10)
	bad := []struct {
		name, subject string
		body          []byte
		reason        string
	}{
		{"malformed JSON", "ctxgraph.rlds.bad-bot.e1", []byte(`{"kind":"step",`), "malformed"},
		{"wrong type", "ctxgraph.rlds.bad-bot.e2", step("e2", 0, `,"reward":"lots"`), "malformed"},
		{"tensor shape mismatch", "ctxgraph.rlds.bad-bot.e3", step("e3", 0, `,"observation":{"state":{"dtype":"float32","data":[1,2],"shape":[3]}}`), "shape"},
		{"unknown edge type", "ctxgraph.rlds.bad-bot.e4", step("e4", 0, `,"annotations":{"events":[{"subject":"a","predicate":"p","object":"b","edge_type":"teleports"}]}}`), "unknown edge_type"},
		{"unknown kind", "ctxgraph.rlds.bad-bot.e5", []byte(`{"kind":"frobnicate","agent":"bad-bot","episode_id":"e5","step":{"index":0}}`), "unknown kind"},
		{"oversized", "ctxgraph.rlds.bad-bot.e6", step("e6", 0, `,"language_instruction":"`+huge+`"`), "exceeds"},
		{"subject mismatch", "ctxgraph.rlds.other-bot.e7", step("e7", 0, ``), "does not match"},
		{"CMS wrong dimension", "ctxgraph.cms.0", []byte(`{"id":"s-bad","level":0,"embedding":[0.1,0.2,0.3]}`), "dimensions"},
		{"CMS negative update size", "ctxgraph.cms.0", []byte(`{"id":"s-bad2","level":0,"update_size":-1}`), "update_size"},
		// A tenant that would share a namespace with another scope
		// ("lab/a" + "x" is "lab" + "a/x").
		{"tenant with a slash", "ctxgraph.rlds.bad-bot.e9", []byte(`{"kind":"step","agent":"bad-bot","episode_id":"e9","tenant":"lab/a","project":"x","step":{"index":0}}`), "tenant"},
		{"CMS project with a NUL", "ctxgraph.cms.0", []byte(`{"id":"s-bad3","level":0,"project":"a\u0000b"}`), "project"},
	}
	for _, b := range bad {
		c.publishRaw(b.subject, b.body)
	}
	// A wrong-dimension step: the state vector changes size mid-episode.
	c.publishRaw("ctxgraph.rlds.bad-bot.e8", step("e8", 0, `,"observation":{"state":[1,2,3]}`))
	c.publishRaw("ctxgraph.rlds.bad-bot.e8", step("e8", 1, `,"observation":{"state":[1,2,3,4]}`))
	// A good episode after all of it still applies.
	good := []*rlds.Message{
		{Kind: rlds.KindEpisodeStart, Agent: "good-bot", EpisodeID: "g1", Start: &rlds.EpisodeStart{StartTime: time.Now(), LanguageInstruction: "stack the green cube"}},
		{Kind: rlds.KindStep, Agent: "good-bot", EpisodeID: "g1", Step: &rlds.Step{Index: 0, Annotations: &rlds.Annotations{Entities: []string{"green cube"}}}},
	}
	c.publishAll(good)
	c.waitApplied()

	rl := deadLetters(t, c, StreamRLDS)
	cl := deadLetters(t, c, StreamCMS)
	all := append(rl, cl...)
	for _, b := range bad {
		found := false
		for _, dl := range all {
			if dl.Subject == b.subject && strings.Contains(dl.Error, b.reason) && string(dl.Payload) == string(b.body) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no dead letter with reason %q; have %d records: %v", b.name, b.reason, len(all), reasons(all))
		}
	}
	shapeDL := false
	for _, dl := range rl {
		if dl.Subject == "ctxgraph.rlds.bad-bot.e8" && strings.Contains(dl.Error, "observation/state") {
			shapeDL = true
		}
	}
	if !shapeDL {
		t.Errorf("wrong-dimension step not dead-lettered: %v", reasons(rl))
	}
	if d.Store().Counts().Steps != 32+2 { // 32 testdata steps, e8 step 0, g1 step 0
		t.Errorf("steps = %d, want 34", d.Store().Counts().Steps)
	}
	// What was stored before is intact and the planner answers as before.
	if after := answerShape(c.ask(redBlockQuery)); after != before {
		t.Error("planner answer changed after bad input")
	}
	if ep, err := d.Store().Episode(particle.DefaultNamespace, "g1"); err != nil || ep.Steps != 1 {
		t.Errorf("good episode after bad input: %+v, %v", ep, err)
	}
	_ = want

	// Bad planner requests get a clear error reply.
	for _, tc := range []struct {
		body string
		want string
	}{
		{`{"query":`, "malformed JSON"},
		{`{"query":"x","k":"ten"}`, "malformed JSON"},
		{`{"vector":[0.1,0.2]}`, "dimensions"},
		{`{"query":"x","hops":99}`, "hops"},
		{`{"query":"x","bogus":1}`, "unknown field"},
		{`{}`, "give a query"},
	} {
		status, eb := c.askErr([]byte(tc.body))
		if status != "400" || eb.Error.Code != "invalid_request" || !strings.Contains(eb.Error.Message, tc.want) {
			t.Errorf("planner %s: status %q %+v, want 400 mentioning %q", tc.body, status, eb, tc.want)
		}
	}
	// Over the server's max payload the publisher itself is refused.
	if err := c.nc.Publish("ctxgraph.planner.context", make([]byte, 9<<20)); err == nil {
		t.Error("publishing over max_payload should fail at the client")
	}
	if _, err := c.nc.Request("ctxgraph.planner.context", []byte(`{"query":"red block"}`), 5*time.Second); err != nil {
		t.Errorf("daemon stopped serving after bad input: %v", err)
	}
}

func reasons(dls []DeadLetter) []string {
	var out []string
	for _, dl := range dls {
		out = append(out, dl.Subject+": "+dl.Error)
	}
	return out
}

// A caller never reads the id of an episode the policy hides from it:
// not in a planner answer's provenance or episode lists, not in GET
// /v1/edges/{id} or /v1/nodes/{id}; another caller still does (and
// the edge and node themselves stay visible to both).
func TestHiddenEpisodesAreNotNamed(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	var edge *particle.Edge
	var node *particle.Node
	var ep *particle.Episode
	// An assertion between entities observed in an episode, whose
	// subject lists that episode.
	d.Store().Read(func(r particle.Reader) {
		r.Edges(func(e *particle.Edge) bool {
			if e.Type != particle.EdgeAssertion || len(e.Provenance) == 0 || e.Provenance[0].EpisodeID == "" {
				return true
			}
			src, dst := r.Node(e.Source), r.Node(e.Target)
			cand := r.Episode(e.Namespace, e.Provenance[0].EpisodeID)
			if cand != nil && src != nil && dst != nil && src.Type == particle.NodeEntity && dst.Type != particle.NodeEpisode &&
				slices.Contains(src.Attributes.RLDSEpisodeIDs, cand.ID) {
				edge, node, ep = e, src, cand
			}
			return edge == nil
		})
	})
	if edge == nil {
		t.Fatal("no assertion between entities names a stored episode")
	}
	if _, err := d.Store().EditPolicy(context.Background(), particle.Edit{Op: particle.OpCreate, Who: "test", Why: "test",
		Rule: &particle.Rule{Effect: particle.EffectDeny, Roles: []string{"guest"}, Target: particle.Target{Node: ep.NodeID}}}); err != nil {
		t.Fatal(err)
	}
	names := func(role string) (inAnswer, inEdge, inNode, inExport bool) {
		a := c.ask(planner.Request{Query: node.Name, Entities: []string{node.Name}, Hops: 1, Budget: 500, Roles: []string{role}})
		for _, e := range a.Edges {
			for _, p := range e.Provenance {
				inAnswer = inAnswer || p.EpisodeID == ep.ID
			}
		}
		for _, n := range a.Nodes {
			inAnswer = inAnswer || slices.Contains(n.Episodes, ep.ID)
		}
		var e particle.Edge
		if err := getJSONURL("http://"+d.HTTPAddr()+"/v1/edges/"+edge.ID+"?role="+role, &e); err != nil {
			t.Fatalf("GET edge %s as %s: %v", edge.ID, role, err)
		}
		for _, p := range e.Provenance {
			inEdge = inEdge || p.EpisodeID == ep.ID
		}
		var n particle.Node
		if err := getJSONURL("http://"+d.HTTPAddr()+"/v1/nodes/"+node.ID+"?role="+role, &n); err != nil {
			t.Fatal(err)
		}
		// The Arrow export of the edges and nodes tables.
		f := arrowexport.FormatArrowStream
		_, recs := arrowexporttest.Read(t, f, getExport(t, d, exportQuery(arrowexport.TableEdges, f, "role", role)))
		for _, e := range arrowexporttest.Decode(t, recs, arrowexport.DecodeEdges) {
			for _, p := range e.Provenance {
				inExport = inExport || (e.ID == edge.ID && p.EpisodeID == ep.ID)
			}
		}
		_, recs = arrowexporttest.Read(t, f, getExport(t, d, exportQuery(arrowexport.TableNodes, f, "role", role)))
		for _, n := range arrowexporttest.Decode(t, recs, arrowexport.DecodeNodes) {
			inExport = inExport || (n.ID == node.ID && slices.Contains(n.Attributes.RLDSEpisodeIDs, ep.ID))
		}
		return inAnswer, inEdge, slices.Contains(n.Attributes.RLDSEpisodeIDs, ep.ID), inExport
	}
	if a, e, n, x := names("operator"); !a || !e || !n || !x {
		t.Errorf("an operator reads episode %s in the answer %v, the edge %v, the node %v, the export %v; want all", ep.ID, a, e, n, x)
	}
	if a, e, n, x := names("guest"); a || e || n || x {
		t.Errorf("a guest reads the hidden episode %s in the answer %v, the edge %v, the node %v, the export %v", ep.ID, a, e, n, x)
	}
}

// TestStartFailureIsAnError starts a second daemon on a data directory a
// running one holds, and one on a NATS address another daemon listens
// on: each start fails at once with an error naming the cause, and
// leaves the running daemon serving. (The first hung: the keyword
// index waited for ever on the running daemon's lock; and a failed start
// panicked, shutting down the nil it was about to return.)
func TestStartFailureIsAnError(t *testing.T) {
	first := startDaemon(t, testConfig(t.TempDir()))
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"data directory in use": {testConfig(first.cfg.Data), "is in use by another process"},
		"nats address in use": {func() Config {
			c := testConfig(t.TempDir())
			c.NATS.Addr = strings.TrimPrefix(first.NATSURL(), "nats://")
			return c
		}(), "address already in use"},
	} {
		d, err := Start(context.Background(), c.cfg, nil)
		if err == nil {
			d.Shutdown(context.Background())
			t.Fatalf("%s: a second daemon started", name)
		}
		if d != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: start returned %v, %q; want nil and an error saying %q", name, d, err, c.want)
		}
	}
	c := connect(t, first)
	if _, err := c.nc.Request(first.cfg.Prefix()+".planner.context", []byte(`{"query":"cup","k":3}`), 5*time.Second); err != nil {
		t.Fatalf("the running daemon stopped answering: %v", err)
	}
}
