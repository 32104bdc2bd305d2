package bench

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
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

// plannerLoop asks the daemon's planner the workload's 1-hop queries in
// turn on one thread, one every mixedEvery, until stop is closed, and
// returns each call's latency and its wait for the graph's read lock.
func (r *runner) plannerLoop(ctx context.Context, stop <-chan struct{}) (lat, wait []time.Duration, err error) {
	reqs := r.requests(1)
	ans := new(planner.Answer)
	tick := time.NewTicker(mixedEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return lat, wait, nil
		case <-ctx.Done():
			return lat, wait, ctx.Err()
		case <-tick.C:
		}
		req := reqs[i%len(reqs)]
		t := time.Now()
		ans.Reset()
		if err := r.d.Planner().PlanInto(ctx, &req, ans); err != nil {
			return lat, wait, fmt.Errorf("query %d: %w", i%len(reqs), err)
		}
		lat = append(lat, time.Since(t))
		wait = append(wait, time.Duration(ans.Timings.WaitUS)*time.Microsecond)
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
	idle := func() (lat, wait []time.Duration, err error) {
		stop := make(chan struct{})
		time.AfterFunc(mixedIdle, func() { close(stop) })
		return r.plannerLoop(ctx, stop)
	}
	idleLat, _, err := idle()
	if err != nil {
		return err
	}

	steps := countSteps(msgs)
	r.say("ingest: mixed phase, %d messages (%d steps) at %.0f steps/s with the planner asked beside them", len(msgs), steps, rate)
	yields0, yielded0 := r.d.IngestYields()
	stop := make(chan struct{})
	var busyLat, busyWait []time.Duration
	var loopErr atomic.Value
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, w, err := r.plannerLoop(ctx, stop)
		busyLat, busyWait = l, w
		if err != nil {
			loopErr.Store(err)
		}
	}()
	t0 := time.Now()
	sendErr := r.sendPaced(ctx, msgs, rate, stepsThrough)
	took := time.Since(t0)
	close(stop)
	<-done
	if sendErr != nil {
		return sendErr
	}
	if err, ok := loopErr.Load().(error); ok {
		return err
	}
	yields, yielded := r.d.IngestYields()

	pct := func(ds []time.Duration, p float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[int(float64(len(s)-1)*p/100)].Microseconds())
	}
	f := r.fig
	f["ingest.mixed_steps_per_s"] = float64(steps) / took.Seconds()
	f["ingest.mixed_asked_steps_per_s"] = rate
	f["ingest.mixed_yields"] = float64(yields - yields0)
	f["ingest.mixed_yield_s"] = (yielded - yielded0).Seconds()
	f["planner.beside_ingest.idle_p50_us"] = pct(idleLat, 50)
	f["planner.beside_ingest.idle_p99_us"] = pct(idleLat, 99)
	f["planner.beside_ingest.calls"] = float64(len(busyLat))
	if len(busyLat) > 0 {
		f["planner.beside_ingest.p50_us"] = pct(busyLat, 50)
		f["planner.beside_ingest.p99_us"] = pct(busyLat, 99)
		f["planner.beside_ingest.wait_p99_us"] = pct(busyWait, 99)
	}
	r.say("ingest: mixed phase at %.0f steps/s (of %.0f asked); the planner, 1 hop, 1 thread at 250 calls/s: p50 %.0f µs, p99 %.0f µs in %d calls (its wait for the graph's read lock p99 %.0f µs), against p50 %.0f, p99 %.0f µs with nothing ingested; ingest paused %d times for it, %.2f s in all",
		f["ingest.mixed_steps_per_s"], rate, f["planner.beside_ingest.p50_us"], f["planner.beside_ingest.p99_us"], len(busyLat),
		f["planner.beside_ingest.wait_p99_us"], f["planner.beside_ingest.idle_p50_us"], f["planner.beside_ingest.idle_p99_us"],
		yields-yields0, (yielded - yielded0).Seconds())
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
