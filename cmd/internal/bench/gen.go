package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// Vocabulary of the generated fleet.
var (
	colours = []string{"red", "blue", "green", "yellow", "black", "white", "orange", "purple", "grey", "pink", "brown", "silver"}
	kinds   = []string{"block", "bowl", "cup", "mug", "bottle", "can", "box", "sponge", "towel", "spoon", "fork", "plate",
		"lid", "drawer", "tray", "bin", "jar", "banana", "apple", "carrot", "marker", "screwdriver", "wrench", "hammer",
		"cable", "connector", "bolt", "gear", "panel", "bracket"}
	toolNames = []string{"parallel gripper", "suction cup", "soft gripper", "vacuum wand", "screwdriver bit", "wiping pad",
		"hook", "magnetic gripper", "three finger hand", "spatula", "tweezers", "brush"}
	templates = []string{"pick up the %s and put it in the %s", "move the %s to the %s", "place the %s on the %s",
		"stack the %s on the %s", "push the %s toward the %s", "wipe the %s with the %s"}
	conceptBases = []string{"grasp stability", "occlusion", "slippery surface", "clutter", "tight placement",
		"deformable object", "lighting change", "human nearby", "reflective surface", "heavy payload",
		"narrow gap", "moving target", "partial view", "tool wear", "recovery after slip", "regrasp"}
	// Event predicates by edge type (assertions are most of them).
	predicates = map[string][]string{
		"assertion":  {"located_in", "on_top_of", "next_to", "inside", "holds", "touches", "blocks", "supports", "covers", "leans_on"},
		"causal":     {"pushes", "knocks_over", "displaces"},
		"temporal":   {"moved_before", "reached_after"},
		"membership": {"part_of", "grouped_with"},
	}
	edgeTypes = []struct {
		t string
		p float64 // cumulative
	}{{"assertion", 0.75}, {"causal", 0.85}, {"temporal", 0.95}, {"membership", 1}}
)

// Roles of the generated policies and queries.
const (
	roleOperator = "operator"
	rolePlanner  = "planner"
	roleVisitor  = "visitor"
)

// GenOptions configures [Generate].
type GenOptions struct {
	Preset Preset
	Seed   uint64
	// Out is the directory the files are written to (created).
	Out string
}

// event is one generated event: what ground truth needs of it.
type event struct {
	subj, obj int32
	robot     int32
	site      int32
	// conf is the confidence the store gives the new edge (see
	// storedConfidence).
	conf        float64
	allow, deny bool
	t           int64 // unix nanoseconds
}

// gen is one generation in progress.
type gen struct {
	p      Preset
	r      *rand.Rand
	tp     *topics
	names  []string
	bySite [][]int32
	used   map[uint64]bool
	events []event
	vecs   []float32 // len(events) * Dims, normalised
	subOf  []int32   // sub-topic of each event
	q      []float32 // scratch: the wire vector
	qvecs  [][]float32
	end    time.Time
	conf   []float64 // by sighting confidence in hundredths
}

// Generate writes the workload of o.Preset and o.Seed to o.Out: the same
// preset and seed always give the same files.
func Generate(o GenOptions) (*Manifest, error) {
	start := time.Now()
	p := o.Preset
	if p.Episodes < 1 || p.Robots < 1 || p.Sites < 1 || p.StepsPerEpisode < 2 || p.EntitiesPerEpisode < 2 ||
		p.Entities < p.Sites*p.EntitiesPerEpisode || p.Tools < 1 || p.Clusters < 1 || p.SubClusters < 1 || p.Days < 1 {
		return nil, fmt.Errorf("%w: preset %q is not a workload", ErrInvalid, p.Name)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	g := &gen{p: p, r: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), used: map[uint64]bool{}, q: make([]float32, Dims)}
	g.tp = newTopics(g.r, p.Clusters, p.SubClusters)
	g.vocabulary()
	var err error
	if g.conf, err = storedConfidence(); err != nil {
		return nil, err
	}
	m := &Manifest{Version: FormatVersion, Preset: p, Seed: o.Seed, Dims: Dims, FleetStart: fleetStart.Format(time.RFC3339)}
	if err = g.fleet(o.Out, m); err != nil {
		return nil, err
	}
	m.Events = len(g.events)
	m.FleetEnd = g.end.Format(time.RFC3339)
	qs := g.queries()
	g.truth(qs)
	w, err := createJSONL(filepath.Join(o.Out, QueriesFile))
	if err != nil {
		return nil, err
	}
	for i := range qs {
		b, err := marshalQuery(&qs[i])
		if err != nil {
			return nil, err
		}
		if err := w.line(b); err != nil {
			return nil, err
		}
	}
	if err := w.close(); err != nil {
		return nil, err
	}
	m.Queries = len(qs)
	m.GenSeconds = time.Since(start).Seconds()
	b, _ := json.MarshalIndent(m, "", "  ")
	return m, os.WriteFile(filepath.Join(o.Out, ManifestFile), append(b, '\n'), 0o644)
}

func (g *gen) vocabulary() {
	g.names = make([]string, g.p.Entities)
	g.bySite = make([][]int32, g.p.Sites)
	per := len(colours) * len(kinds)
	for e := range g.names {
		g.names[e] = fmt.Sprintf("%s %s %d", colours[e%len(colours)], kinds[e/len(colours)%len(kinds)], e/per)
		s := e % g.p.Sites
		g.bySite[s] = append(g.bySite[s], int32(e))
	}
}

func robotName(r int) string { return fmt.Sprintf("robot-%03d", r) }
func siteName(s int) string  { return fmt.Sprintf("lab %d", s) }

// episodePlan is one episode being emitted, a message at a time.
type episodePlan struct {
	id       string
	robot    int
	start    time.Time
	seen     []int32 // entities in view
	cluster  int
	instr    string
	success  bool
	next     int // the next message: 0 start, 1..S steps, S+1 end
	tools    [2]int
	l0Parent string
}

// fleet emits every message, the robots' streams interleaved one
// message per robot per round (the fleet streams at once), and the
// spans, each after its episode.
func (g *gen) fleet(dir string, m *Manifest) error {
	msgs, err := createJSONL(filepath.Join(dir, MessagesFile))
	if err != nil {
		return err
	}
	spans, err := createJSONL(filepath.Join(dir, SpansFile))
	if err != nil {
		return err
	}
	// Messages are marshalled and compressed on another goroutine while
	// the next ones are drawn.
	out := make(chan *rlds.Message, 4096)
	werr := make(chan error, 1)
	go func() {
		var err error
		for m := range out {
			if err != nil {
				continue
			}
			var b []byte
			if b, err = marshalMessage(m); err == nil {
				err = msgs.line(b)
			}
		}
		werr <- errors.Join(err, msgs.close())
	}()
	defer func() {
		if out != nil {
			close(out)
			<-werr
		}
	}()
	p := g.p
	perRobot := (p.Episodes + p.Robots - 1) / p.Robots
	slot := p.span() / time.Duration(perRobot)
	dur := time.Duration(p.StepsPerEpisode) * stepEvery
	cur := make([]*episodePlan, p.Robots)
	done := make([]int, p.Robots) // episodes finished per robot
	newEpisode := func(robot int) *episodePlan {
		i := done[robot]*p.Robots + robot
		if i >= p.Episodes {
			return nil
		}
		site := robot % p.Sites
		jitter := time.Duration(g.r.Int64N(int64(max(slot-dur, 1)))).Truncate(time.Millisecond)
		ep := &episodePlan{id: fmt.Sprintf("ep-%06d", i), robot: robot,
			start: fleetStart.Add(time.Duration(done[robot])*slot + jitter), cluster: g.r.IntN(p.Clusters),
			success: g.r.Float64() < 0.8, tools: [2]int{robot % p.Tools, (robot + 3) % p.Tools}}
		pool := g.bySite[site]
		for _, k := range g.r.Perm(len(pool))[:p.EntitiesPerEpisode] {
			ep.seen = append(ep.seen, pool[k])
		}
		ep.instr = fmt.Sprintf(templates[g.r.IntN(len(templates))], g.names[ep.seen[0]], g.names[ep.seen[1]])
		ep.l0Parent = fmt.Sprintf("span-%s-l1-%d", robotName(robot), done[robot]/10)
		return ep
	}
	for r := range cur {
		cur[r] = newEpisode(r)
	}
	for live := true; live; {
		live = false
		for r, ep := range cur {
			if ep == nil {
				continue
			}
			live = true
			msg := g.message(ep)
			out <- msg
			m.Messages++
			if msg.Kind == rlds.KindStep {
				m.Steps++
			}
			if msg.Kind != rlds.KindEpisodeEnd {
				continue
			}
			if err := spans.json(g.spanL0(ep, done[r])); err != nil {
				return err
			}
			m.Spans++
			done[r]++
			if done[r]%10 == 0 || done[r]*p.Robots+r >= p.Episodes {
				if err := spans.json(g.spanL1(ep, done[r])); err != nil {
					return err
				}
				m.Spans++
			}
			cur[r] = newEpisode(r)
		}
	}
	close(out)
	err = <-werr
	out = nil
	return errors.Join(err, spans.close())
}

// message returns ep's next wire message.
func (g *gen) message(ep *episodePlan) *rlds.Message {
	p := g.p
	m := &rlds.Message{Agent: robotName(ep.robot), EpisodeID: ep.id}
	i := ep.next
	ep.next++
	switch {
	case i == 0:
		m.Kind = rlds.KindEpisodeStart
		m.Start = &rlds.EpisodeStart{StartTime: ep.start, Location: siteName(ep.robot % p.Sites),
			LanguageInstruction: ep.instr, Metadata: map[string]any{"operator": "fleet-sim"}}
		return m
	case i > p.StepsPerEpisode:
		m.Kind = rlds.KindEpisodeEnd
		end := ep.start.Add(time.Duration(p.StepsPerEpisode) * stepEvery)
		reward := 0.0
		if ep.success {
			reward = 1
		}
		m.End = &rlds.EpisodeEnd{EndTime: end, Success: &ep.success, RewardSum: &reward, Steps: p.StepsPerEpisode}
		if end.After(g.end) {
			g.end = end
		}
		return m
	}
	idx := i - 1
	at := ep.start.Add(time.Duration(idx) * stepEvery)
	state := make([]float64, 7)
	action := make([]float64, 7)
	for j := range state {
		state[j] = math.Round(g.r.NormFloat64()*1000) / 1000
		action[j] = math.Round(g.r.NormFloat64()*100) / 1000
	}
	last := idx == p.StepsPerEpisode-1
	reward := 0.0
	if last && ep.success {
		reward = 1
	}
	a := ep.seen[g.r.IntN(len(ep.seen))]
	b := ep.seen[g.r.IntN(len(ep.seen))]
	an := &rlds.Annotations{Entities: uniqueNames(g.names[a], g.names[b]), Tool: toolNames[ep.tools[idx*2/p.StepsPerEpisode]]}
	n := int(p.EventsPerStep)
	if g.r.Float64() < p.EventsPerStep-float64(n) {
		n++
	}
	for range n {
		if ev, ok := g.event(ep, at); ok {
			an.Events = append(an.Events, ev)
		}
	}
	m.Kind = rlds.KindStep
	m.Step = &rlds.Step{Index: idx, Timestamp: at,
		Observation: rlds.Features{"state": {DType: rlds.Float32, Shape: []int{7}, Data: state}},
		Action:      rlds.Features{"": {DType: rlds.Float32, Shape: []int{7}, Data: action}},
		Reward:      reward, Discount: 1, IsFirst: idx == 0, IsLast: last, IsTerminal: last && ep.success,
		LanguageInstruction: ep.instr, Annotations: an}
	return m
}

func uniqueNames(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// event draws one event between two entities in view that no event has
// linked before (so that it is a new edge with its own vector).
func (g *gen) event(ep *episodePlan, at time.Time) (rlds.Event, bool) {
	var s, o int32
	ok := false
	for range 32 {
		s, o = ep.seen[g.r.IntN(len(ep.seen))], ep.seen[g.r.IntN(len(ep.seen))]
		if key := uint64(s)<<32 | uint64(o); s != o && !g.used[key] {
			g.used[key], g.used[uint64(o)<<32|uint64(s)] = true, true
			ok = true
			break
		}
	}
	if !ok {
		return rlds.Event{}, false
	}
	x := g.r.Float64()
	t := edgeTypes[slices.IndexFunc(edgeTypes, func(e struct {
		t string
		p float64
	}) bool {
		return x < e.p
	})].t
	preds := predicates[t]
	c := math.Round((0.2+0.8*g.r.Float64())*100) / 100
	ev := rlds.Event{Subject: g.names[s], Predicate: preds[g.r.IntN(len(preds))], Object: g.names[o], EdgeType: t, Confidence: &c}
	e := event{subj: s, obj: o, robot: int32(ep.robot), site: int32(ep.robot % g.p.Sites),
		conf: g.conf[int(math.Round(c*100))], t: at.UnixNano()}
	switch x := g.r.Float64(); {
	case x < 0.08:
		ev.DenyRoles, e.deny = []string{roleVisitor}, true
	case x < 0.13:
		ev.AllowRoles, e.allow = []string{roleOperator}, true
	}
	// Most of an episode's events are about its topic.
	sub := ep.cluster*g.p.SubClusters + g.r.IntN(g.p.SubClusters)
	if g.r.Float64() < 0.2 {
		sub = g.r.IntN(len(g.tp.subs))
	}
	n := len(g.vecs)
	g.vecs = slices.Grow(g.vecs, Dims)[:n+Dims]
	g.tp.item(g.r, sub, g.q, g.vecs[n:])
	ev.Embedding = slices.Clone(g.q)
	g.events = append(g.events, e)
	g.subOf = append(g.subOf, int32(sub))
	return ev, true
}

func (g *gen) concepts(n int) []string {
	var out []string
	for _, k := range g.r.Perm(g.p.Concepts)[:min(n, g.p.Concepts)] {
		out = append(out, fmt.Sprintf("%s %d", conceptBases[k%len(conceptBases)], k/len(conceptBases)))
	}
	return out
}

// spanL0 is the fast CMS level's consolidation of one episode.
func (g *gen) spanL0(ep *episodePlan, k int) *cms.Span {
	last := g.p.StepsPerEpisode - 1
	first := 0
	outcome := "failed"
	if ep.success {
		outcome = "succeeded"
	}
	return &cms.Span{ID: "span-" + ep.id, Level: 0, ChunkSize: g.p.StepsPerEpisode, Agent: robotName(ep.robot),
		EpisodeID: ep.id, StepStart: &first, StepEnd: &last, Start: ep.start,
		End: ep.start.Add(time.Duration(g.p.StepsPerEpisode) * stepEvery), UpdateIndex: k, ParentID: ep.l0Parent,
		Text:     fmt.Sprintf("%s: %s", ep.instr, outcome),
		Concepts: g.concepts(2), Entities: []string{g.names[ep.seen[0]], g.names[ep.seen[1]]},
		UpdateSize: math.Round((0.1+0.9*g.r.Float64())*100) / 100}
}

// spanL1 is the slower level's consolidation of a robot's last episodes.
func (g *gen) spanL1(ep *episodePlan, done int) *cms.Span {
	k := (done - 1) / 10
	return &cms.Span{ID: ep.l0Parent, Level: 1, Period: "1h", Agent: robotName(ep.robot), StreamID: robotName(ep.robot),
		Start: ep.start.Add(-time.Hour), End: ep.start.Add(time.Duration(g.p.StepsPerEpisode) * stepEvery), UpdateIndex: k,
		Text:     fmt.Sprintf("%s at %s: episodes %d to %d", robotName(ep.robot), siteName(ep.robot%g.p.Sites), k*10, done-1),
		Concepts: g.concepts(3), UpdateSize: 0.5}
}

// queries draws the planner requests: a vector near a topic the fleet
// saw, a principal, and filters of every selectivity.
func (g *gen) queries() []Query {
	p := g.p
	qs := make([]Query, p.Queries)
	span := g.end.Sub(fleetStart)
	for i := range qs {
		req := planner.Request{K: 10}
		switch x := g.r.Float64(); {
		case x < 0.1:
			req.K = 5
		case x < 0.2:
			req.K = 20
		}
		switch x := g.r.Float64(); {
		case x < 0.5:
			req.Roles = []string{rolePlanner}
		case x < 0.7:
			req.Roles = []string{roleOperator}
		case x < 0.9:
			req.Roles = []string{roleVisitor}
		default:
			req.Roles = []string{rolePlanner, roleOperator}
		}
		switch x := g.r.Float64(); {
		case x < 0.3:
			req.MinConfidence = 0.5
		case x < 0.5:
			req.MinConfidence = 0.65
		}
		var w time.Duration
		switch x := g.r.Float64(); {
		case x < 0.3:
			w = time.Duration(1+g.r.IntN(3)) * 24 * time.Hour
		case x < 0.5:
			w = time.Duration(2+g.r.IntN(7)) * time.Hour
		case x < 0.6:
			w = -24 * time.Hour // the last day
		}
		switch {
		case w > 0:
			from := fleetStart.Add(time.Duration(g.r.Int64N(int64(max(span-w, time.Hour))))).Truncate(time.Minute)
			req.TimeWindow = &planner.TimeWindow{From: from, To: from.Add(w)}
		case w < 0:
			req.TimeWindow = &planner.TimeWindow{From: g.end.Add(w)}
		}
		switch x := g.r.Float64(); {
		case x < 0.1:
			req.Agent, req.SameAgent = robotName(g.r.IntN(p.Robots)), true
		case x < 0.2:
			req.Location = siteName(g.r.IntN(p.Sites))
		}
		// A topic the fleet saw: that of a random event.
		v := make([]float32, Dims)
		g.tp.item(g.r, int(g.subOf[g.r.IntN(len(g.subOf))]), g.q, v)
		req.Vector = slices.Clone(g.q)
		qs[i] = Query{ID: i, Request: req}
		g.qvecs = append(g.qvecs, v)
	}
	return qs
}

// storedConfidence asks the store what confidence a new edge gets from
// one sighting of confidence c/100, for c in 0..100: ground truth filters
// on the stored value (belief folds the sighting into a prior), and the
// store, not the generator, owns that rule.
func storedConfidence() ([]float64, error) {
	s, err := particle.Open(particle.Options{InMemory: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	out := make([]float64, 101)
	_, err = s.Update(context.Background(), func(b *particle.Batch) error {
		for c := 1; c <= 100; c++ {
			src, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, fmt.Sprintf("a %d", c))
			if err != nil {
				return err
			}
			dst, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, fmt.Sprintf("b %d", c))
			if err != nil {
				return err
			}
			e, _, err := b.Observe(particle.Observation{Source: src.ID, Target: dst.ID, Type: particle.EdgeCausal,
				Confidence: float64(c) / 100, At: fleetStart})
			if err != nil {
				return err
			}
			out[c] = e.Confidence
		}
		return nil
	})
	return out, err
}
