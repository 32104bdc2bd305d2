package daemon

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/rlds"
)

func httpDo(t *testing.T, d *Daemon, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+d.HTTPAddr()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Ctxgraph-User", "operator:test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

// factEpisode is one episode whose steps assert subject -pred-> objects[i]
// at t0 + i hours.
func factEpisode(id string, t0 time.Time, subject, pred string, objects ...string) []*rlds.Message {
	msgs := []*rlds.Message{{Kind: rlds.KindEpisodeStart, Agent: "ur5-alpha", EpisodeID: id, Start: &rlds.EpisodeStart{StartTime: t0}}}
	for i, o := range objects {
		conf := 0.9 - 0.1*float64(i)
		msgs = append(msgs, &rlds.Message{Kind: rlds.KindStep, Agent: "ur5-alpha", EpisodeID: id, Step: &rlds.Step{
			Index: i, Timestamp: t0.Add(time.Duration(i) * time.Hour),
			Annotations: &rlds.Annotations{Events: []rlds.Event{{Subject: subject, Predicate: pred, Object: o, Confidence: &conf}}},
		}})
	}
	return msgs
}

func TestFactsAsOfDiffAndContradictions(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	for _, p := range []particle.Predicate{
		{Name: "holds", Scope: particle.DefaultNamespace, Cardinality: particle.Single, Status: particle.PredicateActive},
		{Name: "color", Scope: particle.DefaultNamespace, Cardinality: particle.Single, Status: particle.PredicatePending},
	} {
		if code := httpDo(t, d, "PUT", "/v1/predicates", PredicateEdit{Predicate: p, Why: "lab ontology"}, nil); code != 200 {
			t.Fatalf("PUT predicate %s: %d", p.Name, code)
		}
	}
	t0 := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	c.publishAll(factEpisode("ep-holds", t0, "gripper", "holds", "red block", "blue bowl", "sponge"))
	c.publishAll(factEpisode("ep-color", t0, "cube", "color", "red", "green"))
	c.waitApplied()

	holds := func(a *planner.Answer) []string {
		var out []string
		for _, e := range a.Edges {
			if e.Predicate == "holds" {
				out = append(out, e.TargetName)
			}
		}
		return out
	}
	req := planner.Request{Query: "what does the gripper hold", Entities: []string{"gripper"}, Budget: 100}
	if got := holds(c.ask(req)); len(got) != 1 || got[0] != "sponge" {
		t.Errorf("now: gripper holds %v, want [sponge]", got)
	}
	for i, want := range []string{"red block", "blue bowl", "sponge"} {
		at := t0.Add(time.Duration(i)*time.Hour + 30*time.Minute)
		req.AsOf = &at
		if got := holds(c.ask(req)); len(got) != 1 || got[0] != want {
			t.Errorf("as of %s: gripper holds %v, want [%s]", at.Format(time.Kitchen), got, want)
		}
	}
	before := t0.Add(-time.Minute)
	req.AsOf = &before
	if got := holds(c.ask(req)); len(got) != 0 {
		t.Errorf("before any fact: %v", got)
	}

	var diff particle.Diff
	if code := httpDo(t, d, "POST", "/v1/diff", DiffRequest{Subject: "Gripper", From: t0.Add(-time.Hour), To: t0.Add(5 * time.Hour)}, &diff); code != 200 {
		t.Fatalf("diff: %d", code)
	}
	count := func(l []*particle.Edge) (n int) {
		for _, e := range l {
			if e.Predicate() == "holds" {
				n++
			}
		}
		return n
	}
	if count(diff.Added) != 3 || count(diff.Ended) != 2 || count(diff.Superseded) != 2 {
		t.Errorf("diff holds: added %d ended %d superseded %d, want 3, 2, 2", count(diff.Added), count(diff.Ended), count(diff.Superseded))
	}
	var narrow particle.Diff
	httpDo(t, d, "POST", "/v1/diff", DiffRequest{Subject: "gripper", From: t0.Add(30 * time.Minute), To: t0.Add(90 * time.Minute)}, &narrow)
	if count(narrow.Added) != 1 || count(narrow.Superseded) != 1 {
		t.Errorf("diff over the first change: added %d superseded %d, want 1 and 1", count(narrow.Added), count(narrow.Superseded))
	}

	a := c.ask(planner.Request{Query: "cube color", Entities: []string{"cube"}, Budget: 100})
	if len(a.Contradictions) != 1 || a.Contradictions[0].Predicate != "color" {
		t.Fatalf("contradictions = %+v, want the cube's two colors", a.Contradictions)
	}
	if ct := a.Contradictions[0]; ct.ConfidenceA == ct.ConfidenceB {
		t.Errorf("contradiction should carry each fact's confidence: %+v", ct)
	}
}

func TestIntrospectionCountsOnlyWhatTheCallerMaySee(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()

	var op, vis Introspection
	httpDo(t, d, "GET", "/v1/introspect?role=operator", nil, &op)
	httpDo(t, d, "GET", "/v1/introspect?role=visitor", nil, &vis)
	if op.EdgeTypes[particle.EdgeAssertion]-vis.EdgeTypes[particle.EdgeAssertion] != 1 {
		t.Errorf("assertion counts operator %d visitor %d, want the one denied edge apart", op.EdgeTypes[particle.EdgeAssertion], vis.EdgeTypes[particle.EdgeAssertion])
	}
	if op.Episodes != 4 || len(op.Agents) != 2 || len(op.Predicates) == 0 {
		t.Errorf("overview = %+v", op.Overview)
	}

	var opT, visT particle.Topic
	if code := httpDo(t, d, "GET", "/v1/introspect/fixture?role=operator", nil, &opT); code != 200 {
		t.Fatalf("topic: %d", code)
	}
	httpDo(t, d, "GET", "/v1/introspect/FIXTURE?role=visitor", nil, &visT)
	if opT.Relationships["assertion:calibration_offset"] != 1 {
		t.Errorf("operator topic relationships = %v", opT.Relationships)
	}
	if _, ok := visT.Relationships["assertion:calibration_offset"]; ok {
		t.Errorf("visitor sees the denied relationship: %v", visT.Relationships)
	}
	for _, q := range visT.SuggestedQueries {
		if strings.Contains(q, "calibration") {
			t.Errorf("visitor's suggested query leaks the denied predicate: %q", q)
		}
	}
	if opT.Neighbors != visT.Neighbors+1 {
		t.Errorf("neighbor counts should differ: operator %d visitor %d", opT.Neighbors, visT.Neighbors)
	}
	if code := httpDo(t, d, "GET", "/v1/introspect/no-such-thing", nil, nil); code != 404 {
		t.Errorf("unknown topic: %d, want 404", code)
	}
}

func TestMergeOverHTTPRedirects(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	var rec particle.Merge
	if code := httpDo(t, d, "POST", "/v1/entities/merge", MergeRequest{Survivor: "table", Merged: "coffee mug", Why: "test"}, &rec); code != 200 {
		t.Fatalf("merge: %d", code)
	}
	if rec.Who != "operator:test" || len(rec.Edges) == 0 {
		t.Errorf("merge record = %+v", rec)
	}
	var n particle.Node
	if code := httpDo(t, d, "GET", "/v1/nodes/"+rec.Merged, nil, &n); code != 200 || n.ID != rec.Survivor {
		t.Errorf("GET merged id: %d %s, want the survivor %s", code, n.ID, rec.Survivor)
	}
	var alias particle.Node
	if code := httpDo(t, d, "POST", "/v1/entities/"+rec.Survivor+"/aliases", map[string]string{"alias": "workbench"}, &alias); code != 200 {
		t.Fatalf("alias: %d", code)
	}
	a := c.ask(planner.Request{Query: "workbench", Entities: []string{"workbench", "coffee mug"}, Budget: 50})
	if len(a.Unknowns) != 0 {
		t.Errorf("alias and merged name should resolve: unknowns %v", a.Unknowns)
	}
}
