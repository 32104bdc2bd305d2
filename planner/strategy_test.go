package planner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

func TestAutoChoosesAStrategyFromTheRequest(t *testing.T) {
	at := t0
	known := func(s string) bool { return particle.Canonical(s) == "red block" }
	for _, tc := range []struct {
		name    string
		req     Request
		noIndex bool
		want    string
	}{
		{"free text", Request{Query: "where is the red block now"}, false, StrategySemantic},
		{"free text with the entity named", Request{Query: "where is the red block", Entities: []string{"red block"}}, false, StrategySemantic},
		{"a vector", Request{Vector: []float32{1, 0}}, false, StrategySemantic},
		{"a serial number alone", Request{Query: "SN-4471-XQ"}, false, StrategyKeyword},
		{"an episode id", Request{Query: "ep-alpha-0001"}, false, StrategyKeyword},
		{"a quoted phrase", Request{Query: `"torque wrench"`}, false, StrategyKeyword},
		{"a serial number in a question", Request{Query: "why does the gripper slip near SN-4471-XQ"}, false, StrategyHybrid},
		{"a phrase in a question", Request{Query: `which fixture drifted during the "night shift"`}, false, StrategyHybrid},
		{"exact tokens, no keyword index", Request{Query: "SN-4471-XQ"}, true, StrategySemantic},
		{"mixed, no keyword index", Request{Query: "why does the gripper slip near SN-4471-XQ"}, true, StrategySemantic},
		{"named entities only", Request{Entities: []string{"red block"}, Tools: []string{"gripper"}}, false, StrategyGraph},
		{"the query is a known name", Request{Query: "Red  Block"}, false, StrategyGraph},
		{"as_of", Request{Query: "red block", AsOf: &at}, false, StrategyTemporal},
		{"time window", Request{Query: "pick up the block", TimeWindow: &TimeWindow{From: t0}}, false, StrategyTemporal},
		{"temporal words", Request{Query: "when did the red block move"}, false, StrategyTemporal},
		{"as of in words", Request{Query: "block position as of noon"}, false, StrategyTemporal},
		{"history of an id", Request{Query: "history of SN-4471-XQ"}, false, StrategyTemporal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adv := advise(&tc.req, known, !tc.noIndex)
			if adv.Chosen != tc.want {
				t.Errorf("chose %s (%s), want %s; suggestions %+v", adv.Chosen, adv.Reason, tc.want, adv.Suggestions)
			}
			if adv.Reason == "" || len(adv.Suggestions) != len(Strategies)-1 {
				t.Errorf("advice %+v: want a reason and every strategy but auto rated", adv)
			}
			for i := 1; i < len(adv.Suggestions); i++ {
				if adv.Suggestions[i].Score > adv.Suggestions[i-1].Score {
					t.Errorf("suggestions not best first: %+v", adv.Suggestions)
				}
			}
		})
	}
}

func TestPlanReportsTheStrategyItUsed(t *testing.T) {
	f := lab(t, true)
	for _, tc := range []struct {
		req          Request
		want         string
		reasonPrefix string
	}{
		{Request{Query: "where is the red block"}, StrategySemantic, "auto: "},
		{Request{Query: "SN-4471-XQ"}, StrategyKeyword, "auto: "},
		{Request{Entities: []string{"red block"}}, StrategyGraph, "auto: "},
		{Request{Query: "when did the red block move"}, StrategyTemporal, "auto: "},
		{Request{Query: "red block", Strategy: StrategyHybrid}, StrategyHybrid, ""},
		{Request{Query: "red block", Strategy: StrategyTemporal}, StrategyTemporal, "seeds by "},
	} {
		a := f.plan(tc.req)
		if a.Strategy != tc.want || !strings.HasPrefix(a.StrategyReason, tc.reasonPrefix) {
			t.Errorf("%+v: strategy %q reason %q, want %q and a reason starting %q", tc.req, a.Strategy, a.StrategyReason, tc.want, tc.reasonPrefix)
		}
	}
	// Semantic, the default for free text, never touches bleve.
	if a := f.plan(Request{Query: "where is the red block"}); a.Timings.KeywordUS != 0 {
		t.Errorf("semantic answer spent %dµs in the keyword index", a.Timings.KeywordUS)
	}
}

func TestStrategyErrors(t *testing.T) {
	f := lab(t, false)
	for _, req := range []Request{
		{Query: "red block", Strategy: "bm42"},
		{Query: "red block", Strategy: StrategyKeyword},
		{Query: "red block", Strategy: StrategyHybrid},
	} {
		if _, err := f.p.Plan(context.Background(), &req); !errors.Is(err, ErrInvalid) {
			t.Errorf("strategy %q without a keyword index: err %v, want ErrInvalid", req.Strategy, err)
		}
	}
	// Without the index auto falls back to semantic for exact tokens.
	if a := f.plan(Request{Query: "SN-4471-XQ"}); a.Strategy != StrategySemantic {
		t.Errorf("auto without keyword index chose %s", a.Strategy)
	}
}

// The fixture's serial number lives only in a CMS span's text, which
// the vector index does not hold: keyword finds the span (and the
// concept it names), semantic does not; semantic finds "grip slippage"
// for "slippages" by character n-grams, which BM25 (whole words, no
// stemming) misses.
// Reciprocal-rank fusion keeps both.
func TestHybridFindsWhatEitherAloneMisses(t *testing.T) {
	f := lab(t, true)
	req := func(s string) Request { return Request{Query: "slippages SN-4471-XQ", Strategy: s, K: 2, Hops: 1} }
	sem, kw, hyb := f.plan(req(StrategySemantic)), f.plan(req(StrategyKeyword)), f.plan(req(StrategyHybrid))
	sn, kn, hn := nodeNames(sem), nodeNames(kw), nodeNames(hyb)
	if !kn["fixture drift"] || sn["fixture drift"] {
		t.Errorf("keyword must find the span's concept and semantic miss it: keyword %v, semantic %v", kn, sn)
	}
	if !sn["grip slippage"] || kn["grip slippage"] {
		t.Errorf("semantic must find grip slippage and keyword miss it: semantic %v, keyword %v", sn, kn)
	}
	if !hn["fixture drift"] || !hn["grip slippage"] {
		t.Errorf("hybrid answer %v must hold both", hn)
	}
	if hyb.Strategy != StrategyHybrid || hyb.Timings.KeywordUS < 0 {
		t.Errorf("hybrid answer strategy %q", hyb.Strategy)
	}
	for _, a := range []*Answer{kw, hyb} {
		seeded := false
		for _, n := range a.Nodes {
			seeded = seeded || (n.Name == "fixture drift" && n.Seed)
		}
		if !seeded {
			t.Errorf("%s: fixture drift is not a seed", a.Strategy)
		}
	}
}

func TestFuseIsReciprocalRank(t *testing.T) {
	a := []candidate{{keyID: "x", score: 0.9}, {keyID: "y", score: 0.8}, {keyID: "z", score: 0.7}}
	b := []candidate{{keyID: "z", score: 1}, {keyID: "w", score: 0.5}}
	got := fuse(a, b)
	var keys []string
	for _, c := range got {
		keys = append(keys, c.keyID)
	}
	// z: 1/63 + 1/61 beats x: 1/61; y (1/62) and w (1/62) tie, in order met.
	if strings.Join(keys, ",") != "z,x,y,w" {
		t.Errorf("fused order %v, want z,x,y,w", keys)
	}
	if got[0].score != 1 {
		t.Errorf("fused item keeps its best score: %v", got[0].score)
	}
}

func TestTemporalKeepsTheHistoryRankedByTime(t *testing.T) {
	f := lab(t, true)
	facts := func(a *Answer) []string {
		var out []string
		for _, e := range a.Edges {
			if e.SourceName == "red block" && e.Predicate == "located_in" {
				out = append(out, e.TargetName+":"+e.Status)
			}
		}
		return out
	}
	base := Request{Entities: []string{"red block"}, Hops: 1}
	sem := base
	sem.Strategy = StrategyGraph
	if got := facts(f.plan(sem)); strings.Join(got, ",") != "tray:active" {
		t.Errorf("graph answer: %v, want only the open fact", got)
	}
	tmp := base
	tmp.Strategy = StrategyTemporal
	// Every located_in fact, the open one (valid at the reference time)
	// first, then the superseded ones by how recently they ended.
	if got := facts(f.plan(tmp)); strings.Join(got, ",") != "tray:active,shelf:superseded,blue bowl:superseded" {
		t.Errorf("temporal answer: %v", got)
	}
	// With as_of, temporal is what was valid then.
	at := t0.Add(90 * time.Minute)
	tmp.AsOf = &at
	if got := facts(f.plan(tmp)); strings.Join(got, ",") != "shelf:superseded" {
		t.Errorf("temporal as of %v: %v, want the shelf fact", at, got)
	}
}

func TestSearchRanksWithoutExpanding(t *testing.T) {
	f := lab(t, true)
	ctx := context.Background()
	search := func(req Request) *SearchResult {
		t.Helper()
		if err := f.vec.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := f.p.Search(ctx, &req)
		if err != nil {
			t.Fatalf("search %+v: %v", req, err)
		}
		return res
	}
	res := search(Request{Query: "SN-4471-XQ", K: 3})
	if res.Strategy != StrategyKeyword || len(res.Hits) == 0 {
		t.Fatalf("keyword search: %+v", res)
	}
	if h := res.Hits[0]; h.Kind != "span" || h.ID != "span-7" || !strings.Contains(h.Text, "SN-4471-XQ") || len(h.Nodes) == 0 || !slices.Equal(h.Via, []string{"keyword"}) {
		t.Errorf("first hit %+v, want span-7 with its text and nodes, via keyword", h)
	}
	vias := map[string]bool{}
	for _, h := range search(Request{Query: "slippages SN-4471-XQ", Strategy: StrategyHybrid, K: 4}).Hits {
		for _, v := range h.Via {
			vias[v] = true
		}
	}
	if !vias["semantic"] || !vias["keyword"] {
		t.Errorf("hybrid search hits came via %v, want both rankings", vias)
	}
	if _, err := f.p.Search(ctx, &Request{Query: "x", Strategy: StrategyGraph}); !errors.Is(err, ErrInvalid) {
		t.Errorf("graph search: %v, want ErrInvalid", err)
	}
	adv, err := f.p.Advise(&Request{Query: "SN-4471-XQ"})
	if err != nil || adv.Chosen != StrategyKeyword {
		t.Errorf("advise: %+v %v", adv, err)
	}
}

// A keyword hit is a candidate, not a result: the one policy check
// decides, in searches and in answers.
func TestKeywordHitsPassThePolicy(t *testing.T) {
	f := lab(t, true)
	ctx := context.Background()
	for _, role := range []string{"operator", "visitor"} {
		res, err := f.p.Search(ctx, &Request{Query: "KX-3319-PIN", Roles: []string{role}})
		if err != nil {
			t.Fatal(err)
		}
		a := f.plan(Request{Query: "KX-3319-PIN", Roles: []string{role}, Strategy: StrategyKeyword})
		found := false
		for _, e := range a.Edges {
			found = found || e.Value == "KX-3319-PIN"
		}
		edgeHit := len(res.Hits) > 0 && res.Hits[0].Kind == "edge"
		if want := role == "operator"; found != want || edgeHit != want {
			t.Errorf("role %s: answer has the denied edge %v, search hit %v; want %v", role, found, edgeHit, want)
		}
	}
}
