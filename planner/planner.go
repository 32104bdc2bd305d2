package planner

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner/keyword"
	"github.com/ctxgraph/ctxgraph/wave"
)

// Sessions is what the planner needs of context sessions: their seeds,
// and a place to blend what an answer touched into the state vector.
type Sessions interface {
	Seeds(ctx context.Context, ns, id string) (Seeds, error)
	Blend(ctx context.Context, ns, id string, vecs [][]float32, weights []float64) ([]float32, error)
}

// Seeds are what a session contributes to a request.
type Seeds struct {
	Agent       string
	Goals       []string
	Tools       []string
	Entities    []string
	Intents     []string
	Permissions []string
	TimeWindow  TimeWindow
	Location    string
	State       []float32
}

// Options configures a Planner.
type Options struct {
	// HypothesisBelow marks edges whose belief is below it as hypotheses.
	// Default 0.5.
	HypothesisBelow float64
	// SalienceFloor keeps a fully decayed edge rankable. Default 0.05.
	SalienceFloor float64
	// PerNodeFanout caps the edges one node contributes per hop.
	// Default 32.
	PerNodeFanout int
	// Keyword is the keyword index for the keyword and hybrid
	// strategies; nil leaves them out (auto never picks them).
	Keyword *keyword.Index
	Logger  *slog.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Priority, when set, has the background work that yields to it
	// give way while a plan runs (the daemon's ingest).
	Priority *Priority
}

func (o *Options) ensureDefaults() {
	if o.HypothesisBelow == 0 {
		o.HypothesisBelow = 0.5
	}
	if o.SalienceFloor == 0 {
		o.SalienceFloor = 0.05
	}
	if o.PerNodeFanout == 0 {
		o.PerNodeFanout = 32
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Planner answers fast-path requests from the memory-resident graph and
// vector index; it never waits on ingest.
type Planner struct {
	store    *particle.Store
	index    wave.Index
	embedder embed.Embedder
	sessions Sessions
	opts     Options
	// born is when New made the planner, and lastCall when the latest
	// call began, as time since born (Idle): every call writes it, so it
	// has a cache line of its own, apart from the fields every call
	// reads (two cores' calls would otherwise take that line from each
	// other).
	born     time.Time
	lastCall paddedInt64
}

// paddedInt64 is an atomic.Int64 alone on its cache line.
type paddedInt64 struct {
	_ [56]byte
	atomic.Int64
	_ [56]byte
}

// New returns a planner over store and index. sessions may be nil.
func New(store *particle.Store, index wave.Index, e embed.Embedder, sessions Sessions, o Options) *Planner {
	o.ensureDefaults()
	return &Planner{store: store, index: index, embedder: e, sessions: sessions, opts: o, born: time.Now()}
}

// Idle returns how long ago the latest call began (since New when there
// has been none). Background work that would stall a call while it runs
// waits for the planner to idle: the daemon's huge-page keeper does.
func (p *Planner) Idle() time.Duration {
	return time.Since(p.born) - time.Duration(p.lastCall.Load())
}

// NoteCall marks a call begun now, as if p had been asked (Idle): for a
// program that plans over the same graph with a planner of its own (the
// bench's recall pass and exact baseline) and wants the background work
// that waits for p to idle held off meanwhile, as p's own calls hold it.
func (p *Planner) NoteCall() { p.begin() }

// begin marks a call begun now (Idle) and returns now.
func (p *Planner) begin() time.Time {
	now := time.Now()
	p.lastCall.Store(int64(now.Sub(p.born)))
	return now
}

// Plan runs the pipeline: prefilter, expansion, re-rank, stitch.
func (p *Planner) Plan(ctx context.Context, req *Request) (*Answer, error) {
	ans := new(Answer)
	if err := p.PlanInto(ctx, req, ans); err != nil {
		return nil, err
	}
	return ans, nil
}

// PlanInto is Plan writing its answer over ans, reusing the capacity of
// ans's lists. A server that renders each answer and then lets it go
// keeps answers to reuse ([Answer.Reset]) instead of allocating the
// lists of every answer (about 60 KB for 256 items). On an error ans is
// left unspecified.
func (p *Planner) PlanInto(ctx context.Context, req *Request, ans *Answer) error {
	// Background work gives way while the call runs (until its read of
	// the graph is done when it saves a session's state).
	pri := p.opts.Priority
	pri.Enter()
	ended := false
	defer func() {
		if !ended {
			pri.Leave()
		}
	}()
	t0 := p.begin()
	if err := req.normalize(p.index.Dim()); err != nil {
		return err
	}
	ns := req.namespace()
	var seeds Seeds
	if req.SessionID != "" {
		if p.sessions == nil {
			return fmt.Errorf("%w: sessions are not available", ErrInvalid)
		}
		s, err := p.sessions.Seeds(ctx, ns, req.SessionID)
		if err != nil {
			return fmt.Errorf("%w: session %s: %v", ErrInvalid, req.SessionID, err)
		}
		seeds = s
		mergeSession(req, s)
	}
	q, err := p.queryVector(ctx, req, seeds, &ans.keep.query)
	if err != nil {
		return err
	}
	strategy, seedBy, reason, err := p.chooseStrategy(req, ns)
	if err != nil {
		return err
	}
	run := &run{p: p, req: req, ns: ns, q: q, now: p.opts.Now().UTC(), principal: req.principal(),
		temporal: strategy == StrategyTemporal, history: strategy == StrategyTemporal && req.AsOf == nil}
	defer run.release()
	if req.AsOf != nil {
		run.now = req.AsOf.UTC()
	}
	// The keyword search runs before the read lock: bleve has its own.
	var kw []keyword.Hit
	var keywordUS int64
	if seedBy == StrategyKeyword || seedBy == StrategyHybrid {
		tk := time.Now()
		kw, err = p.opts.Keyword.Search(ns, req.Query, 2*req.K)
		if err != nil {
			return fmt.Errorf("keyword search: %w", err)
		}
		keywordUS = us(time.Since(tk))
	}

	t1 := time.Now()
	var tRead time.Time
	p.store.Read(func(r particle.Reader) {
		tRead = time.Now()
		run.r = r
		run.ns = r.Namespace(run.ns)
		run.seedNamed()
		cands := run.candidates(seedBy, kw)
		if seedBy == StrategyGraph {
			run.seedQueryNames()
		}
		t2 := time.Now()
		run.seedCandidates(cands)
		run.expand()
		t3 := time.Now()
		run.rerank()
		t4 := time.Now()
		run.stitch(ans)
		t5 := time.Now()
		ans.Timings = Timings{
			WaitUS: us(tRead.Sub(t1)), PrefilterUS: us(t2.Sub(tRead)), KeywordUS: keywordUS, ExpandUS: us(t3.Sub(t2)), RerankUS: us(t4.Sub(t3)), StitchUS: us(t5.Sub(t4)),
		}
	})
	if req.SessionID != "" {
		// A session's state is saved through the store's writer, which
		// may be giving way to this very call: leave first.
		pri.Leave()
		ended = true
	}
	ans.Search = run.search
	ans.Strategy, ans.StrategyReason = strategy, reason
	ans.ContextState, err = p.contextState(ctx, run, ans, seeds)
	if err != nil {
		return err
	}
	ans.Timings.EmbedUS = us(t1.Sub(t0))
	ans.Timings.TotalUS = us(time.Since(t0))
	return nil
}

func us(d time.Duration) int64 { return d.Microseconds() }

// mergeSession adds a session's seeds and constraints to a request.
func mergeSession(req *Request, s Seeds) {
	req.Goals = appendNew(req.Goals, s.Goals...)
	req.Tools = appendNew(req.Tools, s.Tools...)
	req.Entities = appendNew(req.Entities, s.Entities...)
	if req.Agent == "" {
		req.Agent = s.Agent
	}
	if req.Location == "" {
		req.Location = s.Location
	}
	if req.TimeWindow == nil && (!s.TimeWindow.From.IsZero() || !s.TimeWindow.To.IsZero()) {
		tw := s.TimeWindow
		req.TimeWindow = &tw
	}
	if len(s.Permissions) > 0 {
		// A session's permissions narrow the roles: keep those in both,
		// or the session's when the request names none.
		if len(req.Roles) == 0 {
			req.Roles = slices.Clone(s.Permissions)
		} else {
			var keep []string
			for _, r := range req.Roles {
				if slices.Contains(s.Permissions, r) {
					keep = append(keep, r)
				}
			}
			req.Roles = keep
		}
	}
}

func appendNew(list []string, more ...string) []string {
	for _, m := range more {
		if !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	return list
}

// queryVector is the request's vector (copied into *buf, when buf is
// not nil, so that a reused answer's storage serves), the embedding of
// its text (query, goals, tools, entities), or the session's state
// vector.
func (p *Planner) queryVector(ctx context.Context, req *Request, s Seeds, buf *[]float32) ([]float32, error) {
	if len(req.Vector) > 0 {
		var v []float32
		if buf != nil {
			v = append((*buf)[:0], req.Vector...)
			*buf = v
		} else {
			v = slices.Clone(req.Vector)
		}
		if !wave.Normalize(v) {
			return nil, fmt.Errorf("%w: vector is all zeros", ErrInvalid)
		}
		return v, nil
	}
	text := strings.TrimSpace(strings.Join(slices.Concat([]string{req.Query}, req.Goals, req.Tools, req.Entities), " "))
	if text != "" {
		v, err := p.embedder.Embed(ctx, text)
		if err != nil {
			return nil, fmt.Errorf("embed query: %w", err)
		}
		return v, nil
	}
	if len(s.State) == p.index.Dim() {
		v := slices.Clone(s.State)
		if wave.Normalize(v) {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%w: give a query, a vector, goals, tools or entities", ErrInvalid)
}

// prefilter asks the vector index for candidates that pass the cheap
// constraints: namespace, visibility, time window and agent. It runs
// inside the store's read lock (run.r), with one Search per call. The
// time window goes to the index as well (Filter.From/To: overlap, as
// particle.TimeRange.Overlaps), which drops what lies outside it before
// asking Allow; Allow still judges the window, as the index's copy of an
// item's scope may lag the store.
func (p *Planner) prefilter(run *run) []wave.Hit {
	// The keys rule out most of what admits and episodeAdmits would
	// reject, before the index scores it; allow decides.
	f := &wave.Filter{Allow: run.allow, Hint: run.r.HintEdgeFacts, MinConfidence: wave.MinConfidenceLevel(run.req.MinConfidence),
		Stats: &run.search}
	if tw := run.req.TimeWindow; tw != nil {
		f.From, f.To = unixNano(tw.From), unixNano(tw.To)
	}
	if run.req.SameAgent {
		f.Agent = wave.AgentKey(run.req.Agent)
	}
	if run.req.Location != "" {
		f.Site = wave.SiteKey(run.location())
	}
	return p.index.Search(run.q, run.req.K*2, f)
}

// allow is the prefilter's predicate on an index id (hinted first, with
// the index's other candidates: Reader.HintEdgeFacts): one slice index to
// find the item (nodes, edges and episodes share the seq space), then
// the request's constraints.
func (run *run) allow(id uint64) bool {
	r := run.r
	if f := r.EdgeFactsBySeq(id); f != nil {
		// An edge: its facts hold its namespace, and decide most of
		// what the request asks without reading it.
		return f.NS == run.facts().ns && run.admitsSeq(id, f)
	}
	if n := r.NodeBySeq(id); n != nil {
		return n.Namespace == run.ns && run.policy().NodeVisible(n)
	}
	if ep := r.EpisodeBySeq(id); ep != nil {
		return ep.Namespace == run.ns && run.episodeAdmits(ep)
	}
	return false
}

// contextState blends what the answer touched into the session's state
// vector (or, without a session, into a fresh one seeded by the query).
func (p *Planner) contextState(ctx context.Context, run *run, ans *Answer, s Seeds) (*ContextState, error) {
	st := run.state()
	vecs, weights := append(st.stateVecs[:0], run.q), append(st.stateWeights[:0], 1)
	for _, i := range st.ranked[:min(8, len(st.ranked))] {
		if rn := &st.nodes[i]; len(rn.n.Embedding) == len(run.q) {
			vecs = append(vecs, rn.n.Embedding)
			weights = append(weights, math.Max(rn.score, 1e-3))
		}
	}
	st.stateVecs, st.stateWeights = vecs, weights
	if run.req.SessionID != "" {
		v, err := p.sessions.Blend(ctx, run.ns, run.req.SessionID, vecs, weights)
		if err != nil {
			return nil, fmt.Errorf("update session state: %w", err)
		}
		return newContextState(v), nil
	}
	// A fresh state blended once: into the answer's own storage, so
	// that the call allocates nothing here (an allocation during a
	// collection's mark phase pays for marking, and beside ingest this
	// step's p99 was 1-2 ms; BENCHMARKS.md, forty-fourth round).
	cs := &ans.keep.state
	v := slices.Grow(cs.Vector[:0], len(run.q))[:len(run.q)]
	if _, err := wave.UnitMean(v, vecs, weights); err != nil {
		return nil, fmt.Errorf("context state: %w", err)
	}
	summarise(cs, v, slices.Grow(cs.Top[:0], 5))
	return cs, nil
}
