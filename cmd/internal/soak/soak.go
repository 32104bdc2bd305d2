// Package soak drives a ctxgraph daemon process with a simulated fleet
// and reports how it held up: planner latency under load beside idle,
// ingest lag, memory growth, and whether any acknowledged step was lost
// or applied twice.
//
// A run starts `ctxgraph serve` on a fresh data directory and loopback
// ports, seeds it, measures the planner idle, then runs the fleet (N
// controllers streaming steps at R Hz, each over its own NATS connection,
// plus planner requests at a fixed rate) for the duration, drains,
// measures the planner idle again, stops the daemon and audits the store
// directly. Every phase is bounded; the run stops by itself.
package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// Options configure a run.
type Options struct {
	// Binary is the ctxgraph executable to run as the daemon.
	Binary string
	// Controllers stream at Rate steps per second each. Defaults 200, 10.
	Controllers int
	Rate        float64
	// StepsPerEpisode is each controller's episode length. Default 100.
	StepsPerEpisode int
	// StepsPerMessage > 1 makes each controller send its steps that many
	// to a steps message (the last of an episode's fewer), at the same
	// step rate. Default 1.
	StepsPerMessage int
	// PlannerRPS is the planner request rate. Default 50.
	PlannerRPS float64
	// Duration of the load phase; Idle of each idle measurement.
	// Defaults 60s, 10s.
	Duration, Idle time.Duration
	// Dir is the data directory (default: a new temporary one, removed
	// after the run unless Keep).
	Dir  string
	Keep bool
	// Check runs `ctxgraph check` on the store after the run.
	Check bool
	// Log receives progress lines.
	Log io.Writer
}

func (o *Options) defaults() {
	if o.Controllers <= 0 {
		o.Controllers = 200
	}
	if o.Rate <= 0 {
		o.Rate = 10
	}
	if o.StepsPerEpisode <= 0 {
		o.StepsPerEpisode = 100
	}
	if o.PlannerRPS <= 0 {
		o.PlannerRPS = 50
	}
	if o.Duration <= 0 {
		o.Duration = 60 * time.Second
	}
	if o.Idle <= 0 {
		o.Idle = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// Latency summarises a set of request latencies.
type Latency struct {
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	// ServerP99us is the p99 of the planner's own total time (timings_us.total).
	ServerP99us float64 `json:"server_p99_us"`
	// ServerWaitP99us is the p99 of the part of it spent waiting for the
	// graph's read lock (timings_us.wait): a writer publishing a batch.
	ServerWaitP99us float64 `json:"server_wait_p99_us"`
}

// Report is what a run measured.
type Report struct {
	Controllers   int     `json:"controllers"`
	RateHz        float64 `json:"rate_hz"`
	StepsPerMsg   int     `json:"steps_per_message"`
	PlannerRPS    float64 `json:"planner_rps"`
	DurationS     float64 `json:"duration_s"`
	SeedSteps     int64   `json:"seed_steps"`
	StepsAcked    int64   `json:"steps_acked"`
	StepsPerS     float64 `json:"steps_per_s"`
	PublishErrors int64   `json:"publish_errors"`

	PlannerIdleBefore Latency `json:"planner_idle_before"`
	PlannerUnderLoad  Latency `json:"planner_under_load"`
	PlannerIdleAfter  Latency `json:"planner_idle_after"`

	// Ingest lag: acknowledged but not yet applied, sampled every 500 ms
	// during the load; and a probe step's time from its publish ack to
	// being visible in the graph the planner reads.
	LagMsgsMax    int64   `json:"lag_msgs_max"`
	LagMsgsMean   float64 `json:"lag_msgs_mean"`
	VisibleP50ms  float64 `json:"visible_p50_ms"`
	VisibleP99ms  float64 `json:"visible_p99_ms"`
	VisibleMaxMs  float64 `json:"visible_max_ms"`
	DrainS        float64 `json:"drain_s"`
	RSSStartMB    float64 `json:"rss_start_mb"`
	RSSEndLoadMB  float64 `json:"rss_end_load_mb"`
	RSSMaxMB      float64 `json:"rss_max_mb"`
	RSSAfterIdle  float64 `json:"rss_after_idle_mb"`
	StepsStored   int64   `json:"steps_stored"`
	Lost          int64   `json:"lost"`
	Duplicated    int64   `json:"duplicated"`
	DeadLettered  int     `json:"dead_lettered"`
	CheckOK       *bool   `json:"check_ok,omitempty"`
	CheckProblems string  `json:"check_problems,omitempty"`
	// CPUs and the 1-minute load average at the start and the end of the
	// load, for reading the numbers: a busy machine slows everything.
	CPUs     int     `json:"cpus"`
	LoadFrom float64 `json:"load_from"`
	LoadTo   float64 `json:"load_to"`
}

// OK reports whether nothing was lost, duplicated, dead-lettered or
// found inconsistent.
func (r *Report) OK() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.DeadLettered == 0 && (r.CheckOK == nil || *r.CheckOK)
}

// Run runs one soak.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	if o.StepsPerMessage < 0 || o.StepsPerMessage > rlds.MaxStepsPerMessage {
		return nil, fmt.Errorf("soak: %d steps a message, want 1..%d", o.StepsPerMessage, rlds.MaxStepsPerMessage)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Duration+2*o.Idle+10*time.Minute)
	defer cancel()
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "ctxgraph-soak-*")
		if err != nil {
			return nil, err
		}
		dir = d
		if !o.Keep {
			defer os.RemoveAll(dir)
		}
	}
	r := &Report{Controllers: o.Controllers, RateHz: o.Rate, StepsPerMsg: max(o.StepsPerMessage, 1), PlannerRPS: o.PlannerRPS,
		DurationS: o.Duration.Seconds(), CPUs: runtime.NumCPU()}
	p, err := startDaemon(ctx, o.Binary, dir)
	if err != nil {
		return nil, err
	}
	defer p.kill()
	logf := func(format string, a ...any) { fmt.Fprintf(o.Log, "soak: "+format+"\n", a...) }
	logf("daemon pid %d, data %s, NATS %s, HTTP %s", p.cmd.Process.Pid, dir, p.natsURL, p.httpURL)

	nc, js, err := client.Connect(p.natsURL, "soak-driver")
	if err != nil {
		return nil, err
	}
	defer nc.Close()

	// Seed: a first episode for every controller, so the planner has
	// the fleet's graph to search from the start.
	fleet := make([]*controller, o.Controllers)
	for i := range fleet {
		fleet[i] = &controller{bot: client.Synthetic{Agent: fmt.Sprintf("soak-%03d", i)}, acked: map[string]int{}}
	}
	seed := client.NewPublisher(js, "ctxgraph", 0)
	t0 := time.Now()
	for _, c := range fleet {
		for _, m := range c.bot.Episode(c.bot.Agent+"-seed", 10, t0) {
			if err := seed.Publish(ctx, m); err != nil {
				return nil, err
			}
		}
		c.acked[c.bot.Agent+"-seed"] = 10
	}
	if err := seed.Flush(ctx); err != nil {
		return nil, err
	}
	r.SeedSteps = int64(10 * len(fleet))
	if err := waitApplied(ctx, js); err != nil {
		return nil, err
	}
	logf("seeded %d steps", r.SeedSteps)

	askFor(ctx, nc, o.PlannerRPS, time.Second, o.Controllers) // warm-up, not measured
	logf("planner idle for %v at %.0f/s", o.Idle, o.PlannerRPS)
	r.PlannerIdleBefore = askFor(ctx, nc, o.PlannerRPS, o.Idle, o.Controllers)
	r.RSSStartMB = rssMB(p.cmd.Process.Pid)

	// The load.
	logf("load: %d controllers at %.0f Hz and the planner at %.0f/s for %v", o.Controllers, o.Rate, o.PlannerRPS, o.Duration)
	r.LoadFrom = loadAvg()
	lctx, stopLoad := context.WithTimeout(ctx, o.Duration)
	var wg sync.WaitGroup
	var pubErrs atomic.Int64
	for _, c := range fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(lctx, p.natsURL, o.Rate, o.StepsPerEpisode, o.StepsPerMessage, &pubErrs)
		}()
	}
	var plannerLoad Latency
	wg.Add(1)
	go func() {
		defer wg.Done()
		plannerLoad = askFor(lctx, nc, o.PlannerRPS, o.Duration, o.Controllers)
	}()
	var visible []time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		visible = probeVisibility(lctx, js, p.httpURL)
	}()
	var lagMax int64
	var lagSum, lagN float64
	var rssMax float64
	tick := time.NewTicker(500 * time.Millisecond)
	started, logged := time.Now(), time.Now()
sampling:
	for {
		select {
		case <-lctx.Done():
			break sampling
		case <-tick.C:
			if lag, err := consumerLag(lctx, js); err == nil {
				lagMax = max(lagMax, lag)
				lagSum += float64(lag)
				lagN++
			}
			rssMax = max(rssMax, rssMB(p.cmd.Process.Pid))
			if time.Since(logged) >= 10*time.Second {
				logged = time.Now()
				logf("  %v: lag up to %d msgs, rss up to %.0f MB", time.Since(started).Round(time.Second), lagMax, rssMax)
			}
		}
	}
	tick.Stop()
	r.LoadTo = loadAvg()
	stopLoad()
	wg.Wait()
	r.RSSEndLoadMB = rssMB(p.cmd.Process.Pid)
	r.RSSMaxMB = max(rssMax, r.RSSEndLoadMB)
	r.PlannerUnderLoad = plannerLoad
	r.LagMsgsMax = lagMax
	if lagN > 0 {
		r.LagMsgsMean = lagSum / lagN
	}
	r.VisibleP50ms, r.VisibleP99ms, r.VisibleMaxMs = pct(visible, 50), pct(visible, 99), pct(visible, 100)
	r.PublishErrors = pubErrs.Load()
	for _, c := range fleet {
		for _, n := range c.acked {
			r.StepsAcked += int64(n)
		}
	}
	r.StepsAcked -= r.SeedSteps
	r.StepsPerS = float64(r.StepsAcked) / o.Duration.Seconds()

	drain := time.Now()
	if err := waitApplied(ctx, js); err != nil {
		return nil, err
	}
	r.DrainS = time.Since(drain).Seconds()
	logf("drained in %.2fs; planner idle again for %v", r.DrainS, o.Idle)
	r.PlannerIdleAfter = askFor(ctx, nc, o.PlannerRPS, o.Idle, o.Controllers)
	r.RSSAfterIdle = rssMB(p.cmd.Process.Pid)
	var dlq daemon.DLQList
	if err := getJSON(p.httpURL+"/v1/dlq?limit=10000", &dlq); err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	r.DeadLettered = len(dlq.Entries)
	nc.Close()
	if err := p.stop(); err != nil {
		return nil, err
	}

	// Audit the store itself.
	if err := audit(filepath.Join(dir, "graph"), fleet, r); err != nil {
		return nil, err
	}
	if o.Check {
		logf("ctxgraph check")
		cfg := daemon.DefaultConfig()
		cfg.Data = dir
		res, err := daemon.Check(ctx, cfg, nil)
		if err != nil {
			return nil, err
		}
		ok := res.OK()
		r.CheckOK = &ok
		if !ok {
			b, _ := json.Marshal(res)
			r.CheckProblems = string(b)
		}
	}
	return r, nil
}

// controller is one simulated robot controller with its own connection.
type controller struct {
	bot   client.Synthetic
	mu    sync.Mutex
	acked map[string]int // episode -> steps acknowledged (0..n-1)
}

func (c *controller) run(ctx context.Context, url string, hz float64, steps, perMessage int, errs *atomic.Int64) {
	nc, err := nats.Connect(url, nats.Name(c.bot.Agent))
	if err != nil {
		errs.Add(1)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		errs.Add(1)
		return
	}
	// publish retries a message until the daemon acknowledges it or the
	// run ends: a controller does not give up on a step.
	publish := func(m any, subj, id string) bool {
		body, _ := json.Marshal(m)
		for {
			pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := js.Publish(pctx, subj, body, jetstream.WithMsgID(id))
			cancel()
			if err == nil {
				return true
			}
			errs.Add(1)
			if ctx.Err() != nil {
				return false
			}
		}
	}
	// Controllers start spread over one period, as a fleet's would.
	period := time.Duration(float64(time.Second) / hz)
	select {
	case <-time.After(time.Duration(hashAgent(c.bot.Agent) % uint64(period))):
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for e := 0; ctx.Err() == nil; e++ {
		ep := fmt.Sprintf("%s-%d", c.bot.Agent, e)
		t0 := time.Now()
		start := c.bot.Start(ep, t0)
		if !publish(start, start.Subject("ctxgraph"), start.MsgID()) {
			return
		}
		// n steps are acknowledged; held ones wait for a steps message.
		n := 0
		var held []*rlds.Message
		send := func() bool {
			for _, m := range rlds.GroupSteps(held, len(held)) {
				if !publish(m, m.Subject("ctxgraph"), m.MsgID()) {
					return false
				}
			}
			n += len(held)
			held = held[:0]
			c.mu.Lock()
			c.acked[ep] = n
			c.mu.Unlock()
			return true
		}
		for i := 0; i < steps; i++ {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
			if ctx.Err() != nil {
				break
			}
			held = append(held, c.bot.Step(ep, i, t0))
			if (len(held) >= perMessage || i == steps-1) && !send() {
				break
			}
		}
		end := c.bot.End(ep, n, t0)
		// The episode ends even when the run does.
		body, _ := json.Marshal(end)
		pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := js.Publish(pctx, end.Subject("ctxgraph"), body, jetstream.WithMsgID(end.MsgID())); err != nil {
			errs.Add(1)
		}
		cancel()
	}
}

func hashAgent(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// askFor sends planner requests at rps for d (each on its own goroutine,
// so a slow answer does not slow the rate) and summarises their latency.
func askFor(ctx context.Context, nc *nats.Conn, rps float64, d time.Duration, fleet int) Latency {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var lat, server, wait []time.Duration
	var errs int
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rps))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			l := Latency{N: len(lat), Errors: errs, P50ms: pct(lat, 50), P99ms: pct(lat, 99), MaxMs: pct(lat, 100)}
			l.ServerP99us, l.ServerWaitP99us = pct(server, 99)*1000, pct(wait, 99)*1000
			return l
		case <-tick.C:
		}
		req := planner.Request{
			Query:    fmt.Sprintf("where is part %d", i%8),
			Entities: []string{fmt.Sprintf("part %d", i%8)},
			Tools:    []string{client.Synthetic{Agent: fmt.Sprintf("soak-%03d", i%max(fleet, 1))}.Tool()},
			Hops:     2, K: 10, Budget: 256,
		}
		body, _ := json.Marshal(req)
		select {
		case sem <- struct{}{}:
		default:
			mu.Lock()
			errs++ // more than 64 outstanding: count it as failed
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t := time.Now()
			reply, err := nc.Request("ctxgraph.planner.context", body, 5*time.Second)
			el := time.Since(t)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || reply.Header.Get("Status") != "" {
				errs++
				return
			}
			lat = append(lat, el)
			var a struct {
				Timings planner.Timings `json:"timings_us"`
			}
			if json.Unmarshal(reply.Data, &a) == nil {
				server = append(server, time.Duration(a.Timings.TotalUS)*time.Microsecond)
				wait = append(wait, time.Duration(a.Timings.WaitUS)*time.Microsecond)
			}
		}()
	}
}

// probeVisibility publishes a probe step twice a second and measures the
// time from its publish ack to the step being in the graph (the
// episode's step count, as GET /v1/episodes reads it from the view).
func probeVisibility(ctx context.Context, js jetstream.JetStream, httpURL string) []time.Duration {
	bot := client.Synthetic{Agent: "soak-probe"}
	ep := "soak-probe-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t0 := time.Now()
	start := bot.Start(ep, t0)
	body, _ := json.Marshal(start)
	if _, err := js.Publish(ctx, start.Subject("ctxgraph"), body, jetstream.WithMsgID(start.MsgID())); err != nil {
		return nil
	}
	var out []time.Duration
	hc := &http.Client{Timeout: 2 * time.Second}
	for i := 0; ctx.Err() == nil; i++ {
		select {
		case <-ctx.Done():
			return out
		case <-time.After(500 * time.Millisecond):
		}
		m := bot.Step(ep, i, t0)
		body, _ := json.Marshal(m)
		if _, err := js.Publish(ctx, m.Subject("ctxgraph"), body, jetstream.WithMsgID(m.MsgID())); err != nil {
			continue
		}
		acked := time.Now()
		for time.Since(acked) < 10*time.Second && ctx.Err() == nil {
			var e struct {
				Steps int `json:"steps"`
			}
			if resp, err := hc.Get(httpURL + "/v1/episodes/" + ep); err == nil {
				json.NewDecoder(resp.Body).Decode(&e)
				resp.Body.Close()
			}
			if e.Steps > i {
				out = append(out, time.Since(acked))
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return out
}

// audit opens the stopped daemon's store and counts, per controller,
// acknowledged steps missing from it (lost) and steps applied more than
// once (duplicated: the agent's uses-tool edge has one piece of evidence
// per applied step).
func audit(graph string, fleet []*controller, r *Report) error {
	o := particle.DefaultOptions(graph)
	o.SyncWrites = false
	s, err := particle.Open(o)
	if err != nil {
		return err
	}
	defer s.Close()
	byAgent := map[string][]string{}
	s.Read(func(rd particle.Reader) {
		rd.Episodes(func(ep *particle.Episode) bool {
			byAgent[ep.Agent] = append(byAgent[ep.Agent], ep.ID)
			return true
		})
	})
	var stored int64
	for _, c := range fleet {
		agentStored := 0
		for _, ep := range byAgent[c.bot.Agent] {
			have := map[int]bool{}
			if err := s.Steps(particle.DefaultNamespace, ep, func(idx int, _ []byte) error {
				have[idx] = true
				return nil
			}); err != nil {
				return err
			}
			agentStored += len(have)
			for i := range c.acked[ep] {
				if !have[i] {
					r.Lost++
				}
			}
		}
		for ep, n := range c.acked {
			if n > 0 && !slices.Contains(byAgent[c.bot.Agent], ep) {
				r.Lost += int64(n)
			}
		}
		evidence := max(c.bot.Evidence(s), 0)
		if evidence != agentStored {
			r.Duplicated += int64(max(evidence-agentStored, 0))
			if evidence < agentStored {
				r.Lost += int64(agentStored - evidence) // stored but never applied to the graph
			}
		}
		stored += int64(agentStored)
	}
	r.StepsStored = stored
	return nil
}

func waitApplied(ctx context.Context, js jetstream.JetStream) error {
	return client.WaitApplied(ctx, js, 5*time.Minute,
		map[string]string{daemon.StreamRLDS: daemon.DurableRLDS, daemon.StreamCMS: daemon.DurableCMS})
}

func consumerLag(ctx context.Context, js jetstream.JetStream) (int64, error) {
	cons, err := js.Consumer(ctx, daemon.StreamRLDS, daemon.DurableRLDS)
	if err != nil {
		return 0, err
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(ci.NumPending) + int64(ci.NumAckPending), nil
}

// pct is the p-th percentile of ds in milliseconds (100: the maximum).
func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return float64(s[i].Microseconds()) / 1000
}

// rssMB is a process's resident set size in MB (Linux /proc).
func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// loadAvg is the 1-minute load average (Linux /proc; 0 elsewhere).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// proc is the daemon process.
type proc struct {
	cmd              *exec.Cmd
	natsURL, httpURL string
	stderr           *os.File
}

func startDaemon(ctx context.Context, bin, dir string) (*proc, error) {
	natsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return nil, err
	}
	p := &proc{natsURL: "nats://" + natsAddr, httpURL: "http://" + httpAddr, stderr: logf}
	p.cmd = exec.Command(bin, "serve", "--data", dir, "--nats-addr", natsAddr, "--http-addr", httpAddr, "--log-level", "warn")
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	for {
		resp, err := http.Get(p.httpURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			p.kill()
			return nil, fmt.Errorf("daemon not ready: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *proc) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("daemon exited with %v (log %s)", err, p.stderr.Name())
	}
	return nil
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
	p.stderr.Close()
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func getJSON(url string, v any) error {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Print writes the report for people.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "soak: %d controllers × %.0f Hz (%d steps a message) + planner %.0f req/s for %.0fs on loopback (%d CPUs, load average %.1f → %.1f)\n",
		r.Controllers, r.RateHz, r.StepsPerMsg, r.PlannerRPS, r.DurationS, r.CPUs, r.LoadFrom, r.LoadTo)
	fmt.Fprintf(w, "  ingest: %d steps acknowledged (%.0f steps/s), %d publish retries\n", r.StepsAcked, r.StepsPerS, r.PublishErrors)
	fmt.Fprintf(w, "  planner over NATS, p50 / p99 / max (server-side p99; of it, waiting for the graph's read lock, p99):\n")
	for _, l := range []struct {
		name string
		l    Latency
	}{{"idle before", r.PlannerIdleBefore}, {"under load", r.PlannerUnderLoad}, {"idle after", r.PlannerIdleAfter}} {
		fmt.Fprintf(w, "    %-12s %7.2f / %7.2f / %7.2f ms  (%.0f µs; %.0f µs)  %d requests, %d errors\n",
			l.name, l.l.P50ms, l.l.P99ms, l.l.MaxMs, l.l.ServerP99us, l.l.ServerWaitP99us, l.l.N, l.l.Errors)
	}
	fmt.Fprintf(w, "  ingest lag: unapplied messages max %d, mean %.1f; ack→visible p50 %.1f ms, p99 %.1f ms, max %.1f ms; drained in %.2fs\n",
		r.LagMsgsMax, r.LagMsgsMean, r.VisibleP50ms, r.VisibleP99ms, r.VisibleMaxMs, r.DrainS)
	fmt.Fprintf(w, "  daemon RSS: %.0f MB before load, %.0f MB at its end (max %.0f), %.0f MB after idle: growth %+.0f MB\n",
		r.RSSStartMB, r.RSSEndLoadMB, r.RSSMaxMB, r.RSSAfterIdle, r.RSSEndLoadMB-r.RSSStartMB)
	fmt.Fprintf(w, "  audit: %d steps stored (with %d seed steps); lost %d, duplicated %d, dead-lettered %d\n",
		r.StepsStored, r.SeedSteps, r.Lost, r.Duplicated, r.DeadLettered)
	if r.CheckOK != nil {
		if *r.CheckOK {
			fmt.Fprintln(w, "  ctxgraph check: ok")
		} else {
			fmt.Fprintf(w, "  ctxgraph check: PROBLEMS %s\n", r.CheckProblems)
		}
	}
	if r.OK() {
		fmt.Fprintln(w, "soak: ok")
	} else {
		fmt.Fprintln(w, "soak: FAILED")
	}
}
