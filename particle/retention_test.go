package particle

import (
	"context"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

func TestFadedSince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		fn        wave.DecayFn
		score     float64
		threshold float64
		want      time.Duration // after t0; -1 = never
	}{
		{wave.DecayExp, 0.8, 0.1, 3 * time.Hour},    // 0.8 → 0.1 in three halvings
		{wave.DecayPower, 0.8, 0.1, 7 * time.Hour},  // 0.8/(1+t) = 0.1 at t = 7
		{wave.DecayLinear, 0.8, 0.4, 1 * time.Hour}, // 0.8(1-t/2) = 0.4 at t = 1
		{wave.DecayExp, 0.05, 0.1, 0},               // already below
		{"bogus", 0.8, 0.1, -1},                     // an invalid decay never fades
	} {
		e := &Edge{Salience: Salience{Score: tc.score, DecayFn: string(tc.fn), HalfLifeS: 3600, LastUpdated: t0}}
		got := fadedSince(e, tc.threshold)
		if tc.want < 0 {
			if got != never {
				t.Errorf("%s: faded at %v, want never", tc.fn, got)
			}
			continue
		}
		if d := got.Sub(t0) - tc.want; d < -2*time.Millisecond || d > 2*time.Millisecond {
			t.Errorf("%s %.2f→%.2f: faded after %v, want %v", tc.fn, tc.score, tc.threshold, got.Sub(t0), tc.want)
		}
	}
}

func TestRetainRemovesWhatStayedFaded(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	ctx := context.Background()
	t0 := time.Now().UTC() // nodes are stamped with the batch clock
	ids := map[string]string{}
	_, err := s.Update(ctx, func(b *Batch) error {
		node := func(name string) string {
			n, _, err := b.Resolve(DefaultNamespace, NodeEntity, name)
			if err != nil {
				t.Fatal(err)
			}
			ids[name] = n.ID
			return n.ID
		}
		for _, o := range []struct {
			name, src, dst string
			typ            EdgeType
			reinforce      float64
		}{
			{"faint temporal", "cup", "shelf", EdgeTemporal, 0.2},
			{"strong temporal", "bowl", "table", EdgeTemporal, 0.9},
			{"faint causal", "cup", "bowl", EdgeCausal, 0.2},
		} {
			e, _, err := b.Observe(Observation{Source: node(o.src), Target: node(o.dst), Type: o.typ, At: t0,
				Reinforce: o.reinforce, Decay: wave.DecayExp, HalfLife: time.Hour})
			if err != nil {
				return err
			}
			ids[o.name] = e.ID
		}
		node("lonely") // no edges: faded since it was created
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rules := []RetentionRule{{Kind: "edge", Type: "temporal", Below: 0.05, For: time.Hour}}
	// 0.2 falls below 0.05 after two half-lives (t0+2h); 0.9 after
	// about 4.17h. At t0+2h59m the faint edge has been faded for 59m.
	rep, err := s.Retain(ctx, RetentionOptions{Rules: rules, Archive: true, Now: t0.Add(2*time.Hour + 59*time.Minute)})
	if err != nil || rep.Edges != 0 {
		t.Fatalf("too early: %+v, %v", rep, err)
	}
	rep, err = s.Retain(ctx, RetentionOptions{Rules: rules, Archive: true, Now: t0.Add(3*time.Hour + time.Minute)})
	if err != nil || rep.Edges != 1 {
		t.Fatalf("after the grace period: %+v, %v", rep, err)
	}
	if _, err := s.Edge(ids["faint temporal"]); err == nil {
		t.Error("faded temporal edge still there")
	}
	for _, keep := range []string{"strong temporal", "faint causal"} { // no rule covers causal
		if _, err := s.Edge(ids[keep]); err != nil {
			t.Errorf("%s removed: %v", keep, err)
		}
	}
	if _, err := s.Record(RecordArchiveEdge, ids["faint temporal"]); err != nil {
		t.Errorf("removed edge not archived: %v", err)
	}

	// Nodes fade when every edge touching them has: with a rule for
	// entities, the shelf (whose only edge is gone) and the lonely node
	// go; the cup still has its causal edge, which no longer counts once
	// it too is faded.
	nodeRules := []RetentionRule{{Kind: "node", Type: "entity", Below: 0.05, For: time.Hour}}
	rep, err = s.Retain(ctx, RetentionOptions{Rules: nodeRules, Now: t0.Add(3*time.Hour + time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for name, gone := range map[string]bool{"shelf": true, "lonely": true, "cup": true, "bowl": false, "table": false} {
		_, err := s.Node(ids[name])
		if gone != (err != nil) {
			t.Errorf("node %s: gone=%v, want %v (report %+v)", name, err != nil, gone, rep)
		}
	}
	if _, err := s.Edge(ids["faint causal"]); err == nil {
		t.Error("edge of a removed node survived")
	}
	if r, err := s.Check(ctx); err != nil || !r.OK() {
		t.Fatalf("store after retention: %v\n%s", err, problemList(r))
	}
	if _, err := s.Retain(ctx, RetentionOptions{Rules: []RetentionRule{{Kind: "node", Type: "episode", Below: 0.1}}}); err == nil {
		t.Error("a rule for episode nodes was accepted")
	}
}
