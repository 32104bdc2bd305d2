package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/planner/contentenc"
	"github.com/ctxgraph/ctxgraph/wave"
)

// Budget is the node-plus-edge budget of every measured request (the
// targets' 256).
const Budget = 256

// recorder is the index the recall pass gives a planner: every search
// goes to the daemon's index and to exact search with the same query, k
// and filter (the planner's own prefilter), and both answers are kept.
// While check is set, wave.Flat answers too, to prove brute exact.
type recorder struct {
	approx wave.Index
	exact  *brute
	check  *wave.Flat
	flat   *wave.Flat
	// The last search's hits and times (the recall pass is serial): the
	// index's, exact filter-last's, and an unfiltered wave.Flat scan's
	// (brute force as vector libraries measure it).
	a, e                   []wave.Hit
	aDur, eDur, unfiltered time.Duration
	searches               int
	mismatches             int
	// alone searches the index only: its own latency, without the
	// exact scans that would leave the caches cold for it.
	alone bool
	// The last search's filter (nil: none) and the index's work in it.
	f    *wave.Filter
	work wave.SearchStats
	// busy is the daemon's planner, told of every call (NoteCall) so
	// that the daemon's idle-time work (the huge-page keeper) waits for
	// the recall pass as it would for the daemon's own calls.
	busy *planner.Planner
}

func (x *recorder) Add(id uint64, v []float32, m wave.Meta) error { return x.approx.Add(id, v, m) }
func (x *recorder) Remove(id uint64) bool                         { return x.approx.Remove(id) }
func (x *recorder) Len() int                                      { return x.approx.Len() }
func (x *recorder) Dim() int                                      { return x.approx.Dim() }

func (x *recorder) Search(q []float32, k int, f *wave.Filter) []wave.Hit {
	t := time.Now()
	var before wave.SearchStats
	if f != nil && f.Stats != nil {
		before = *f.Stats
	}
	x.a = x.approx.Search(q, k, f)
	x.aDur = time.Since(t)
	x.f, x.work = nil, wave.SearchStats{}
	if f != nil {
		x.f = f
		if f.Stats != nil {
			x.work = wave.SearchStats{Lists: f.Stats.Lists - before.Lists, Scored: f.Stats.Scored - before.Scored, Asked: f.Stats.Asked - before.Asked,
				Allowed: f.Stats.Allowed - before.Allowed, Rescored: f.Stats.Rescored - before.Rescored}
		}
	}
	x.searches++
	if x.alone {
		return x.a
	}
	t = time.Now()
	x.e = x.exact.Search(q, k, f)
	x.eDur = time.Since(t)
	x.unfiltered = 0
	if x.flat != nil {
		t = time.Now()
		x.flat.Search(q, k, nil)
		x.unfiltered = time.Since(t)
	}
	if x.check != nil && !slices.Equal(ids(x.e, k), ids(x.check.Search(q, k, f), k)) {
		x.mismatches++
	}
	return x.a
}

// plan asks query i through p, which must search x once.
func (x *recorder) plan(ctx context.Context, p *planner.Planner, i int, req *planner.Request) error {
	x.searches = 0
	if x.busy != nil {
		x.busy.NoteCall()
	}
	if _, err := p.Plan(ctx, req); err != nil {
		return fmt.Errorf("query %d: %w", i, err)
	}
	if x.searches != 1 {
		return fmt.Errorf("query %d: the planner searched the index %d times, the recall pass expects once", i, x.searches)
	}
	return nil
}

// call is one measured request's outcome.
type call struct {
	query   int // the query's index in the workload
	lat     time.Duration
	timings planner.Timings
	search  wave.SearchStats // the prefilter's index search's work (IVF)
	nodes   int
	edges   int
	trunc   bool
	timeout bool // no answer in time: counted, its latency is the timeout
	// selective is set when the query's filters admit under 1% of the
	// events (the index then searches a sparse subgraph or scans).
	selective bool
}

// requestTimeout bounds one request over NATS.
const requestTimeout = 10 * time.Second

// result aggregates one configuration's calls.
type result struct {
	lat          dist
	byClass      [2]dist // broad, selective
	stages       map[string]*dist
	nodes, edges dist
	truncated    int
	timeouts     int
	qps          float64
	// gcCycles counts the garbage collections of this process during
	// the timed calls (the warm-up excluded).
	gcCycles uint64
	// calls are the timed calls themselves (RunOptions.CallsDir).
	calls []call
	// steal is the share of the machine's vCPU time the host took
	// during the timed calls (stealShare; -1 unknown).
	steal float64
}

func newResult() *result {
	s := map[string]*dist{}
	for _, k := range stageNames {
		s[k] = &dist{}
	}
	return &result{stages: s, steal: -1}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

var stageNames = []string{"embed", "prefilter", "expand", "rerank", "stitch", "total"}

func (res *result) add(c *call) {
	res.lat.addDur(c.lat, time.Microsecond)
	res.byClass[b2i(c.selective)].addDur(c.lat, time.Microsecond)
	if c.timeout {
		res.timeouts++
		return
	}
	t := c.timings
	for k, v := range map[string]int64{"embed": t.EmbedUS, "prefilter": t.PrefilterUS, "expand": t.ExpandUS,
		"rerank": t.RerankUS, "stitch": t.StitchUS, "total": t.TotalUS} {
		res.stages[k].add(float64(v))
	}
	res.nodes.add(float64(c.nodes))
	res.edges.add(float64(c.edges))
	if c.trunc {
		res.truncated++
	}
}

// measure runs n calls on each of threads goroutines (each starting at
// its own offset in the query list, each call after a yield of the
// goroutine's time slice) after a short serial warm-up.
func measure(ctx context.Context, threads, n, queries int, selective func(int) bool, newCaller func() (func(i int, c *call) error, func(), error)) (*result, error) {
	warm, closeWarm, err := newCaller()
	if err != nil {
		return nil, err
	}
	var c call
	for i := range min(n, 100) {
		if err := warm(i%queries, &c); err != nil {
			closeWarm()
			return nil, err
		}
	}
	closeWarm()
	callers := make([]func(int, *call) error, threads)
	closers := make([]func(), threads)
	for t := range threads {
		if callers[t], closers[t], err = newCaller(); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, f := range closers {
			if f != nil {
				f()
			}
		}
	}()
	parts := make([][]call, threads)
	errs := make([]error, threads)
	var wg sync.WaitGroup
	gc0, ticks0 := readGC(), readCPUTicks()
	start := time.Now()
	for t := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]call, n)
			off := t * queries / threads
			for j := range n {
				if ctx.Err() != nil {
					errs[t] = ctx.Err()
					return
				}
				i := (off + j) % queries
				out[j].query, out[j].selective = i, selective(i)
				// Each call starts on a time slice of its own, as a
				// request's handler or a control loop's tick does: a
				// goroutine that runs calls back to back for 10 ms is
				// preempted by the runtime in mid-call, and that call
				// then waits for whatever else is runnable (BENCHMARKS.md,
				// forty-first round).
				runtime.Gosched()
				if err := callers[t](i, &out[j]); err != nil {
					errs[t] = err
					return
				}
			}
			parts[t] = out
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	res := newResult()
	res.gcCycles = readGC().cycles - gc0.cycles
	res.steal = stealShare(ticks0, readCPUTicks())
	for t := range threads {
		if errs[t] != nil {
			return nil, errs[t]
		}
		for i := range parts[t] {
			res.add(&parts[t][i])
		}
		res.calls = append(res.calls, parts[t]...)
	}
	res.qps = float64(threads*n) / wall.Seconds()
	return res, nil
}

// key is the figure prefix of a configuration.
func key(mode string, hops, threads int) string {
	k := "planner." + mode + "."
	if hops != 1 {
		k += fmt.Sprintf("hops%d.", hops)
	}
	if threads != 1 {
		k += fmt.Sprintf("threads%d.", threads)
	}
	return k
}

func (r *runner) putResult(prefix string, res *result, stages bool) {
	if err := r.writeCalls(prefix, res); err != nil {
		r.say("calls of %s not written: %v", prefix, err)
	}
	r.fig.put(prefix, &res.lat, "us")
	r.fig[prefix+"qps"] = res.qps
	r.fig[prefix+"calls"] = float64(res.lat.n())
	if res.timeouts > 0 {
		r.fig[prefix+"timeouts"] = float64(res.timeouts)
	}
	if res.steal >= 0 {
		r.fig[prefix+"host_steal_share"] = res.steal
	}
	if r.d != nil {
		// The daemon shares this process: its collections are these. A
		// collection's mark phase slows every call that overlaps it.
		r.fig[prefix+"gc_cycles"] = float64(res.gcCycles)
	}
	if !stages {
		return
	}
	for _, s := range stageNames {
		d := res.stages[s]
		r.fig[prefix+"stage."+s+"_p50_us"] = d.pct(50)
		r.fig[prefix+"stage."+s+"_p99_us"] = d.pct(99)
	}
	r.fig[prefix+"answer.nodes_mean"] = res.nodes.mean()
	r.fig[prefix+"answer.edges_mean"] = res.edges.mean()
	r.fig[prefix+"answer.truncated_frac"] = float64(res.truncated) / float64(max(res.lat.n(), 1))
	r.fig.put(prefix+"broad.", &res.byClass[0], "us")
	r.fig.put(prefix+"selective.", &res.byClass[1], "us")
	if r.far != nil {
		// The near queries and the far ones apart (FarScore).
		var near, far dist
		for _, c := range res.calls {
			if r.farQuery(c.query) {
				far.addDur(c.lat, time.Microsecond)
			} else {
				near.addDur(c.lat, time.Microsecond)
			}
		}
		r.fig.put(prefix+"near.", &near, "us")
		r.fig.put(prefix+"far.", &far, "us")
	}
	// The index's work per prefilter (wave.SearchStats), of the calls
	// that searched an IVF; the same-agent queries' apart: with the index
	// split by agent they scan their agent's list and then the
	// catch-alls' index until it stops improving their candidates.
	var lists, scored, rescored, agentLists, agentScored dist
	for _, c := range res.calls {
		if c.search.Lists == 0 {
			continue
		}
		lists.add(float64(c.search.Lists))
		scored.add(float64(c.search.Scored))
		rescored.add(float64(c.search.Rescored))
		if r.qs[c.query].Request.SameAgent {
			agentLists.add(float64(c.search.Lists))
			agentScored.add(float64(c.search.Scored))
		}
	}
	if lists.n() > 0 {
		for _, w := range []struct {
			name string
			d    *dist
		}{{"lists", &lists}, {"scored", &scored}, {"rescored", &rescored}} {
			r.fig[prefix+"prefilter."+w.name+"_p50"] = w.d.pct(50)
			r.fig[prefix+"prefilter."+w.name+"_p99"] = w.d.pct(99)
			r.fig[prefix+"prefilter."+w.name+"_mean"] = w.d.mean()
		}
	}
	if agentLists.n() > 0 {
		r.fig[prefix+"prefilter.same_agent.lists_mean"] = agentLists.mean()
		r.fig[prefix+"prefilter.same_agent.scored_mean"] = agentScored.mean()
	}
}

// callRecord is one timed call as writeCalls writes it.
type callRecord struct {
	Query     int   `json:"query"`
	US        int64 `json:"us"`
	Selective bool  `json:"selective,omitempty"`
	Far       bool  `json:"far,omitempty"` // the query is far (FarScore)
	Timeout   bool  `json:"timeout,omitempty"`
	// TotalUS is the planner's own time of the call (Timings.TotalUS):
	// US less it was spent outside the planner (the client, NATS).
	// EmbedUS is its part before the graph's read lock (the request's
	// checks, its vector, the strategy); TotalUS less it and the stages
	// is the part after the stitch (the context state).
	TotalUS     int64 `json:"total_us,omitempty"`
	EmbedUS     int64 `json:"embed_us,omitempty"`
	PrefilterUS int64 `json:"prefilter_us,omitempty"`
	ExpandUS    int64 `json:"expand_us,omitempty"`
	RerankUS    int64 `json:"rerank_us,omitempty"`
	StitchUS    int64 `json:"stitch_us,omitempty"`
	Lists       int   `json:"lists,omitempty"`    // the prefilter's index search (IVF): lists scanned
	Scored      int   `json:"scored,omitempty"`   // … and items scored
	Asked       int   `json:"asked,omitempty"`    // … and candidates asked about (the planner's predicate)
	Allowed     int   `json:"allowed,omitempty"`  // … and of those, admitted
	Rescored    int   `json:"rescored,omitempty"` // … and candidates rescored with their float32 vectors
	Nodes       int   `json:"nodes,omitempty"`
	Edges       int   `json:"edges,omitempty"`
}

// writeCalls writes a configuration's timed calls, one JSON object per
// line in the order they ran on each thread, to CallsDir/PREFIX.jsonl
// (PREFIX its figures' prefix): for finding which queries make a tail
// and whether they make it run after run.
func (r *runner) writeCalls(prefix string, res *result) error {
	if r.o.CallsDir == "" || len(res.calls) == 0 {
		return nil
	}
	if err := os.MkdirAll(r.o.CallsDir, 0o755); err != nil {
		return err
	}
	var b []byte
	for _, c := range res.calls {
		t := c.timings
		line, err := json.Marshal(callRecord{Query: c.query, US: c.lat.Microseconds(), Selective: c.selective, Far: r.farQuery(c.query), Timeout: c.timeout,
			TotalUS: t.TotalUS, EmbedUS: t.EmbedUS, PrefilterUS: t.PrefilterUS, ExpandUS: t.ExpandUS, RerankUS: t.RerankUS, StitchUS: t.StitchUS,
			Lists: c.search.Lists, Scored: c.search.Scored, Asked: c.search.Asked, Allowed: c.search.Allowed, Rescored: c.search.Rescored, Nodes: c.nodes, Edges: c.edges})
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	return os.WriteFile(filepath.Join(r.o.CallsDir, strings.TrimSuffix(prefix, ".")+".jsonl"), b, 0o644)
}

// fasterOfTwo is the latency of each query's faster call in two passes
// over the same queries. On a VM whose host takes its vCPUs for
// milliseconds at a time (steal), a pass's p99 holds the calls such a
// stall hit, a few in a hundred when the host is busy; a query's faster
// call of two is rarely hit twice, so its p99 is the code's own tail
// (BENCHMARKS.md, forty-first round).
func fasterOfTwo(a, b *result) *dist {
	out := &dist{}
	for _, d := range fastestByQuery(a, b) {
		out.addDur(d, time.Microsecond)
	}
	return out
}

// fastestByQuery is each query's fastest call in the passes.
func fastestByQuery(passes ...*result) map[int]time.Duration {
	fastest := make(map[int]time.Duration, len(passes[0].calls))
	for _, res := range passes {
		for _, c := range res.calls {
			if d, ok := fastest[c.query]; !ok || c.lat < d {
				fastest[c.query] = c.lat
			}
		}
	}
	return fastest
}

// Thresholds of a stalled call (stalledCalls): this many times its
// query's call in the other pass, and this much longer.
const (
	stallRatio = 3
	stallExtra = time.Millisecond
)

// stalledCalls counts the queries whose call in pass a, and those whose
// call in pass b, took stallRatio times and stallExtra more than the
// same query's in the other: calls a stall hit, since the other shows
// what the query itself costs. The host's stalls come in bursts of
// consecutive calls, 1.5-64 ms each on this VM (BENCHMARKS.md,
// seventy-second round); once they pass 1% of the calls, the pass's p99
// is theirs.
func stalledCalls(a, b *result) (inA, inB int) {
	other := fastestByQuery(b)
	stalled := func(x, y time.Duration) bool { return x >= stallRatio*y && x >= y+stallExtra }
	for _, c := range a.calls {
		d, ok := other[c.query]
		switch {
		case !ok:
		case stalled(c.lat, d):
			inA++
		case stalled(d, c.lat):
			inB++
		}
	}
	return inA, inB
}

// measureNote names the collections during a measurement in a progress line
// (when the daemon shares this process, so that they are its own), and
// the share of the vCPUs' time the host took meanwhile.
func (r *runner) measureNote(res *result) string {
	var note string
	if r.d != nil {
		note = fmt.Sprintf("  %d garbage collection(s)", res.gcCycles)
	}
	if res.steal >= 0 {
		note += fmt.Sprintf("  host steal %.1f%%", 100*res.steal)
	}
	return note
}

// farQuery reports whether query i is far (FarScore), false before the
// recall pass.
func (r *runner) farQuery(i int) bool { return r.far != nil && r.far[i] }

// selective reports whether query i admits under 1% of the events.
func (r *runner) selective(i int) bool { return r.qs[i].Admitted < 0.01 }

// requests are the workload's queries as the measured requests: hops
// and the budget set, everything else as generated.
func (r *runner) requests(hops int) []planner.Request {
	qs := r.qs
	if r.o.Queries > 0 {
		qs = qs[:min(len(qs), r.o.Queries)]
	}
	out := make([]planner.Request, len(qs))
	for i, q := range qs {
		out[i] = q.Request
		out[i].Hops, out[i].Budget = hops, Budget
	}
	return out
}

// planner measures the planner: recall of the prefilter against exact
// search, then latency and throughput in-process (the daemon's planner
// and the exact baseline planner) and over NATS.
func (r *runner) planner(ctx context.Context) error {
	if r.d != nil {
		if err := r.inProcess(ctx); err != nil {
			return err
		}
	}
	return r.overNATS(ctx)
}

// indexLists records the daemon's IVF's inverted lists as the planner
// finds them (index.*): how many, their mean length, the mean length of
// the list an item lies in and the longest. The search's time follows
// the lists it walks, and the lists grow unevenly between trainings.
func (r *runner) indexLists() {
	x, ok := r.d.VectorIndex().(*wave.IVF)
	if !ok {
		return
	}
	s := x.ListStats()
	r.fig["index.lists"] = float64(s.Lists)
	r.fig["index.list_len_mean"] = float64(s.Entries) / float64(max(s.Lists, 1))
	r.fig["index.list_len_seen"] = s.Seen
	r.fig["index.list_len_max"] = float64(s.Longest)
	r.say("planner: the index's %d lists hold %.0f entries on average, %.0f as an item sees them (Σ len² / Σ len), the longest %d",
		s.Lists, r.fig["index.list_len_mean"], s.Seen, s.Longest)
}

func (r *runner) inProcess(ctx context.Context) error {
	store := r.d.Store()
	flat := wave.NewFlat(Dims)
	t := time.Now()
	flat.Grow(vectorsAtMost(store.Counts()))
	ix, err := planner.NewIndexer(store, flat, 0)
	if err != nil {
		return err
	}
	defer ix.Close()
	r.say("planner: exact baseline index built over %d vectors in %.1fs", flat.Len(), time.Since(t).Seconds())
	emb, err := embed.New(r.cfg.EmbedOptions())
	if err != nil {
		return err
	}
	if err := r.recall(ctx, store, flat, emb, r.plannerOptions()); err != nil {
		return err
	}
	r.indexLists()
	r.fig["memory.huge_pages_mb"] = float64(hugeBytes()) / 1e6
	r.say("memory: %.0f of %.0f MB resident in huge pages (memory.huge_pages)", r.fig["memory.huge_pages_mb"], float64(rss())/1e6)
	exact := planner.New(store, flat, emb, nil, r.plannerOptions())
	nExact := len(r.requests(1))
	if r.o.ExactQueries > 0 {
		nExact = min(nExact, r.o.ExactQueries)
	}
	r.fig["exact.planner.queries"] = float64(nExact)
	for _, hops := range []int{1, 2} {
		reqs := r.requests(hops)
		for _, threads := range r.o.Threads {
			for _, pl := range []struct {
				name string
				p    *planner.Planner
				n    int
			}{{"", r.d.Planner(), len(reqs)}, {"exact.", exact, nExact}} {
				if pl.name != "" && threads > 1 && !r.o.ExactThreads {
					continue
				}
				caller := r.inProcessCaller(ctx, pl.p, reqs)
				res, err := measure(ctx, threads, pl.n, len(reqs), r.selective, caller)
				if err != nil {
					return err
				}
				prefix := pl.name + key("in_process", hops, threads)
				r.putResult(prefix, res, threads == 1)
				r.say("planner in-process %-6s hops %d, %d thread(s): p50 %6.0f µs  p99 %6.0f µs  %6.0f qps%s",
					map[string]string{"": "index", "exact.": "exact"}[pl.name], hops, threads,
					res.lat.pct(50), res.lat.pct(99), res.qps, r.measureNote(res))
				if pl.name == "" && threads == 1 {
					// A second pass, for each query's faster call.
					again, err := measure(ctx, threads, pl.n, len(reqs), r.selective, caller)
					if err != nil {
						return err
					}
					// Its calls beside the first pass's: a call slow in
					// both is the query's, one slow in one a stall's.
					if err := r.writeCalls(prefix+"second_pass.", again); err != nil {
						r.say("calls of %s second pass not written: %v", prefix, err)
					}
					best := fasterOfTwo(res, again)
					r.fig.put(prefix+"best_of_2.", best, "us")
					first, second := stalledCalls(res, again)
					r.fig[prefix+"stalled_calls"] = float64(first)
					r.fig[prefix+"second_pass.stalled_calls"] = float64(second)
					r.say("planner in-process index  hops %d, each query's faster of two passes: p50 %6.0f µs  p99 %6.0f µs; calls stalled (%d× and %d ms over the other pass's): %d in the first pass, %d in the second; the second pass:%s",
						hops, best.pct(50), best.pct(99), stallRatio, stallExtra.Milliseconds(), first, second, r.measureNote(again))
				}
			}
		}
	}
	return nil
}

// inProcessCaller is measure's newCaller for p's plans of reqs in this
// process. Each client thread plans over one answer of its own, as the
// daemon's responders do (planner.PlanInto).
func (r *runner) inProcessCaller(ctx context.Context, p *planner.Planner, reqs []planner.Request) func() (func(int, *call) error, func(), error) {
	return func() (func(int, *call) error, func(), error) {
		ans := new(planner.Answer)
		return func(i int, c *call) error {
			req := reqs[i]
			if p != r.d.Planner() {
				r.d.Planner().NoteCall() // the daemon's idle-time work waits, as for its own calls
			}
			t := time.Now()
			ans.Reset()
			err := p.PlanInto(ctx, &req, ans)
			c.lat = time.Since(t)
			if err != nil {
				return fmt.Errorf("query %d: %w", i, err)
			}
			c.timings, c.search, c.nodes, c.edges, c.trunc = ans.Timings, ans.Search, len(ans.Nodes), len(ans.Edges), ans.Truncated
			return nil
		}, func() {}, nil
	}
}

// recall asks every query once through a planner whose index records
// the daemon's index's answer and the exact one: recall@10 of the
// prefilter and agreement of the run's exact answer with the
// generator's ground truth. Then it asks them all again with the index
// alone, for the index's search latency: timed beside the exact scans,
// each search would find the caches emptied by the scan before it.
func (r *runner) recall(ctx context.Context, store *particle.Store, flat *wave.Flat, emb embed.Embedder, o planner.Options) error {
	t := time.Now()
	rec := &recorder{approx: r.d.VectorIndex(), exact: newBrute(store), check: flat, flat: flat, busy: r.d.Planner()}
	if rec.exact.Len() != flat.Len() {
		return fmt.Errorf("exact search holds %d vectors, wave.Flat %d", rec.exact.Len(), flat.Len())
	}
	p := planner.New(store, rec, emb, nil, o)
	var rc recallDists
	var aLat, eLat, uLat, agree dist
	var misses recallLog
	reqs := r.requests(1)
	r.exactTop = make([][]uint64, len(reqs))
	r.far = make([]bool, len(reqs))
	const (
		checked    = 20  // queries on which brute must equal wave.Flat
		timedScans = 100 // queries on which an unfiltered scan is timed
	)
	for i := range reqs {
		if i == checked {
			rec.check = nil
		}
		if i == timedScans {
			rec.flat = nil
		}
		if err := rec.plan(ctx, p, i, &reqs[i]); err != nil {
			return err
		}
		eLat.addDur(rec.eDur, time.Microsecond)
		if rec.unfiltered > 0 {
			uLat.addDur(rec.unfiltered, time.Microsecond)
		}
		ex := ids(rec.e, 10)
		if len(ex) == 0 {
			continue
		}
		r.exactTop[i] = ex
		r.far[i] = isFar(rec.e)
		got := float64(overlap(ids(rec.a, 10), ex)) / float64(len(ex))
		rc.add(got, r.qs[i].Admitted, reqs[i].SameAgent, r.far[i])
		misses.add(store, i, got, r.qs[i].Admitted, reqs[i].SameAgent, rec.f, rec.work, rec.a, rec.e)
		if a, ok := r.agreement(store, r.qs[i].Truth, ex); ok {
			agree.add(a)
		}
	}
	if rec.mismatches > 0 {
		return fmt.Errorf("exact search differs from wave.Flat on %d of the first %d queries", rec.mismatches, checked)
	}
	rec.alone = true
	for i := range reqs {
		if err := rec.plan(ctx, p, i, &reqs[i]); err != nil {
			return err
		}
		aLat.addDur(rec.aDur, time.Microsecond)
	}
	r.fig["prefilter.recall_at_10"] = rc.all.mean()
	r.fig["prefilter.recall_at_10_p5"] = rc.all.pct(5)
	r.fig["prefilter.recall_at_10_min"] = rc.all.pct(0)
	r.fig["prefilter.recall_at_10_selective"] = rc.selective.mean()
	r.fig["prefilter.selective_queries"] = float64(rc.selective.n())
	r.fig["prefilter.recall_at_10_same_agent"] = rc.sameAgent.mean()
	r.fig["prefilter.same_agent_queries"] = float64(rc.sameAgent.n())
	r.fig["prefilter.recall_at_10_far"] = rc.far.mean()
	r.fig["prefilter.far_queries"] = float64(rc.far.n())
	r.fig["prefilter.queries"] = float64(rc.all.n())
	r.fig["prefilter.missed_at_10"] = float64(misses.missed)
	r.fig["prefilter.missed_nodes_at_10"] = float64(misses.nodes)
	if r.o.CallsDir != "" {
		if err := misses.write(r.o.CallsDir); err != nil {
			return fmt.Errorf("recall records: %w", err)
		}
	}
	r.fig.put("prefilter.search_", &aLat, "us")
	r.fig.put("exact.search_filter_last_", &eLat, "us")
	r.fig.put("exact.search_unfiltered_", &uLat, "us")
	r.fig["truth.agreement_at_10"] = agree.mean()
	r.say("prefilter: recall@10 %.4f over %d queries (5th pct %.2f; %d admitting < 1%%: %.4f; %d same-agent: %.4f; of the exact hits missed, %d, %d are nodes); index search p50 %.0f µs p99 %.0f µs; exact filter-last p99 %.0f µs, unfiltered flat scan p99 %.0f µs; exact agrees with the generated truth %.4f (%.1fs)",
		rc.all.mean(), rc.all.n(), rc.all.pct(5), rc.selective.n(), rc.selective.mean(), rc.sameAgent.n(), rc.sameAgent.mean(), misses.missed, misses.nodes, aLat.pct(50), aLat.pct(99), eLat.pct(99), uLat.pct(99), agree.mean(), time.Since(t).Seconds())
	return nil
}

// plannerOptions are the options of the planners the bench makes
// beside the daemon's (the exact baseline, the recall passes): the
// daemon's own.
func (r *runner) plannerOptions() planner.Options {
	return planner.Options{HypothesisBelow: r.cfg.Planner.HypothesisBelow, PerNodeFanout: r.cfg.Planner.PerNodeFanout}
}

// recallDists are a recall pass's recall@10 per query: over all queries,
// those whose filters admit under 1% of the events, the same-agent ones,
// the far ones (FarScore).
type recallDists struct{ all, selective, sameAgent, far dist }

func (d *recallDists) add(recall, admitted float64, sameAgent, far bool) {
	d.all.add(recall)
	if admitted < 0.01 {
		d.selective.add(recall)
	}
	if sameAgent {
		d.sameAgent.add(recall)
	}
	if far {
		d.far.add(recall)
	}
}

// FarScore splits the queries by the cosine of their exact 10th best
// hit under their filters. A far query's filters leave it nothing close:
// its best hits are near ties far below any near match, which the
// 4-bit codes' residuals decide, so its search probes lists until the
// bound can rule out the rest, and that takes most of them (on the
// medium workload 57–59 lists on average against 19, and 0.94 of their
// exact top 10 found against 1.00). There the 10th best lies below 0.2
// (165 of 1,000 queries) or above 0.4 (824), 11 queries in between
// (BENCHMARKS.md, fifty-sixth round).
const FarScore = 0.3

// isFar reports whether exact, a query's exact hits best first, make it
// far: its 10th best (or last) scores below FarScore.
func isFar(exact []wave.Hit) bool {
	return len(exact) > 0 && exact[min(10, len(exact))-1].Score < FarScore
}

// recallAfterReopen asks the recall pass's queries again, of the index
// the reopened daemon serves (read from its snapshot, its splits read
// from theirs or filled in the background), against the exact answers of that pass: the index
// a restarted daemon serves is built another way than ingest's. Nothing
// without a recall pass.
func (r *runner) recallAfterReopen(ctx context.Context) error {
	if r.exactTop == nil || r.d == nil {
		return nil
	}
	t := time.Now()
	emb, err := embed.New(r.cfg.EmbedOptions())
	if err != nil {
		return err
	}
	rec := &recorder{approx: r.d.VectorIndex(), alone: true, busy: r.d.Planner()}
	p := planner.New(r.d.Store(), rec, emb, nil, r.plannerOptions())
	var rc recallDists
	reqs := r.requests(1)
	for i, ex := range r.exactTop {
		if len(ex) == 0 {
			continue
		}
		if err := rec.plan(ctx, p, i, &reqs[i]); err != nil {
			return fmt.Errorf("after the reopen: %w", err)
		}
		rc.add(float64(overlap(ids(rec.a, 10), ex))/float64(len(ex)), r.qs[i].Admitted, reqs[i].SameAgent, r.far[i])
	}
	r.fig["reopen.recall_at_10"] = rc.all.mean()
	r.fig["reopen.recall_at_10_selective"] = rc.selective.mean()
	r.fig["reopen.recall_at_10_same_agent"] = rc.sameAgent.mean()
	r.fig["reopen.recall_at_10_far"] = rc.far.mean()
	r.say("after the reopen: prefilter recall@10 %.4f over %d queries (%d admitting < 1%%: %.4f; %d same-agent: %.4f) against the recall pass's exact answers (%.1fs)",
		rc.all.mean(), rc.all.n(), rc.selective.n(), rc.selective.mean(), rc.sameAgent.n(), rc.sameAgent.mean(), time.Since(t).Seconds())
	// The reopened daemon's planner, as the planner phase measures it
	// before: 1 hop, one thread, two passes.
	caller := r.inProcessCaller(ctx, r.d.Planner(), reqs)
	first, err := measure(ctx, 1, len(reqs), len(reqs), r.selective, caller)
	if err != nil {
		return fmt.Errorf("after the reopen: %w", err)
	}
	again, err := measure(ctx, 1, len(reqs), len(reqs), r.selective, caller)
	if err != nil {
		return fmt.Errorf("after the reopen: %w", err)
	}
	best := fasterOfTwo(first, again)
	r.fig.put("reopen.planner.in_process.", &first.lat, "us")
	r.fig.put("reopen.planner.in_process.best_of_2.", best, "us")
	// How much of the reopened daemon's memory is in huge pages as the
	// timing ends: the keeper collapses its heap only once it idles.
	r.fig["reopen.memory.huge_pages_mb"] = float64(hugeBytes()) / 1e6
	r.say("after the reopen: planner in-process index hops 1, 1 thread: p50 %6.0f µs  p99 %6.0f µs; each query's faster of two passes: p50 %6.0f µs  p99 %6.0f µs%s; %.0f of %.0f MB resident in huge pages",
		first.lat.pct(50), first.lat.pct(99), best.pct(50), best.pct(99), r.measureNote(first), r.fig["reopen.memory.huge_pages_mb"], float64(rss())/1e6)
	return nil
}

// agreement compares the run's exact top 10 with the generator's ground
// truth on event edges (edges between two entities; the generator knows
// only those): the share of the exact answer's m event edges that are
// the truth's first m. It validates the generator's model of the filter.
func (r *runner) agreement(store *particle.Store, truth []Truth, exact []uint64) (float64, bool) {
	var events []uint64
	store.Read(func(rd particle.Reader) {
		for _, id := range exact {
			if e := rd.EdgeBySeq(id); e != nil {
				s, o := rd.Node(e.Source), rd.Node(e.Target)
				if s != nil && o != nil && s.Type == particle.NodeEntity && o.Type == particle.NodeEntity {
					events = append(events, id)
				}
			}
		}
	})
	if len(events) == 0 {
		return 0, false
	}
	want := r.truthSeqs(store, truth, len(events))
	return float64(overlap(events, want)) / float64(len(events)), true
}

func ids(hs []wave.Hit, k int) []uint64 {
	out := make([]uint64, 0, k)
	for _, h := range hs[:min(k, len(hs))] {
		out = append(out, h.ID)
	}
	return out
}

func overlap(a, b []uint64) int {
	n := 0
	for _, x := range a {
		if slices.Contains(b, x) {
			n++
		}
	}
	return n
}

// truthSeqs maps the generator's ground truth (event edges named by
// their subject and object) to the store's compact ids.
func (r *runner) truthSeqs(store *particle.Store, truth []Truth, k int) []uint64 {
	var out []uint64
	store.Read(func(rd particle.Reader) {
		for _, t := range truth[:min(k, len(truth))] {
			s := rd.Lookup(particle.DefaultNamespace, particle.NodeEntity, t.Subject)
			o := rd.Lookup(particle.DefaultNamespace, particle.NodeEntity, t.Object)
			if s == nil || o == nil {
				continue
			}
			rd.Out(s.ID, func(e *particle.Edge) bool {
				if e.Target == o.ID {
					out = append(out, e.Seq)
					return false
				}
				return true
			})
		}
	})
	return out
}

// natsFormat is a way of asking the planner over NATS: the answer
// format, the content coding asked for in Accept-Encoding ("" for
// none), and the figure names' mode.
type natsFormat struct{ format, coding, mode, label string }

// natsFormats are the ways measured over NATS: JSON requests and
// answers (planner.nats.*); JSON answers compressed with s2
// (planner.nats_s2.*, since the sixty-ninth round of BENCHMARKS.md;
// each reply decoded inside its timing); and msgpack requests and
// answers as a control loop would send and ask for
// (planner.nats_msgpack.*; before the forty-eighth round its requests
// were JSON).
var natsFormats = []natsFormat{
	{"", "", "nats", ""},
	{"", contentenc.S2, "nats_s2", " JSON+s2"},
	{"msgpack", "", "nats_msgpack", " msgpack"},
}

// overNATS measures planner requests over NATS request/reply on
// loopback TCP, one connection per client thread, in each of
// natsFormats.
func (r *runner) overNATS(ctx context.Context) error {
	for _, f := range natsFormats {
		if err := r.overNATSIn(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// overNATSIn measures planner requests asking for answers in f and
// stores the figures under planner.<f.mode> (f.label names it in the
// progress lines). The first reply of each run is checked to be an
// answer in that format (outside the timing).
func (r *runner) overNATSIn(ctx context.Context, f natsFormat) error {
	format, mode, label := f.format, f.mode, f.label
	subj := r.prefix + ".planner.context"
	for _, hops := range []int{1, 2} {
		reqs := r.requests(hops)
		bodies := make([][]byte, len(reqs))
		for i := range reqs {
			reqs[i].Format = format
			if format == "msgpack" { // msgpack both ways, as a control loop asks
				bodies[i] = reqs[i].AppendMsgpack(nil)
				continue
			}
			b, err := json.Marshal(&reqs[i])
			if err != nil {
				return err
			}
			bodies[i] = b
		}
		var replyBytes, replies, coded atomic.Int64
		for _, threads := range r.o.Threads {
			replies0 := r.replyTimes()
			res, err := measure(ctx, threads, len(bodies), len(bodies), r.selective, r.natsCaller(subj, bodies, f.coding, func(i int, m *nats.Msg, wire int, c *call) error {
				if st := m.Header.Get("Status"); st != "" {
					return fmt.Errorf("query %d over NATS: status %s: %s", i, st, m.Data)
				}
				replyBytes.Add(int64(wire))
				replies.Add(1)
				if m.Header.Get(contentenc.ContentHeader) != "" {
					coded.Add(1)
				}
				if i == 0 {
					if err := checkAnswer(m.Data, format); err != nil {
						return err
					}
				}
				t, err := answerTimings(m.Data, format)
				if err != nil {
					return fmt.Errorf("query %d over NATS: %w", i, err)
				}
				c.timings = t
				return nil
			}))
			if err != nil {
				return err
			}
			prefix := key(mode, hops, threads)
			r.putResult(prefix, res, false)
			planned, rest := r.putDaemonShare(prefix, res)
			if in, ok := r.fig[key("in_process", hops, threads)+"p99_us"]; ok {
				r.fig[prefix+"overhead_p99_us"] = res.lat.pct(99) - in
			}
			daemonPart := ""
			if rt := r.replyTimes().Sub(replies0); rt.Replies > 0 {
				enc := float64(rt.Encode.Microseconds()) / float64(rt.Replies)
				resp := float64(rt.Respond.Microseconds()) / float64(rt.Replies)
				r.fig[prefix+"daemon_encode_mean_us"], r.fig[prefix+"daemon_reply_mean_us"] = enc, resp
				daemonPart = fmt.Sprintf("  (daemon: encoding %.0f µs, reply to NATS %.0f µs, mean)", enc, resp)
			}
			r.say("planner over NATS%-8s hops %d, %d thread(s): p50 %6.0f µs  p99 %6.0f µs  %6.0f qps  %d timeouts%s; per call, the daemon's planner p50 %.0f p99 %.0f µs, the rest p50 %.0f p99 %.0f µs%s",
				label, hops, threads, res.lat.pct(50), res.lat.pct(99), res.qps, res.timeouts, daemonPart,
				planned.pct(50), planned.pct(99), rest.pct(50), rest.pct(99), r.measureNote(res))
		}
		if n := replies.Load(); n > 0 {
			if f.coding != "" {
				r.fig[key(mode, hops, 1)+"coded_share"] = float64(coded.Load()) / float64(n)
				r.fig[key(mode, hops, 1)+"reply_bytes_mean"] = float64(replyBytes.Load()) / float64(n)
			}
			if err := r.natsFloor(ctx, key(mode, hops, 1)+"floor.", label, hops, bodies, int(replyBytes.Load()/n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// replyTimes reads the in-process daemon's planner reply times (zero
// against an external daemon, whose figures then go without them).
func (r *runner) replyTimes() daemon.ReplyTimes {
	if r.d == nil {
		return daemon.ReplyTimes{}
	}
	return r.d.ReplyTimes()
}

// natsCaller is measure's newCaller for requests of bodies to subj,
// each on its own connection: a request's latency is timed, a timeout
// counted, and a reply checked by check (which may note in c what the
// reply says, outside the timing). With a coding, each request asks
// for it in Accept-Encoding, and a reply that comes in it is decoded
// inside the timing (as a client must before it reads the answer);
// check then sees the decoded body, and wire is the bytes received.
func (r *runner) natsCaller(subj string, bodies [][]byte, coding string, check func(i int, m *nats.Msg, wire int, c *call) error) func() (func(int, *call) error, func(), error) {
	return func() (func(int, *call) error, func(), error) {
		nc, err := nats.Connect(r.natsURL, nats.Name("ctxgraph-bench-planner"))
		if err != nil {
			return nil, nil, err
		}
		var hdr nats.Header
		if coding != "" {
			hdr = nats.Header{contentenc.AcceptHeader: {coding}}
		}
		var plain []byte // the decoded reply, reused
		return func(i int, c *call) error {
			t := time.Now()
			var m *nats.Msg
			var err error
			if hdr == nil {
				m, err = nc.Request(subj, bodies[i], requestTimeout)
			} else {
				m, err = nc.RequestMsg(&nats.Msg{Subject: subj, Data: bodies[i], Header: hdr}, requestTimeout)
			}
			var wire int
			if err == nil {
				wire = len(m.Data)
				if got := m.Header.Get(contentenc.ContentHeader); got != "" {
					if plain, err = contentenc.Decode(plain[:0], m.Data, got); err == nil {
						m.Data = plain
					}
				}
			}
			c.lat = time.Since(t)
			if errors.Is(err, nats.ErrTimeout) {
				c.timeout = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("request %d to %s: %w", i, subj, err)
			}
			return check(i, m, wire, c)
		}, nc.Close, nil
	}
}

// natsFloor measures what NATS request/reply alone costs the requests
// (the same bodies) with replies of the answers' mean size, from a
// responder that does nothing else: the floor under the planner's NATS
// figures on this machine and server. One client thread; figures under
// prefix.
func (r *runner) natsFloor(ctx context.Context, prefix, label string, hops int, bodies [][]byte, size int) error {
	rc, err := nats.Connect(r.natsURL, nats.Name("ctxgraph-bench-echo"))
	if err != nil {
		return fmt.Errorf("NATS floor: %w", err)
	}
	defer rc.Close()
	subj := "_ctxgraph_bench.echo"
	reply := make([]byte, size)
	sub, err := rc.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond(reply) })
	if err != nil {
		return fmt.Errorf("NATS floor: %w", err)
	}
	defer sub.Unsubscribe()
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("NATS floor: %w", err)
	}
	res, err := measure(ctx, 1, len(bodies), len(bodies), r.selective, r.natsCaller(subj, bodies, "", func(i int, m *nats.Msg, _ int, _ *call) error {
		if len(m.Data) != size {
			return fmt.Errorf("NATS floor, request %d: a reply of %d bytes, want %d", i, len(m.Data), size)
		}
		return nil
	}))
	if err != nil {
		return err
	}
	r.putResult(prefix, res, false)
	r.fig[prefix+"reply_bytes"] = float64(size)
	r.say("NATS request/reply alone%-8s hops %d (%d-byte replies): p50 %6.0f µs  p99 %6.0f µs",
		label, hops, size, res.lat.pct(50), res.lat.pct(99))
	return nil
}

// putDaemonShare splits each NATS call of res by the planner's own time
// in the daemon (the answer's timings, total): that time, and the rest of
// the call (decoding the request, encoding and sending the answer, the
// transport and the wake-ups between), under PREFIX.daemon_planner_*
// and PREFIX.outside_planner_*.
func (r *runner) putDaemonShare(prefix string, res *result) (planned, rest dist) {
	for _, c := range res.calls {
		if c.timeout {
			continue
		}
		us := float64(c.timings.TotalUS)
		planned.add(us)
		rest.add(float64(c.lat.Microseconds()) - us)
	}
	r.fig.put(prefix+"daemon_planner_", &planned, "us")
	r.fig.put(prefix+"outside_planner_", &rest, "us")
	return planned, rest
}

// answerTimings reads the planner's timings from a reply in format.
func answerTimings(data []byte, format string) (planner.Timings, error) {
	if format == "msgpack" {
		return planner.MsgpackAnswerTimings(data)
	}
	return planner.JSONAnswerTimings(data)
}

// checkAnswer decodes a reply in format, so that a run over NATS
// measures answers and not errors or another format.
func checkAnswer(data []byte, format string) error {
	var err error
	if format == "msgpack" {
		_, err = planner.DecodeMsgpackAnswer(data)
	} else {
		var a planner.Answer
		err = json.Unmarshal(data, &a)
	}
	if err != nil {
		return fmt.Errorf("a reply over NATS is not an answer: %w", err)
	}
	return nil
}
