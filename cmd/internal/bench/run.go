package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/cmd/internal/hugepage"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/wave"
)

// DefaultVisibilityShare is the share of a workload's steps the paced
// phase sends: about 10 s of steady ingest on the medium workload at the
// rate it runs here, long enough that the visibility p99 holds a few
// garbage collections rather than depending on whether one falls into
// the window (at 0.05, about 2 s, the p99 of one build swung from 62 to
// 567 ms between runs).
const DefaultVisibilityShare = 0.25

// RunOptions configures [Run].
type RunOptions struct {
	// Preset and Seed name the workload.
	Preset string
	Seed   uint64
	// Dir holds the workload files; they are generated there first if it
	// has none (in a temporary directory when Dir is empty).
	Dir string
	// Data is the daemon's data directory: a fresh temporary one, removed
	// afterwards, when empty. It must not exist yet.
	Data string
	// Config is the daemon's configuration (DefaultConfig when nil); the
	// run sets its data directory and loopback listen addresses.
	Config *daemon.Config
	// NATS, when set, runs against a daemon already listening there
	// instead of starting one; only what a client can measure is
	// reported (ingest, visibility through HTTP, the planner over NATS).
	NATS string
	// HTTP is that daemon's HTTP address (for visibility probes).
	HTTP string
	// Threads are the planner client counts measured (default 1, 2).
	Threads []int
	// Queries caps the workload queries asked (0: all of them).
	Queries int
	// ExactQueries caps the queries the exact baseline planner answers
	// per configuration (default 50; negative: all of them): a filtered
	// flat scan of the medium store takes a good part of a second.
	ExactQueries int
	// ExactThreads measures the exact baseline on every thread count,
	// not only on one.
	ExactThreads bool
	// VisibilityRate is the step rate of the paced phase that measures
	// visibility; 0 picks min(20,000, half the bulk rate).
	VisibilityRate float64
	// VisibilityShare is the share of the steps sent in the paced phase
	// (default DefaultVisibilityShare; a larger share measures a longer
	// stretch of steady ingest, with more garbage collections in it).
	VisibilityShare float64
	// MixedShare is the share of the steps sent in the mixed phase,
	// between the bulk and the paced ones, with the planner asked
	// beside them (in process; default DefaultMixedShare, negative: no
	// mixed phase).
	MixedShare float64
	// Wire is the format the episodes and spans are sent in: "json" (the
	// default) or "msgpack" (rlds/wire_msgpack.go; the workload's JSON
	// written as msgpack before anything is timed).
	Wire string
	// StepsPerMessage > 1 sends the bulk phase's steps in steps messages
	// of up to that many steps of one episode (rlds.KindSteps), as an
	// upload or a controller catching up would; the mixed and paced
	// phases send one step a message, as a live controller does.
	// Default 1.
	StepsPerMessage int
	// Phases are the phases run after the load, of "planner" and
	// "reopen" (default both; ingest always runs).
	Phases []string
	// CallsDir, when set, receives each latency measurement's timed
	// calls, one file per configuration (writeCalls).
	CallsDir string
	// ProfileDir, when set, receives a CPU profile of each phase
	// (ingest.pprof, planner.pprof, reopen.pprof) and, with the daemon
	// in this process, execution traces of the bulk and paced phases
	// (ingest.bulk.trace, ingest.paced.trace), summarised in the writer's
	// scheduling figures.
	ProfileDir string
	// MemoryLimit, when positive, is the Go memory limit of the run (the
	// daemon runs in this process), as GOMEMLIMIT sets it.
	MemoryLimit int64
	// MaxRSS, when positive, ends the run with an error once the
	// process's resident memory passes it (before the machine runs out).
	MaxRSS int64
	// Serve, when set, is the command line of a daemon (the ctxgraph
	// binary and its serve subcommand): after the reopen phase, the run
	// stops its daemon and starts Serve on the same data directory and
	// configuration, a process of its own as a restart is, and times it
	// until its first planner answer over NATS (reopen.process_s;
	// processreopen.go).
	Serve []string
	// Out receives progress lines and the final table (nil: discard).
	Out io.Writer
	// Log receives the daemon's logs (nil: discard).
	Log *slog.Logger
}

func (o *RunOptions) ensureDefaults() {
	if o.Phases == nil {
		o.Phases = []string{"planner", "reopen"}
	}
	if len(o.Threads) == 0 {
		o.Threads = []int{1, 2}
	}
	if o.Wire == "" {
		o.Wire = WireJSON
	}
	if o.VisibilityShare == 0 {
		o.VisibilityShare = DefaultVisibilityShare
	}
	if o.MixedShare == 0 {
		o.MixedShare = DefaultMixedShare
	}
	if o.ExactQueries == 0 {
		o.ExactQueries = 50
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// runner is one run in progress.
type runner struct {
	o   RunOptions
	m   *Manifest
	fig figures
	cfg daemon.Config
	d   *daemon.Daemon // nil against an external daemon
	// cancelDaemon ends the context d was started under.
	cancelDaemon context.CancelFunc
	nc           *nats.Conn
	js           jetstream.JetStream
	prefix       string
	natsURL      string
	httpURL      string
	w            *workload
	qs           []Query
	t0           time.Time
	// exactTop is each query's exact top 10 ids from the recall pass
	// (nil where exact search found none), for the recall after the
	// reopen: the store is the same, so is the exact answer.
	exactTop [][]uint64
	// far is, per query, whether the recall pass's exact 10th best hit
	// under its filters scores below FarScore (nil before that pass).
	far []bool
}

// Run measures ctxgraph on a workload: it loads it through the real
// ingest path (NATS publishes to a daemon), asks the planner the
// workload's queries in-process and over NATS, with the exact brute-force
// baseline beside every figure, reopens the store, and reports.
func Run(ctx context.Context, o RunOptions) (*Report, error) {
	o.ensureDefaults()
	if o.VisibilityShare < 0 || o.VisibilityShare >= 1 {
		return nil, fmt.Errorf("bench: the paced phase's share of the steps is %g, want more than 0 and less than 1", o.VisibilityShare)
	}
	if o.VisibilityShare+max(o.MixedShare, 0) >= 1 {
		return nil, fmt.Errorf("bench: the paced and mixed phases' shares of the steps (%g + %g) leave none for the bulk phase", o.VisibilityShare, o.MixedShare)
	}
	if o.StepsPerMessage < 0 || o.StepsPerMessage > rlds.MaxStepsPerMessage {
		return nil, fmt.Errorf("bench: %d steps a message, want 1..%d", o.StepsPerMessage, rlds.MaxStepsPerMessage)
	}
	if o.MemoryLimit > 0 {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(o.MemoryLimit))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if o.MaxRSS > 0 {
		go watchRSS(ctx, o.MaxRSS, cancel)
	}
	r := &runner{o: o, fig: figures{}, t0: time.Now()}
	rep := &Report{Preset: o.Preset, Seed: o.Seed, Machine: machine(), Started: r.t0.UTC()}
	wake := wakeLatency(wakeSamples)
	r.fig["machine.wake_p50_us"], r.fig["machine.wake_p99_us"] = wake.pct(50), wake.pct(99)
	r.say("work handed to a second goroutine while the first stays busy starts after p50 %.0f µs, p99 %.0f µs (machine.wake_*)",
		wake.pct(50), wake.pct(99))
	r.fig["machine.mem_latency_ns"], r.fig["machine.dot384_ns"] = memoryLatency(), dotTime()
	r.say("a load that misses the caches takes %.0f ns, a 384-d float32 dot product %.0f ns (machine.mem_latency_ns, machine.dot384_ns: compare runs of other days by these)",
		r.fig["machine.mem_latency_ns"], r.fig["machine.dot384_ns"])
	if us, ok := pageFaultTime(); ok {
		r.fig["machine.page_fault_us"] = us
		r.say("a fresh 4 KiB page of memory takes %.1f µs to fault in (machine.page_fault_us: a fresh daemon faults its heap and Badger's logs in page by page)", us)
	}
	if err := r.workload(); err != nil {
		return nil, err
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	defer r.stop()
	rep.Index = r.indexName()
	rep.Config = r.configSummary()
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"transport", r.transportBaseline},
		{"ingest", r.ingest},
		{"planner", r.planner},
		{"reopen", r.reopen},
	}
	for _, s := range steps {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The ingest always runs (the phases after it need its graph),
		// and with an in-process daemon the transport baseline before it.
		always := s.name == "ingest" || s.name == "transport"
		if r.d == nil && (s.name == "reopen" || s.name == "transport") || !always && !slices.Contains(o.Phases, s.name) {
			continue
		}
		stop, err := r.profile(s.name)
		if err != nil {
			return nil, err
		}
		cpu, gc, ticks := cpuTime(), readGC(), readCPUTicks()
		err = s.fn(ctx)
		stop()
		if err != nil {
			if c := context.Cause(ctx); c != nil && c != ctx.Err() {
				err = c
			}
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		r.fig[s.name+".cpu_s"] = (cpuTime() - cpu).Seconds()
		// The collector's share: on a heap mostly made of the long-lived
		// view, each cycle marks all of it (memory.gc_percent).
		g := readGC()
		r.fig[s.name+".gc_cycles"] = float64(g.cycles - gc.cycles)
		r.fig[s.name+".gc_cpu_s"] = g.cpu - gc.cpu
		steal := ""
		if share := stealShare(ticks, readCPUTicks()); share >= 0 {
			r.fig[s.name+".host_steal_share"] = share
			steal = fmt.Sprintf("; the host took %.1f%% of the vCPUs' time (steal)", 100*share)
		}
		r.say("%s: %.1f s of CPU, of which the garbage collector %.1f s in %d cycles%s",
			s.name, r.fig[s.name+".cpu_s"], r.fig[s.name+".gc_cpu_s"], g.cycles-gc.cycles, steal)
		if r.d != nil {
			switch s.name {
			case "ingest":
				r.heapFigures("gc.", "load")
			case "reopen":
				r.heapFigures("reopen.gc.", "reopen")
			}
		}
	}
	if slices.Contains(o.Phases, "reopen") {
		if err := r.reopenProcess(ctx); err != nil {
			return nil, err
		}
	}
	if cpu, steps := r.fig["ingest.cpu_s"], r.fig["graph.steps"]; steps > 0 {
		r.fig["ingest.cpu_us_per_step"] = cpu * 1e6 / steps
	}
	r.fig["run.seconds"] = time.Since(r.t0).Seconds()
	rep.Machine.LoadEnd = loadavg()
	rep.Figures = r.fig
	rep.Targets = checkTargets(r.fig, r.m.Preset.Name)
	return rep, nil
}

// errMemory ends a run whose memory passes RunOptions.MaxRSS.
var errMemory = errors.New("bench: resident memory over --max-rss")

// watchRSS cancels the run once the process's RSS passes limit.
func watchRSS(ctx context.Context, limit int64, cancel context.CancelCauseFunc) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if n := rss(); n > limit {
			cancel(fmt.Errorf("%w: %d MB", errMemory, n>>20))
			return
		}
	}
}

// say prints a progress line.
func (r *runner) say(format string, a ...any) {
	fmt.Fprintf(r.o.Out, "%6.1fs  %s\n", time.Since(r.t0).Seconds(), fmt.Sprintf(format, a...))
}

// workload finds or generates the workload and loads it.
func (r *runner) workload() error {
	p, err := PresetNamed(r.o.Preset)
	if err != nil {
		return err
	}
	if r.o.Wire != WireJSON && r.o.Wire != WireMsgpack {
		return fmt.Errorf("%w: wire %q: want %s or %s", ErrInvalid, r.o.Wire, WireJSON, WireMsgpack)
	}
	dir := r.o.Dir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("ctxgraph-bench-%s-%d", p.Name, r.o.Seed))
	}
	m, err := ReadManifest(dir)
	if err != nil || m.Preset != p || m.Seed != r.o.Seed {
		if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, ErrInvalid) {
			return err
		}
		if m != nil && (m.Preset.Name != p.Name || m.Seed != r.o.Seed) && r.o.Dir != "" {
			return fmt.Errorf("%w: %s holds preset %s seed %d, not %s seed %d", ErrInvalid, dir, m.Preset.Name, m.Seed, p.Name, r.o.Seed)
		}
		r.say("generating the %s workload (seed %d) in %s", p.Name, r.o.Seed, dir)
		if m, err = Generate(GenOptions{Preset: p, Seed: r.o.Seed, Out: dir}); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
	}
	r.m = m
	r.fig["gen.seconds"] = m.GenSeconds
	t := time.Now()
	if r.w, err = loadWorkload(dir, r.prefixOr(), r.o.Wire == WireMsgpack); err != nil {
		return err
	}
	r.w.cut(r.o.VisibilityShare, r.o.MixedShare)
	if err := r.w.groupBulk(r.o.StepsPerMessage, r.prefixOr(), r.o.Wire == WireMsgpack); err != nil {
		return err
	}
	r.fig["ingest.steps_per_message"] = float64(max(r.o.StepsPerMessage, 1))
	if r.qs, err = ReadQueries(dir); err != nil {
		return err
	}
	r.say("workload %s: %d messages (%d steps, %d events), %d spans, %d queries; loaded in %.1fs",
		p.Name, m.Messages, m.Steps, m.Events, m.Spans, len(r.qs), time.Since(t).Seconds())
	return nil
}

func (r *runner) prefixOr() string {
	if r.o.Config != nil && r.o.Config.NATS.Prefix != "" {
		return r.o.Config.NATS.Prefix
	}
	return "ctxgraph"
}

// start brings up the daemon on a fresh data directory (or connects to
// the external one).
func (r *runner) start(ctx context.Context) error {
	r.prefix = r.prefixOr()
	if r.o.NATS != "" {
		r.natsURL, r.httpURL = r.o.NATS, r.o.HTTP
		if r.httpURL != "" && !hasScheme(r.httpURL) {
			r.httpURL = "http://" + r.httpURL
		}
	} else {
		r.cfg = daemon.DefaultConfig()
		if r.o.Config != nil {
			r.cfg = *r.o.Config
		}
		data := r.o.Data
		if data == "" {
			var err error
			if data, err = os.MkdirTemp("", "ctxgraph-bench-data-"); err != nil {
				return err
			}
		} else if _, err := os.Stat(data); err == nil {
			return fmt.Errorf("%w: data directory %s exists (the run needs a fresh one)", ErrInvalid, data)
		}
		r.cfg.Data = data
		r.cfg.NATS.Addr, r.cfg.HTTP.Addr = "127.0.0.1:0", "127.0.0.1:0"
		d, err := r.startDaemon(ctx)
		if err != nil {
			return fmt.Errorf("start daemon: %w", err)
		}
		r.d = d
		r.natsURL, r.httpURL = d.NATSURL(), "http://"+d.HTTPAddr()
		r.say("daemon up: data %s, nats %s, index %s; THP mode %q, memory.huge_pages %v",
			data, r.natsURL, r.indexName(), hugepage.Mode(), r.cfg.Memory.HugePages)
	}
	nc, js, err := client.Connect(r.natsURL, "ctxgraph-bench")
	if err != nil {
		return err
	}
	r.nc, r.js = nc, js
	return nil
}

func hasScheme(u string) bool {
	return len(u) > 7 && (u[:7] == "http://" || (len(u) > 8 && u[:8] == "https://"))
}

// stop shuts down what the run started and removes a temporary data
// directory.
func (r *runner) stop() {
	if r.nc != nil {
		r.nc.Close()
	}
	if r.d != nil {
		r.shutdown(context.Background())
	}
	if r.o.Data == "" && r.cfg.Data != "" {
		_ = os.RemoveAll(r.cfg.Data)
	}
}

func (r *runner) indexName() string {
	if r.d == nil {
		return "external"
	}
	return indexKind(r.d.VectorIndex())
}

func (r *runner) configSummary() map[string]any {
	if r.d == nil {
		return map[string]any{"nats": r.natsURL, "wire": r.o.Wire}
	}
	return map[string]any{"wire": r.o.Wire, "sync_writes": r.cfg.Ingest.SyncWrites, "batch_size": r.cfg.Ingest.BatchSize,
		"embed": r.cfg.Embed.Provider, "dims": r.cfg.Embed.Dimensions, "per_node_fanout": r.cfg.Planner.PerNodeFanout}
}

// startDaemon starts a daemon on the run's configuration, under a
// context of its own: Start watches its context for the rest of the
// daemon's life, and the run's would keep a shut-down daemon (its whole
// graph) in memory until the run ends.
func (r *runner) startDaemon(ctx context.Context) (*daemon.Daemon, error) {
	dctx, cancel := context.WithCancel(ctx)
	d, err := daemon.Start(dctx, r.cfg, r.o.Log)
	if err != nil {
		cancel()
		return nil, err
	}
	r.cancelDaemon = cancel
	return d, nil
}

// shutdown stops the running daemon and lets it go.
func (r *runner) shutdown(ctx context.Context) error {
	err := r.d.Shutdown(ctx)
	r.cancelDaemon()
	r.d = nil
	return err
}

// profile starts a CPU profile of phase when asked for; stop ends it and
// writes the allocations so far (PHASE.allocs.pprof): the process's since
// its start, so that the phase's own are those over the previous phase's
// file (go tool pprof -sample_index=alloc_space -base PREV.allocs.pprof
// PHASE.allocs.pprof).
func (r *runner) profile(phase string) (stop func(), err error) {
	if r.o.ProfileDir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(r.o.ProfileDir, 0o755); err != nil {
		return nil, err
	}
	stopCPU, err := StartCPUProfile(filepath.Join(r.o.ProfileDir, phase+".pprof"))
	if err != nil {
		return nil, err
	}
	return func() {
		stopCPU()
		// The profile counts allocations as of the last collection:
		// one now makes it count the whole phase, so that two phases'
		// profiles subtract (pprof -base).
		runtime.GC()
		path := filepath.Join(r.o.ProfileDir, phase+".allocs.pprof")
		f, err := os.Create(path)
		if err == nil {
			err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		if err != nil {
			r.say("allocation profile %s: %v", path, err)
		}
	}, nil
}

// StartCPUProfile profiles the process into path until stop is called.
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// reopen shuts the daemon down and starts it again on the same data
// directory: the time until it answers a planner request is reopen_s.
// Memory and disk are measured on the reopened daemon, which holds
// nothing the run put in it besides what it loads itself.
func (r *runner) reopen(ctx context.Context) error {
	r.nc.Close()
	r.nc = nil
	t := time.Now()
	if err := r.shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	r.fig["shutdown_s"] = time.Since(t).Seconds()
	du := diskUsage(r.cfg.Data)
	r.w = nil // the workload's bodies are not the daemon's memory
	runtime.GC()
	debug.FreeOSMemory()

	t = time.Now()
	d, err := r.startDaemon(ctx)
	if err != nil {
		return fmt.Errorf("start again: %w", err)
	}
	r.d = d
	started := time.Since(t)
	if err := r.firstAnswer(ctx); err != nil {
		return err
	}
	r.fig["reopen_s"] = time.Since(t).Seconds()
	r.fig["reopen.start_s"] = started.Seconds()
	if st, ok := d.StartTimes(); ok {
		for _, p := range st.Phases() {
			r.fig["reopen.start."+p.Name+"_s"] = p.Took.Seconds()
		}
	}
	r.fig["reopen.vectors"] = float64(d.VectorIndex().Len())
	// The vector index's splits are read from their snapshot, or filled,
	// in the background once the daemon serves: memory is measured once
	// they are whole, as a serving daemon holds it.
	if x, ok := d.VectorIndex().(*wave.IVF); ok {
		for !x.SplitsReady() || d.SplitsLoading() {
			if time.Since(t) > 5*time.Minute {
				return fmt.Errorf("the vector index's splits are not filled %v after the start", time.Since(t).Round(time.Second))
			}
			time.Sleep(10 * time.Millisecond)
		}
		r.fig["reopen.splits_ready_s"] = time.Since(t).Seconds()
		r.fig["reopen.splits_from_snapshot"] = 0
		if d.SplitsFromSnapshot() {
			r.fig["reopen.splits_from_snapshot"] = 1
		}
	}
	runtime.GC()
	debug.FreeOSMemory()
	edges := r.fig["graph.edges"]
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.fig["rss_bytes"] = float64(rss())
	if r.o.ProfileDir != "" {
		if f, err := os.Create(filepath.Join(r.o.ProfileDir, "heap.pprof")); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	r.fig["heap_bytes"] = float64(ms.HeapInuse)
	r.fig["rss_bytes_per_edge"] = r.fig["rss_bytes"] / edges
	r.fig["disk_bytes"] = float64(du.total)
	r.fig["disk.graph_bytes"] = float64(du.graph)
	r.fig["disk.jetstream_bytes"] = float64(du.jetstream)
	r.fig["disk.view_snapshot_bytes"] = float64(du.viewSnapshot)
	r.fig["disk.vector_snapshots_bytes"] = float64(du.vectorSnapshots)
	r.fig["disk_bytes_per_edge"] = float64(du.total) / edges
	r.fig["disk.graph_bytes_per_edge"] = float64(du.graph) / edges
	how := "filled"
	if d.SplitsFromSnapshot() {
		how = "read from their snapshot"
	}
	r.say("reopened in %.2fs (%d vectors; the index's splits %s, ready at %.2fs); RSS %.0f MB (%.0f B/edge), disk %.0f MB (%.0f B/edge; the view snapshot %.0f MB of it, the vector index's %.0f MB)",
		r.fig["reopen_s"], d.VectorIndex().Len(), how, r.fig["reopen.splits_ready_s"], r.fig["rss_bytes"]/1e6, r.fig["rss_bytes_per_edge"],
		r.fig["disk_bytes"]/1e6, r.fig["disk_bytes_per_edge"], r.fig["disk.view_snapshot_bytes"]/1e6, r.fig["disk.vector_snapshots_bytes"]/1e6)
	return r.recallAfterReopen(ctx)
}
