package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/planner"
)

// DefaultMixedShare is the share of a workload's steps the mixed phase
// sends, with the planner asked beside them: about 4 s on the medium
// workload.
const DefaultMixedShare = 0.1

// mixedIdle is how long the mixed phase first asks the planner with
// nothing being ingested, on the same graph, for the figures beside.
const mixedIdle = 2 * time.Second

// mixedEvery is the pace of the mixed phase's planner calls: a control
// loop at 250 Hz. (Back to back, calls leave ingest no gap, and ingest
// keeps half the time; a control loop asks between its ticks.)
const mixedEvery = 4 * time.Millisecond

// loopCalls are the mixed phase's timed calls, in µs: each one's
// latency and its answer's stage times.
type loopCalls struct {
	lat, wait, prefilter, expand, stitch, rest dist
	// runq is each call's wait on the kernel's run queue, in µs, for
	// the calls whose thread said (threadWaits); runqLat is the sum of
	// those calls' latencies.
	runq    dist
	runqLat float64
}

// runqShare is the share of the measured calls' time their threads
// waited on the kernel's run queue.
func (c *loopCalls) runqShare() float64 {
	if c.runqLat == 0 {
		return 0
	}
	return c.runq.mean() * float64(c.runq.n()) / c.runqLat
}

// waitedShare is the share of the calls that waited 10 µs or more for
// the graph's read lock.
func (c *loopCalls) waitedShare() float64 {
	if c.wait.n() == 0 {
		return 0
	}
	waited := 0
	for _, w := range c.wait.v {
		if w >= 10 {
			waited++
		}
	}
	return float64(waited) / float64(c.wait.n())
}

func (c *loopCalls) add(lat time.Duration, t planner.Timings) {
	latUS := float64(lat) / float64(time.Microsecond)
	c.lat.add(latUS)
	c.wait.add(float64(t.WaitUS))
	c.prefilter.add(float64(t.PrefilterUS))
	c.expand.add(float64(t.ExpandUS))
	c.stitch.add(float64(t.RerankUS + t.StitchUS))
	c.rest.add(latUS - float64(t.EmbedUS+t.WaitUS+t.PrefilterUS+t.ExpandUS+t.RerankUS+t.StitchUS))
}

func (c *loopCalls) addRunq(wait, lat time.Duration) {
	c.runq.addDur(wait, time.Microsecond)
	c.runqLat += float64(lat) / float64(time.Microsecond)
}

// plannerLoop asks the daemon's planner the workload's 1-hop queries in
// turn on one thread, one every mixedEvery, until stop is closed. Its
// first call is at once, after it closes started (if not nil): a phase
// shorter than a tick still has a call beside it.
func (r *runner) plannerLoop(ctx context.Context, stop <-chan struct{}, started chan<- struct{}) (*loopCalls, error) {
	reqs := r.requests(1)
	ans := new(planner.Answer)
	tick := time.NewTicker(mixedEvery)
	defer tick.Stop()
	calls := &loopCalls{}
	tw := newThreadWaits()
	defer tw.close()
	if started != nil {
		close(started)
	}
	for i := 0; ; i++ {
		if i > 0 {
			select {
			case <-stop:
				return calls, nil
			case <-ctx.Done():
				return calls, ctx.Err()
			case <-tick.C:
			}
		}
		req := reqs[i%len(reqs)]
		ans.Reset()
		tid0, w0, ok0 := tw.current()
		t := time.Now()
		if err := r.d.Planner().PlanInto(ctx, &req, ans); err != nil {
			return calls, fmt.Errorf("query %d: %w", i%len(reqs), err)
		}
		lat := time.Since(t)
		calls.add(lat, ans.Timings)
		// The call's run-queue wait, when it ran on one thread from
		// start to end (a call that moved and came back is counted at
		// most its own length).
		if tid1, w1, ok1 := tw.current(); ok0 && ok1 && tid0 == tid1 {
			calls.addRunq(min(w1-w0, lat), lat)
		}
	}
}

// mixed sends msgs at rate steps/s while the planner is asked beside
// them (in process only), after asking it for mixedIdle with nothing
// being ingested: how much slower a plan is while the fleet streams,
// and how long ingest paused for the planner (ingest.yield_to_planner).
// It returns once the graph holds every step up to the phase's last.
func (r *runner) mixed(ctx context.Context, msgs []pubMsg, rate float64, stepsThrough int) error {
	if len(msgs) == 0 {
		return nil
	}
	if r.d == nil || len(r.qs) == 0 {
		// Against a daemon elsewhere the messages are only sent.
		return r.sendPaced(ctx, msgs, rate, stepsThrough)
	}
	stopIdle := make(chan struct{})
	time.AfterFunc(mixedIdle, func() { close(stopIdle) })
	idle, err := r.plannerLoop(ctx, stopIdle, nil)
	if err != nil {
		return err
	}

	steps := countSteps(msgs)
	r.say("ingest: mixed phase, %d messages (%d steps) at %.0f steps/s with the planner asked beside them", len(msgs), steps, rate)
	yields0, yielded0 := r.d.IngestYields()
	stop := make(chan struct{})
	var busy *loopCalls
	var loopErr error // both read once done is closed
	done, started := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		busy, loopErr = r.plannerLoop(ctx, stop, started)
	}()
	<-started // its first call beside the phase's first messages
	t0 := time.Now()
	sendErr := r.sendPaced(ctx, msgs, rate, stepsThrough)
	took := time.Since(t0)
	close(stop)
	<-done
	if sendErr != nil {
		return sendErr
	}
	if loopErr != nil {
		return loopErr
	}
	yields, yielded := r.d.IngestYields()

	f := r.fig
	f["ingest.mixed_steps_per_s"] = float64(steps) / took.Seconds()
	f["ingest.mixed_asked_steps_per_s"] = rate
	f["ingest.mixed_yields"] = float64(yields - yields0)
	f["ingest.mixed_yield_s"] = (yielded - yielded0).Seconds()
	f["planner.beside_ingest.calls"] = float64(busy.lat.n())
	for _, c := range []struct {
		name  string
		calls *loopCalls
	}{{"", busy}, {"idle_", idle}} {
		if c.calls.lat.n() == 0 {
			continue
		}
		pre := "planner.beside_ingest." + c.name
		f[pre+"p50_us"] = c.calls.lat.pct(50)
		f[pre+"p99_us"] = c.calls.lat.pct(99)
		for _, st := range []struct {
			name string
			d    *dist
		}{{"wait", &c.calls.wait}, {"prefilter", &c.calls.prefilter}, {"expand", &c.calls.expand}, {"stitch", &c.calls.stitch}, {"rest", &c.calls.rest}} {
			f[pre+st.name+"_p99_us"] = st.d.pct(99)
		}
		// The wait's p99 is about the sixth longest of the phase's 600-750
		// waits, which the host's stalls decide; its mean and the share of
		// calls that waited at all hold steadier for comparing binaries.
		f[pre+"wait_mean_us"] = c.calls.wait.mean()
		f[pre+"waited_share"] = c.calls.waitedShare()
		if n := c.calls.runq.n(); n > 0 {
			f[pre+"runqueue_measured"] = float64(n)
			f[pre+"runqueue_wait_share"] = c.calls.runqShare()
			f[pre+"runqueue_wait_mean_us"] = c.calls.runq.mean()
			f[pre+"runqueue_wait_p99_us"] = c.calls.runq.pct(99)
		}
	}
	g := func(k string) float64 { return f["planner.beside_ingest."+k] }
	r.say("ingest: mixed phase at %.0f steps/s (of %.0f asked); the planner, 1 hop, 1 thread at 250 calls/s: p50 %.0f µs, p99 %.0f µs in %.0f calls (p99s: waiting for the graph's read lock %.0f, prefilter %.0f, expansion %.0f, re-rank and stitch %.0f, the rest %.0f µs), against p50 %.0f, p99 %.0f µs with nothing ingested (%.0f, %.0f, %.0f, %.0f, %.0f); ingest paused %d times for it, %.2f s in all",
		f["ingest.mixed_steps_per_s"], rate, g("p50_us"), g("p99_us"), g("calls"), g("wait_p99_us"), g("prefilter_p99_us"), g("expand_p99_us"), g("stitch_p99_us"), g("rest_p99_us"),
		g("idle_p50_us"), g("idle_p99_us"), g("idle_wait_p99_us"), g("idle_prefilter_p99_us"), g("idle_expand_p99_us"), g("idle_stitch_p99_us"), g("idle_rest_p99_us"),
		yields-yields0, (yielded - yielded0).Seconds())
	if busy.runq.n() > 0 && idle.runq.n() > 0 {
		r.say("ingest: mixed phase: the planner's thread waited on the kernel's run queue for %.1f%% of its calls' time (p99 %.0f µs a call, over %d calls), against %.1f%% (p99 %.0f µs) with nothing ingested",
			100*g("runqueue_wait_share"), g("runqueue_wait_p99_us"), busy.runq.n(), 100*g("idle_runqueue_wait_share"), g("idle_runqueue_wait_p99_us"))
	}
	return nil
}

// sendPaced publishes msgs at rate steps/s and waits until the graph
// holds stepsThrough steps.
func (r *runner) sendPaced(ctx context.Context, msgs []pubMsg, rate float64, stepsThrough int) error {
	pub := client.NewPublisher(r.js, r.prefix, rate*float64(len(msgs))/float64(max(countSteps(msgs), 1)))
	for _, m := range msgs {
		if err := pub.PublishRaw(ctx, m.subj, m.id, m.body); err != nil {
			return err
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return err
	}
	return r.waitSteps(ctx, stepsThrough)
}
