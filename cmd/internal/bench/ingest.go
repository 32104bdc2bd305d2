package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// pubMsg is one message ready to publish: its subject, dedupe id and the
// exact body from the workload file.
type pubMsg struct {
	subj, id string
	body     []byte
	ep       string // the episode (of a span: the one it consolidates)
	steps    int    // the steps it carries: 1 for a step, more for a steps message
	idx      int    // the index of its last step
	end      bool
}

// workload is the publishable part of a workload directory.
type workload struct {
	msgs  []pubMsg
	spans []pubMsg
	steps int
	// bulkEnd and pacedStart cut msgs into the bulk, mixed and paced
	// phases (cut).
	bulkEnd, pacedStart int
}

// The wire formats a run can send the workload's messages in
// (RunOptions.Wire).
const (
	WireJSON    = "json"
	WireMsgpack = "msgpack"
)

// loadWorkload reads the workload's messages and spans, written as
// msgpack when asMsgpack is set.
func loadWorkload(dir, prefix string, asMsgpack bool) (*workload, error) {
	w := &workload{}
	err := readJSONL(filepath.Join(dir, MessagesFile), func(b []byte) error {
		h, err := messageHead(b)
		if err != nil {
			return err
		}
		m := rlds.Message{Kind: h.Kind, Agent: h.Agent, EpisodeID: h.EpisodeID}
		p := pubMsg{ep: h.EpisodeID, end: h.Kind == rlds.KindEpisodeEnd}
		if p.body, err = wireBody(b, asMsgpack); err != nil {
			return err
		}
		if h.Kind == rlds.KindStep {
			m.Step = &rlds.Step{Index: h.Index}
			p.steps, p.idx = 1, h.Index
			w.steps++
		}
		p.subj, p.id = m.Subject(prefix), m.MsgID()
		w.msgs = append(w.msgs, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var s struct {
		ID        string `json:"id"`
		Level     int    `json:"level"`
		EpisodeID string `json:"episode_id"`
	}
	err = readJSONL(filepath.Join(dir, SpansFile), func(b []byte) error {
		s.EpisodeID = ""
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		p := pubMsg{subj: fmt.Sprintf("%s.cms.%d", prefix, s.Level), id: s.ID, ep: s.EpisodeID, body: append([]byte(nil), b...)}
		if asMsgpack {
			sp, err := cms.Decode(b, 0)
			if err != nil {
				return err
			}
			p.body = sp.AppendMsgpack(nil)
		}
		w.spans = append(w.spans, p)
		return nil
	})
	if err == nil {
		w.pack()
	}
	return w, err
}

// cut divides the messages into the phases: the bulk phase's first,
// then the mixed phase's mixedShare of them (none if negative), then
// the paced phase's visibilityShare.
func (w *workload) cut(visibilityShare, mixedShare float64) {
	w.bulkEnd = int(float64(len(w.msgs)) * (1 - visibilityShare - max(mixedShare, 0)))
	w.pacedStart = int(float64(len(w.msgs)) * (1 - visibilityShare))
}

// groupBulk sends the bulk phase's steps n to a message: each episode's
// consecutive steps become steps messages (rlds.StepGrouper), as an
// upload or a controller catching up would send them. The mixed and
// paced phases keep one step a message, as a live controller sends.
func (w *workload) groupBulk(n int, prefix string, asMsgpack bool) error {
	if n <= 1 {
		return nil
	}
	bulk := w.msgs[:w.bulkEnd]
	grouped := make([]pubMsg, 0, len(bulk)/n+len(bulk)/8)
	g := rlds.StepGrouper{N: n}
	add := func(ms []*rlds.Message) error {
		for _, m := range ms {
			p := pubMsg{subj: m.Subject(prefix), id: m.MsgID(), ep: m.EpisodeID, end: m.Kind == rlds.KindEpisodeEnd}
			switch {
			case m.Step != nil:
				p.steps, p.idx = 1, m.Step.Index
			case len(m.Steps) > 0:
				p.steps, p.idx = len(m.Steps), m.Steps[len(m.Steps)-1].Index
			}
			var err error
			if asMsgpack {
				p.body, err = m.AppendMsgpack(nil)
			} else {
				p.body, err = marshalMessage(m)
			}
			if err != nil {
				return err
			}
			grouped = append(grouped, p)
		}
		return nil
	}
	for _, p := range bulk {
		m, err := rlds.DecodeMessage(p.body)
		if err != nil {
			return fmt.Errorf("workload message %s: %w", p.id, err)
		}
		if err := add(g.Add(m)); err != nil {
			return err
		}
	}
	if err := add(g.Flush()); err != nil {
		return err
	}
	rest := w.msgs[w.bulkEnd:]
	w.msgs = append(grouped, rest...)
	w.pacedStart += len(grouped) - w.bulkEnd
	w.bulkEnd = len(grouped)
	w.pack()
	return nil
}

// wireBody is the body to publish for the workload's JSON message b: a
// copy of b, or its msgpack.
func wireBody(b []byte, asMsgpack bool) ([]byte, error) {
	if !asMsgpack {
		return append([]byte(nil), b...), nil
	}
	m, err := rlds.DecodeMessage(b)
	if err != nil {
		return nil, err
	}
	return m.AppendMsgpack(nil)
}

// pack moves the messages' subjects, ids and episode ids into one
// allocation. The workload lives through the whole run beside the daemon
// it measures, and made one by one they were three objects a message
// (a few hundred thousand on medium) for every collection to mark: the
// daemon's collections, in the same process, that the visibility tail
// follows. A controller publishing from its own process adds none.
func (w *workload) pack() {
	particle.PackStrings(func(each func(*string)) {
		for _, l := range [][]pubMsg{w.msgs, w.spans} {
			for i := range l {
				each(&l[i].subj)
				each(&l[i].id)
				each(&l[i].ep)
			}
		}
	})
}

// head is what publishing needs of a wire message: its subject and id.
type head struct {
	Kind      rlds.Kind `json:"kind"`
	Agent     string    `json:"agent"`
	EpisodeID string    `json:"episode_id"`
	Index     int       `json:"-"`
	Step      *struct {
		Index int `json:"index"`
	} `json:"step"`
}

// messageHead reads the head of a wire message. The generator writes
// kind, agent, episode_id and step.index first, so a look at the start
// of the line usually suffices (decoding a whole step with its vectors
// takes a hundred times longer); otherwise it decodes the line.
func messageHead(b []byte) (head, error) {
	var h head
	start := b[:min(len(b), 256)]
	str := func(key string) (string, bool) {
		i := bytes.Index(start, []byte(`"`+key+`":"`))
		if i < 0 {
			return "", false
		}
		rest := start[i+len(key)+4:]
		j := bytes.IndexByte(rest, '"')
		if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
			return "", false
		}
		return string(rest[:j]), true
	}
	kind, ok1 := str("kind")
	agent, ok2 := str("agent")
	ep, ok3 := str("episode_id")
	h.Kind, h.Agent, h.EpisodeID = rlds.Kind(kind), agent, ep
	ok := ok1 && ok2 && ok3 && bytes.HasPrefix(b, []byte(`{"kind":"`))
	switch h.Kind {
	case rlds.KindEpisodeStart, rlds.KindEpisodeEnd:
	case rlds.KindStep:
		i := bytes.Index(start, []byte(`"step":{"index":`))
		if i < 0 {
			ok = false
			break
		}
		n, j := 0, i+len(`"step":{"index":`)
		for ; j < len(start) && start[j] >= '0' && start[j] <= '9'; j++ {
			n = n*10 + int(start[j]-'0')
		}
		h.Index = n
		ok = ok && j < len(start) && (start[j] == ',' || start[j] == '}')
	default:
		ok = false
	}
	if ok {
		return h, nil
	}
	h = head{}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, err
	}
	if h.Step != nil {
		h.Index = h.Step.Index
	}
	return h, nil
}

// probe is one step whose visibility is measured: published at pub,
// committed (in the graph the planner reads) at view, and in the vector
// index by index. mark is the index mark of the batch that committed it
// (in-process).
type probe struct {
	idx              int
	pub, view, index time.Time
	mark             uint64
}

// probes tracks the steps being timed. In-process, the store tells it
// of every commit; the index time is when the daemon's indexer has
// applied the batch that committed the probe's step (its index mark),
// whatever was committed after it. Against an external daemon it polls
// GET /v1/episodes/{id} (view time only).
type probes struct {
	mu sync.Mutex
	on atomic.Bool
	// mark reads the daemon's index mark (nil against an external
	// daemon).
	mark     func() uint64
	pending  map[string][]*probe // by episode, in step order
	awaiting []*probe            // committed, not yet known indexed
	inflight int                 // taken from awaiting by the watcher
	done     []*probe
	wake     chan struct{}
}

func newProbes() *probes {
	return &probes{pending: map[string][]*probe{}, wake: make(chan struct{}, 1)}
}

// add registers a step about to be published.
func (p *probes) add(ep string, idx int) {
	pr := &probe{idx: idx, pub: time.Now()}
	p.mu.Lock()
	p.pending[ep] = append(p.pending[ep], pr)
	p.mu.Unlock()
}

// seen records that episode ep now holds steps [0, steps), committed in
// the batch of index mark mark.
func (p *probes) seen(ep string, steps int, now time.Time, mark uint64) {
	list := p.pending[ep]
	i := 0
	for ; i < len(list) && list[i].idx < steps; i++ {
		list[i].view, list[i].mark = now, mark
		p.awaiting = append(p.awaiting, list[i])
	}
	if i == 0 {
		return
	}
	if i == len(list) {
		delete(p.pending, ep)
	} else {
		p.pending[ep] = list[i:]
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// onCommit is the store subscription.
func (p *probes) onCommit(ch particle.Changes) {
	if !p.on.Load() {
		return
	}
	now := time.Now()
	var mark uint64
	if p.mark != nil {
		mark = p.mark()
	}
	p.mu.Lock()
	for _, ep := range ch.Episodes {
		if _, ok := p.pending[ep.ID]; ok {
			p.seen(ep.ID, ep.Steps, now, mark)
		}
	}
	p.mu.Unlock()
}

// watchIndex stamps committed probes with the time the indexer applied
// their batch (in commit order: marks only grow), until ctx ends.
func (p *probes) watchIndex(ctx context.Context, d *daemon.Daemon) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		p.mu.Lock()
		batch := p.awaiting
		p.awaiting = nil
		p.inflight = len(batch)
		p.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		for len(batch) > 0 {
			n := len(batch) // against an external daemon: all, unstamped
			if d != nil {
				mark := batch[0].mark
				if d.WaitIndexedThrough(ctx, mark) != nil {
					return
				}
				for n = 1; n < len(batch) && batch[n].mark <= mark; n++ {
				}
			}
			now := time.Now()
			p.mu.Lock()
			for _, pr := range batch[:n] {
				if d != nil {
					pr.index = now
				}
				p.done = append(p.done, pr)
			}
			p.inflight -= n
			p.mu.Unlock()
			batch = batch[n:]
		}
	}
}

// poll asks an external daemon for the episodes with pending probes
// every few milliseconds, until ctx ends.
func (p *probes) poll(ctx context.Context, httpURL string) {
	c := &http.Client{Timeout: 2 * time.Second}
	for ctx.Err() == nil {
		p.mu.Lock()
		eps := make([]string, 0, len(p.pending))
		for ep := range p.pending {
			eps = append(eps, ep)
		}
		p.mu.Unlock()
		for _, ep := range eps {
			steps, err := episodeSteps(ctx, c, httpURL, ep)
			if err != nil {
				continue
			}
			now := time.Now()
			p.mu.Lock()
			p.seen(ep, steps, now, 0)
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func episodeSteps(ctx context.Context, c *http.Client, base, ep string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/episodes/"+url.PathEscape(ep), nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("episode %s: %s", ep, resp.Status)
	}
	var e struct {
		Steps int `json:"steps"`
	}
	err = json.NewDecoder(resp.Body).Decode(&e)
	return e.Steps, err
}

// take returns the probes finished so far and forgets them.
func (p *probes) take() []*probe {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.done
	p.done = nil
	return out
}

// drain waits (up to 30s) until every probe added is finished.
func (p *probes) drain() {
	left := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		n := len(p.awaiting) + p.inflight
		for _, l := range p.pending {
			n += len(l)
		}
		return n
	}
	for deadline := time.Now().Add(30 * time.Second); left() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// bulkCut is how many of the workload's messages the bulk phase sends;
// the mixed phase and then the paced one send the rest.
func (r *runner) bulkCut() int { return r.w.bulkEnd }

// pacedCut is where the paced phase's messages start (the mixed phase's
// lie between bulkCut and it).
func (r *runner) pacedCut() int { return r.w.pacedStart }

// ingest publishes the workload as a fleet's controllers would: a bulk
// phase as fast as the daemon acknowledges (throughput), then a paced
// phase below capacity with every step timed (visibility). Spans follow
// the episodes they consolidate once those are applied (they name them).
func (r *runner) ingest(ctx context.Context) error {
	w := r.w
	cut, pacedCut := r.bulkCut(), r.pacedCut()
	bulk, mixed, paced := w.msgs[:cut], w.msgs[cut:pacedCut], w.msgs[pacedCut:]
	endedIn := map[string]int{} // episode -> phase its end was sent in
	for i, m := range w.msgs {
		if m.end {
			endedIn[m.ep] = 0
			if i >= cut {
				endedIn[m.ep] = 1
			}
			if i >= pacedCut {
				endedIn[m.ep] = 2
			}
		}
	}
	var spans [4][]pubMsg // after bulk, after mixed, after paced, last (level 1)
	for _, s := range w.spans {
		if ph, ok := endedIn[s.ep]; ok && s.ep != "" {
			spans[ph] = append(spans[ph], s)
		} else {
			spans[3] = append(spans[3], s)
		}
	}

	pr := newProbes()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.d != nil {
		pr.mark = r.d.IndexMark
		r.d.Store().Subscribe(pr.onCommit)
		go pr.watchIndex(pctx, r.d)
	} else if r.httpURL != "" {
		go pr.watchIndex(pctx, nil)
		go pr.poll(pctx, r.httpURL)
	}
	pr.on.Store(true)
	defer pr.on.Store(false)

	// What the graph store writes per step, in each phase (in process).
	written := func() particle.Written {
		if r.d == nil {
			return particle.Written{}
		}
		return r.d.Store().Written()
	}
	// How the graph store's writer spent each phase (in process).
	updates := func() particle.UpdateTimes {
		if r.d == nil {
			return particle.UpdateTimes{}
		}
		return r.d.Store().UpdateTimes()
	}
	w0, u0 := written(), updates()

	// Bulk: as fast as the daemon acknowledges; a sample of steps timed.
	bulkSteps := countSteps(bulk)
	every := max(1, stepMessages(bulk)/2000)
	r.say("ingest: bulk phase, %d messages (%d steps) as fast as acknowledged", len(bulk), bulkSteps)
	tracePath, stopTrace, err := r.startTrace("ingest.bulk")
	if err != nil {
		return err
	}
	defer stopTrace()
	bulkGC := readGC()
	bulkUsage, t0 := readUsage(), time.Now()
	pub := client.NewPublisher(r.js, r.prefix, 0)
	var bytes int64
	for i, m := range bulk {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if m.steps > 0 && i%every == 0 {
			pr.add(m.ep, m.idx)
		}
		if err := pub.PublishRaw(ctx, m.subj, m.id, m.body); err != nil {
			return err
		}
		bytes += int64(len(m.body))
	}
	if err := pub.Flush(ctx); err != nil {
		return err
	}
	published := time.Since(t0)
	for i := range bulk {
		bulk[i].body = nil // acknowledged: the stream has it
	}
	if err := r.waitSteps(ctx, bulkSteps); err != nil {
		return err
	}
	took := time.Since(t0)
	stopTrace()
	r.writtenFigures("ingest.bulk_", written().Sub(w0), bulkSteps)
	r.writerFigures("ingest.bulk_", updates().Sub(u0), bulkSteps, took)
	if err := r.writerSchedFigures("ingest.bulk_", tracePath, bulkSteps); err != nil {
		return err
	}
	if r.d != nil {
		r.fig["ingest.bulk_allocated_bytes_per_step"] = float64(readGC().allocated-bulkGC.allocated) / float64(max(bulkSteps, 1))
	}
	r.fig["ingest.steps"] = float64(bulkSteps)
	r.fig["ingest.seconds"] = took.Seconds()
	r.fig["ingest.steps_per_s"] = float64(bulkSteps) / took.Seconds()
	if u := readUsage().sub(bulkUsage); r.d != nil && u.cpu() > 0 {
		// The process's CPU: the daemon's, the NATS server's and the
		// bench's publishing alike. Of it, the system's part and the
		// pages faulted in: a fresh daemon's heap grows through the
		// phase, and Badger writes its logs through memory maps, a page
		// fault each new page (10-20 µs a page on a VM whose host takes
		// back the guest's free memory: BENCHMARKS.md, sixty-second
		// round).
		steps := float64(max(bulkSteps, 1))
		r.fig["ingest.bulk_cpu_us_per_step"] = float64(u.cpu().Microseconds()) / steps
		r.fig["ingest.bulk_cpu_cores"] = u.cpu().Seconds() / took.Seconds()
		r.fig["ingest.bulk_system_cpu_us_per_step"] = float64(u.system.Microseconds()) / steps
		r.fig["ingest.bulk_faults_per_step"] = float64(u.minorFaults) / steps
	}
	r.fig["ingest.messages_per_s"] = float64(len(bulk)) / took.Seconds()
	r.fig["ingest.mb_per_s"] = float64(bytes) / 1e6 / took.Seconds()
	r.fig["ingest.publish_steps_per_s"] = float64(bulkSteps) / published.Seconds()
	if r.d != nil {
		t := time.Now()
		if err := r.d.WaitIndexed(ctx); err != nil {
			return err
		}
		r.fig["ingest.index_catchup_ms"] = ms(time.Since(t))
	}
	pr.drain()
	r.lagFigures("ingest.bulk_", pr, false, nil)
	r.say("ingest: %d steps in %.1fs = %.0f steps/s (%.1f MB/s; publishing alone %.0f steps/s); index caught up %.0f ms later",
		bulkSteps, took.Seconds(), r.fig["ingest.steps_per_s"], r.fig["ingest.mb_per_s"], r.fig["ingest.publish_steps_per_s"],
		r.fig["ingest.index_catchup_ms"])

	if err := r.sendSpans(ctx, spans[0], "after bulk"); err != nil {
		return err
	}

	// Mixed: the fleet streams while the planner is asked.
	rate := r.o.VisibilityRate
	if rate <= 0 {
		rate = min(20000, r.fig["ingest.steps_per_s"]/2)
	}
	if err := r.mixed(ctx, mixed, rate, bulkSteps+countSteps(mixed)); err != nil {
		return err
	}
	if err := r.sendSpans(ctx, spans[1], "after the mixed phase"); err != nil {
		return err
	}

	// Paced: every step timed, below capacity.
	pacedSteps := countSteps(paced)
	w0, u0 = written(), updates()
	msgRate := rate * float64(len(paced)) / float64(max(pacedSteps, 1))
	r.say("ingest: paced phase, %d messages (%d steps) at %.0f steps/s, every step timed", len(paced), pacedSteps, rate)
	pub = client.NewPublisher(r.js, r.prefix, msgRate)
	gc0 := readGC()
	var marks *markPhases
	if r.d != nil {
		// The daemon's collections are this process's: each step's wait
		// is checked against their mark phases below.
		mctx, stop := context.WithCancel(ctx)
		defer stop()
		marks = watchMarks(mctx)
	}
	pacedTrace, stopPacedTrace, err := r.startTrace("ingest.paced")
	if err != nil {
		return err
	}
	defer stopPacedTrace()
	t0 = time.Now()
	for _, m := range paced {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if m.steps > 0 {
			pr.add(m.ep, m.idx)
		}
		if err := pub.PublishRaw(ctx, m.subj, m.id, m.body); err != nil {
			return err
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return err
	}
	if err := r.waitSteps(ctx, w.steps); err != nil {
		return err
	}
	stopPacedTrace()
	r.fig["ingest.visibility_rate_steps_per_s"] = float64(pacedSteps) / time.Since(t0).Seconds()
	// A rate the writer cannot sustain at the paced phase's batch sizes
	// shows as a reached rate below the asked one: the lag then measures
	// a growing queue.
	r.fig["ingest.visibility_asked_steps_per_s"] = rate
	r.writtenFigures("ingest.paced_", written().Sub(w0), pacedSteps)
	r.writerFigures("ingest.paced_", updates().Sub(u0), pacedSteps, time.Since(t0))
	if err := r.writerSchedFigures("ingest.paced_", pacedTrace, pacedSteps); err != nil {
		return err
	}
	if bulk, paced := r.fig["ingest.bulk_writer_us_per_step"], r.fig["ingest.paced_writer_us_per_step"]; bulk > 0 && paced > 0 {
		// At its default rate the paced phase asks for half the bulk
		// rate: past twice a bulk step's cost, a paced step leaves the
		// writer no time spare, and the lag is a queue's (BENCHMARKS.md,
		// fifty-second round). At a slower rate batches shrink toward a
		// step and a step's share of each commit's syncs grows.
		r.fig["ingest.paced_writer_cost_ratio"] = paced / bulk
	}
	r.fig["ingest.visibility_seconds"] = time.Since(t0).Seconds()
	pr.drain()
	r.lagFigures("ingest.", pr, true, marks)
	gcNote := ""
	if r.d != nil {
		// The daemon shares this process: its collections are these. A
		// collection's mark phase slows the commit chain several times
		// over, and the visibility tail follows (BENCHMARKS.md).
		// What the process allocated per step (the publisher's share
		// included) is what brings those collections.
		g := readGC()
		n := g.cycles - gc0.cycles
		r.fig["ingest.visibility_gc_cycles"] = float64(n)
		r.fig["ingest.paced_allocated_bytes_per_step"] = float64(g.allocated-gc0.allocated) / float64(max(pacedSteps, 1))
		gcNote = fmt.Sprintf("; %d garbage collection(s) in its %.1fs, %.0f KB allocated per step", n, r.fig["ingest.visibility_seconds"],
			r.fig["ingest.paced_allocated_bytes_per_step"]/1e3)
	}
	r.say("ingest: visibility at %.0f steps/s (of %.0f asked): p50 %.1f ms, p99 %.1f ms (graph commit p99 %.1f ms)%s",
		r.fig["ingest.visibility_rate_steps_per_s"], rate, r.fig["ingest.visibility_p50_ms"], r.fig["ingest.visibility_p99_ms"],
		r.fig["ingest.commit_visibility_p99_ms"], gcNote)
	if marks != nil {
		r.say("ingest: %.1f%% of the steps waited through one of the collector's %.0f mark phases (%.2f s of marking) or the second after it; the others' lag p50 %.1f ms, p99 %.1f ms",
			100*r.fig["ingest.visibility_share_near_marking"], r.fig["ingest.visibility_mark_phases"], r.fig["ingest.visibility_marking_s"],
			r.fig["ingest.visibility_clear_of_marking_p50_ms"], r.fig["ingest.visibility_clear_of_marking_p99_ms"])
	}
	if r.d != nil {
		f := func(stage string) float64 { return r.fig["ingest.paced_writer_"+stage+"_us_per_step"] }
		r.say("ingest: the graph writer was busy %.0f%% of the paced phase, per step: apply %.0f µs, encode %.0f, Badger's commit %.0f, publish %.0f; batches of %.1f steps",
			100*r.fig["ingest.paced_writer_busy"], f("apply"), f("encode"), f("commit"), f("publish"), r.fig["ingest.paced_steps_per_batch"])
	}

	if err := r.sendSpans(ctx, append(spans[2], spans[3]...), "at the end"); err != nil {
		return err
	}
	if err := client.WaitApplied(ctx, r.js, 5*time.Minute, map[string]string{
		daemon.StreamRLDS: daemon.DurableRLDS, daemon.StreamCMS: daemon.DurableCMS}); err != nil {
		return err
	}
	if r.d != nil {
		if err := r.d.WaitIndexed(ctx); err != nil {
			return err
		}
	}
	return r.graphFigures(ctx)
}

// writerFigures records how the graph store's writer spent a phase of
// the given length: how busy it was (its stages run one after the other,
// so near 1 the next batch waits for this one), each stage's time per
// step, and the steps per committed batch.
func (r *runner) writerFigures(prefix string, u particle.UpdateTimes, steps int, took time.Duration) {
	if r.d == nil || steps == 0 || u.Batches == 0 {
		return
	}
	r.fig[prefix+"writer_busy"] = u.Total().Seconds() / took.Seconds()
	r.fig[prefix+"writer_us_per_step"] = float64(u.Total().Microseconds()) / float64(steps)
	for stage, d := range u.ByStage() {
		r.fig[prefix+"writer_"+stage+"_us_per_step"] = float64(d.Microseconds()) / float64(steps)
	}
	r.fig[prefix+"steps_per_batch"] = float64(steps) / float64(u.Batches)
}

// writtenFigures records what the graph store wrote per step in a
// phase: every table's bytes, and the nodes', edges' and episodes'
// (rewritten whole at every batch that changes them, so smaller batches
// write more) and the stored steps'; and the keys set.
func (r *runner) writtenFigures(prefix string, w particle.Written, steps int) {
	if r.d == nil || steps == 0 {
		return
	}
	r.fig[prefix+"written_bytes_per_step"] = float64(w.Total()) / float64(steps)
	r.fig[prefix+"written_node_bytes_per_step"] = float64(w.Nodes) / float64(steps)
	r.fig[prefix+"written_edge_bytes_per_step"] = float64(w.Edges) / float64(steps)
	r.fig[prefix+"written_episode_bytes_per_step"] = float64(w.Episodes) / float64(steps)
	r.fig[prefix+"written_step_bytes_per_step"] = float64(w.Steps) / float64(steps)
	r.fig[prefix+"written_keys_per_step"] = float64(w.Keys) / float64(steps)
	if w.EpisodeRecords > 0 {
		r.fig[prefix+"steps_per_episode_write"] = float64(steps) / float64(w.EpisodeRecords)
	}
}

// countSteps is how many steps ms carry.
func countSteps(ms []pubMsg) int {
	n := 0
	for _, m := range ms {
		n += m.steps
	}
	return n
}

// stepMessages is how many of ms carry steps.
func stepMessages(ms []pubMsg) int {
	n := 0
	for _, m := range ms {
		if m.steps > 0 {
			n++
		}
	}
	return n
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// markAftermath is how long after a mark phase a step counts as near
// it: the backlog a phase leaves at the bench's paced rate drains within
// about a second (thirty-fourth round's traces).
const markAftermath = time.Second

// lagFigures turns the finished probes into figures under prefix. With
// marks (the collector's mark phases watched while they were sent), the
// steps whose wait overlapped none of them, nor the second after one,
// have their own figures: what the lag is clear of the collections.
func (r *runner) lagFigures(prefix string, pr *probes, commit bool, marks *markPhases) {
	var spans, near []timeSpan
	if marks != nil {
		spans = marks.spans()
		for _, m := range spans {
			near = append(near, timeSpan{m.from, m.to.Add(markAftermath)})
		}
	}
	var vis, view, outside dist
	for _, p := range pr.take() {
		view.addDur(p.view.Sub(p.pub), time.Millisecond)
		seen := p.view
		if !p.index.IsZero() {
			seen = p.index
		}
		vis.addDur(seen.Sub(p.pub), time.Millisecond)
		if marks != nil && !overlaps(near, p.pub, seen) {
			outside.addDur(seen.Sub(p.pub), time.Millisecond)
		}
	}
	r.fig[prefix+"visibility_probes"] = float64(vis.n())
	r.fig[prefix+"visibility_p50_ms"] = vis.pct(50)
	r.fig[prefix+"visibility_p99_ms"] = vis.pct(99)
	r.fig[prefix+"visibility_max_ms"] = vis.pct(100)
	if marks != nil {
		var marking time.Duration
		for _, s := range spans {
			marking += s.to.Sub(s.from)
		}
		r.fig[prefix+"visibility_mark_phases"] = float64(len(spans))
		r.fig[prefix+"visibility_marking_s"] = marking.Seconds()
		r.fig[prefix+"visibility_share_near_marking"] = 1 - float64(outside.n())/float64(max(vis.n(), 1))
		if outside.n() > 0 {
			r.fig[prefix+"visibility_clear_of_marking_p50_ms"] = outside.pct(50)
			r.fig[prefix+"visibility_clear_of_marking_p99_ms"] = outside.pct(99)
		}
	}
	if commit {
		r.fig[prefix+"commit_visibility_p50_ms"] = view.pct(50)
		r.fig[prefix+"commit_visibility_p99_ms"] = view.pct(99)
	}
}

// sendSpans publishes spans and waits until the store holds them all.
func (r *runner) sendSpans(ctx context.Context, spans []pubMsg, when string) error {
	if len(spans) == 0 {
		return nil
	}
	t := time.Now()
	pub := client.NewPublisher(r.js, r.prefix, 0)
	for _, s := range spans {
		if err := pub.PublishRaw(ctx, s.subj, s.id, s.body); err != nil {
			return err
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return err
	}
	if err := client.WaitApplied(ctx, r.js, 5*time.Minute, map[string]string{daemon.StreamCMS: daemon.DurableCMS}); err != nil {
		return err
	}
	n := r.fig["ingest.spans"] + float64(len(spans))
	r.fig["ingest.spans"] = n
	r.fig["ingest.spans_seconds"] += time.Since(t).Seconds()
	r.fig["ingest.spans_per_s"] = n / r.fig["ingest.spans_seconds"]
	r.say("ingest: %d CMS spans %s in %.2fs", len(spans), when, time.Since(t).Seconds())
	return nil
}

// waitSteps waits until the daemon holds n steps; it fails if nothing
// moves for a minute.
func (r *runner) waitSteps(ctx context.Context, n int) error {
	if r.d == nil {
		return client.WaitApplied(ctx, r.js, 10*time.Minute, map[string]string{daemon.StreamRLDS: daemon.DurableRLDS})
	}
	last, since := int64(-1), time.Now()
	for {
		have := r.d.Store().Counts().Steps
		if have >= int64(n) {
			return nil
		}
		if have != last {
			last, since = have, time.Now()
		} else if time.Since(since) > time.Minute {
			dl, _ := r.deadLettered(ctx)
			return fmt.Errorf("ingest stalled at %d of %d steps (%d dead-lettered)", have, n, dl)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Microsecond):
		}
	}
}

func (r *runner) deadLettered(ctx context.Context) (uint64, error) {
	st, err := r.js.Stream(ctx, daemon.StreamDLQ)
	if err != nil {
		return 0, err
	}
	return st.CachedInfo().State.Msgs, nil
}

// graphFigures records what the store holds after the load.
func (r *runner) graphFigures(ctx context.Context) error {
	dl, err := r.deadLettered(ctx)
	if err != nil {
		return err
	}
	r.fig["ingest.dead_lettered"] = float64(dl)
	var c particle.Counts
	if r.d != nil {
		c = r.d.Store().Counts()
		r.fig["graph.vectors"] = float64(r.d.VectorIndex().Len())
	} else if err := r.stats(ctx, &c); err != nil {
		return err
	}
	sum := func(m map[string]int64) (n int64) {
		for _, v := range m {
			n += v
		}
		return n
	}
	nodes, edges := map[string]int64{}, map[string]int64{}
	for t, n := range c.Nodes {
		nodes[string(t)] = n
	}
	for t, n := range c.Edges {
		edges[string(t)] = n
	}
	r.fig["graph.nodes"] = float64(sum(nodes))
	r.fig["graph.edges"] = float64(sum(edges))
	r.fig["graph.episodes"] = float64(c.Episodes)
	r.fig["graph.steps"] = float64(c.Steps)
	r.fig["graph.spans"] = float64(c.Spans)
	r.say("graph: %.0f nodes, %.0f edges, %d episodes, %d steps, %d spans, %.0f vectors; %d dead-lettered",
		r.fig["graph.nodes"], r.fig["graph.edges"], c.Episodes, c.Steps, c.Spans, r.fig["graph.vectors"], dl)
	if dl > 0 {
		return fmt.Errorf("%d messages were dead-lettered: the workload should apply whole", dl)
	}
	return nil
}

// stats reads an external daemon's counts (GET /v1/stats).
func (r *runner) stats(ctx context.Context, c *particle.Counts) error {
	if r.httpURL == "" {
		return errors.New("graph counts need --http")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.httpURL+"/v1/stats", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var s struct {
		Counts particle.Counts `json:"counts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	*c = s.Counts
	return nil
}
