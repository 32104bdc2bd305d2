package planner

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// keylessIndex is a Flat index that drops the agent, site and
// confidence keys of every Meta and Filter: a prefilter over it is left
// to Allow alone.
type keylessIndex struct{ *wave.Flat }

func stripKeys(m wave.Meta) wave.Meta {
	m.Agent, m.Site, m.Confidence = 0, 0, 0
	return m
}

func (x keylessIndex) Add(id uint64, v []float32, m wave.Meta) error {
	return x.Flat.Add(id, v, stripKeys(m))
}

func (x keylessIndex) SetMeta(id uint64, m wave.Meta) bool { return x.Flat.SetMeta(id, stripKeys(m)) }

func (x keylessIndex) Search(q []float32, k int, f *wave.Filter) []wave.Hit {
	if f != nil {
		g := *f
		g.Agent, g.Site, g.MinConfidence = 0, 0, 0
		f = &g
	}
	return x.Flat.Search(q, k, f)
}

// TestPrefilterKeysChangeNothing answers the same requests, under
// same-agent, location and minimum-confidence constraints, from a
// prefilter whose index carries the keys and from one whose index does
// not: both are exact (Flat), so the answers must be the same. The edges
// have one agent, several, or none; locations in different spellings of
// one canonical name; confidences that re-observation raises after the
// first indexing (the keys follow through SetMeta).
func TestPrefilterKeysChangeNothing(t *testing.T) {
	f := newFixture(t, false)
	plain := keylessIndex{wave.NewFlat(384)}
	ix, err := NewIndexer(f.store, plain, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Close)
	without := New(f.store, plain, f.emb, nil, Options{Now: f.p.opts.Now})

	agents := []string{"ur5-alpha", "ur5-beta", "spot-1", ""}
	places := []string{"kitchen lab", "Kitchen  Lab", "warehouse", ""}
	things := []string{"red block", "blue bowl", "tray", "gripper", "shelf", "camera", "conveyor", "wrist"}
	preds := []string{"located_in", "near", "holds", "touches"}
	for i := range 120 {
		agent, place := agents[i%len(agents)], places[(i/3)%len(places)]
		subj, obj := things[i%len(things)], things[(i*5+3)%len(things)]
		if subj == obj {
			continue
		}
		with := func(o *particle.Observation) {
			o.Provenance.Agent = agent
			o.Location = place
		}
		f.fact(particle.EdgeAssertion, subj, preds[i%len(preds)], obj, "", t0.Add(time.Duration(i)*time.Minute), 0.3+0.5*float64(i%7)/6, with)
		if i%5 == 0 {
			// Re-observed by another agent, more confidently: several
			// agents, a higher confidence.
			f.fact(particle.EdgeAssertion, subj, preds[i%len(preds)], obj, "", t0.Add(time.Duration(i)*time.Minute+time.Second), 0.9,
				func(o *particle.Observation) {
					o.Provenance.Agent = agents[(i+1)%len(agents)]
					o.Location = place
				})
		}
	}
	if err := f.vec.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ix.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for qi, q := range []string{"red block on the shelf", "gripper holds", "camera near the wrist", "conveyor tray"} {
		for _, agent := range agents[:3] {
			for _, place := range []string{"", "kitchen lab", "KITCHEN LAB", "warehouse", "nowhere"} {
				for _, minConf := range []float64{0, 0.5, 0.65, 0.95} {
					req := Request{Query: q, K: 5, Strategy: StrategySemantic, Location: place, MinConfidence: minConf}
					if (qi+len(place))%2 == 0 {
						req.Agent, req.SameAgent = agent, true
					}
					a, b := req, req
					got, err := f.p.Plan(context.Background(), &a)
					if err != nil {
						t.Fatal(err)
					}
					want, err := without.Plan(context.Background(), &b)
					if err != nil {
						t.Fatal(err)
					}
					if g, w := answerIDs(got), answerIDs(want); !slices.Equal(g, w) {
						t.Fatalf("%+v:\nwith keys    %v\nwithout keys %v", req, g, w)
					}
					if len(want.Edges) > 0 {
						checked++
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d requests found edges: the fixture does not exercise the constraints", checked)
	}
}

// answerIDs lists an answer's node and edge ids with their scores.
func answerIDs(a *Answer) []string {
	var out []string
	for _, n := range a.Nodes {
		out = append(out, fmt.Sprintf("n:%s", n.ID))
	}
	for _, e := range a.Edges {
		out = append(out, fmt.Sprintf("e:%s", e.ID))
	}
	slices.Sort(out)
	return out
}
