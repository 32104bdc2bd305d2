package bench

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	rtrace "runtime/trace"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/exp/trace"

	"github.com/ctxgraph/ctxgraph/particle"
)

// A goroutine's time in an execution trace falls in one of four states:
// on a CPU; runnable, waiting for a P (on this VM, often for an idle
// vCPU to wake, or for the other goroutines ahead of it); in a system
// call (a write, an fsync, a page fault's syscall path); or blocked on
// a channel, a lock or the network poller.
const (
	schedRunning = iota
	schedRunnable
	schedSyscall
	schedBlocked
	schedStates
)

var schedStateNames = [schedStates]string{"running", "runnable", "syscall", "blocked"}

// schedTimes is a stretch of goroutine time by state.
type schedTimes [schedStates]time.Duration

func (s schedTimes) total() (t time.Duration) {
	for _, d := range s {
		t += d
	}
	return t
}

// traceSummary is what an execution trace says of the graph writer and
// of the CPU: the writer's stages (particle's Region* regions) by
// state, the CPU time of the goroutines by the function they started
// in, most first, and the same of the CPU time they took while the
// writer waited for a CPU (runnable inside one of its stages): who it
// waited behind.
type traceSummary struct {
	stages    map[string]schedTimes
	cpu       []goroutineCPU
	waitedFor []goroutineCPU
	span      time.Duration
}

// goroutineCPU is the CPU time of the goroutines started in fn.
type goroutineCPU struct {
	fn  string
	cpu time.Duration
}

// goTrack follows one goroutine through a trace.
type goTrack struct {
	state   int
	known   bool // its state is known (not before its first transition)
	since   trace.Time
	regions []string // the regions it is in, innermost last
	fn      string   // the function it started in, once seen
	waiting bool     // runnable inside a wanted region (counted in waiters)
}

// schedState is the summary's state for a goroutine state.
func schedState(s trace.GoState) (int, bool) {
	switch s {
	case trace.GoRunning:
		return schedRunning, true
	case trace.GoRunnable:
		return schedRunnable, true
	case trace.GoSyscall:
		return schedSyscall, true
	case trace.GoWaiting:
		return schedBlocked, true
	}
	return 0, false
}

// startFunc is the function at the bottom of st: where its goroutine
// started.
func startFunc(st trace.Stack) string {
	var fn string
	for f := range st.Frames() {
		fn = f.Func
	}
	return fn
}

// summarizeTrace reads an execution trace and sums, for every goroutine,
// its time by state inside each region of the given types and, for the
// CPU table, its running time.
func summarizeTrace(r io.Reader, regions ...string) (traceSummary, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return traceSummary{}, fmt.Errorf("execution trace: %w", err)
	}
	want := map[string]bool{}
	for _, t := range regions {
		want[t] = true
	}
	sum := traceSummary{stages: map[string]schedTimes{}}
	gs := map[trace.GoID]*goTrack{}
	cpu, waitedFor := map[string]time.Duration{}, map[string]time.Duration{}
	// The goroutines on a CPU, and how many are runnable inside a wanted
	// region: while some are, the running ones' time is what they
	// waited behind.
	running := map[trace.GoID]*goTrack{}
	waiters := 0
	track := func(id trace.GoID) *goTrack {
		g := gs[id]
		if g == nil {
			g = &goTrack{}
			gs[id] = g
		}
		return g
	}
	// flush counts g's time in its state since the last event of it.
	flush := func(g *goTrack, now trace.Time) {
		if g.known {
			d := time.Duration(now - g.since)
			if n := len(g.regions); n > 0 && want[g.regions[n-1]] {
				t := sum.stages[g.regions[n-1]]
				t[g.state] += d
				sum.stages[g.regions[n-1]] = t
			}
			if g.state == schedRunning {
				cpu[g.fn] += d
			}
		}
		g.since = now
	}
	var first, last trace.Time
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return traceSummary{}, fmt.Errorf("execution trace: %w", err)
		}
		if first == 0 {
			first, last = ev.Time(), ev.Time()
		}
		if waiters > 0 { // since the event before this one
			for _, g := range running {
				waitedFor[g.fn] += time.Duration(ev.Time() - last)
			}
		}
		last = ev.Time()
		switch ev.Kind() {
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			id := st.Resource.Goroutine()
			g := track(id)
			from, to := st.Goroutine()
			if g.fn == "" || strings.HasPrefix(g.fn, "runtime.") {
				// The goroutine's own stack: when it stops running, or
				// where a new one starts.
				if from == trace.GoRunning {
					g.fn = startFunc(ev.Stack())
				} else if from == trace.GoNotExist {
					g.fn = startFunc(st.Stack)
				}
			}
			flush(g, ev.Time())
			g.state, g.known = schedState(to)
			if to == trace.GoRunning {
				running[id] = g
			} else {
				delete(running, id)
			}
			if g.waiting {
				g.waiting = false
				waiters--
			}
			if n := len(g.regions); to == trace.GoRunnable && n > 0 && want[g.regions[n-1]] {
				g.waiting = true
				waiters++
			}
		case trace.EventRegionBegin, trace.EventRegionEnd:
			id := ev.Goroutine()
			if id == trace.NoGoroutine {
				continue
			}
			g := track(id)
			flush(g, ev.Time())
			typ := ev.Region().Type
			if ev.Kind() == trace.EventRegionBegin {
				g.regions = append(g.regions, typ)
			} else if n := len(g.regions); n > 0 && g.regions[n-1] == typ {
				g.regions = g.regions[:n-1]
			}
		}
	}
	for _, g := range gs {
		flush(g, last)
	}
	sum.span = time.Duration(last - first)
	sum.cpu, sum.waitedFor = byCPU(cpu), byCPU(waitedFor)
	return sum, nil
}

// byCPU is m's entries, most CPU first.
func byCPU(m map[string]time.Duration) []goroutineCPU {
	out := make([]goroutineCPU, 0, len(m))
	for fn, d := range m {
		out = append(out, goroutineCPU{fn, d})
	}
	slices.SortFunc(out, func(a, b goroutineCPU) int { return cmp.Compare(b.cpu, a.cpu) })
	return out
}

// writerStages are the graph writer's regions, in the order it runs them.
var writerStages = []struct{ name, region string }{
	{"apply", particle.RegionApply}, {"encode", particle.RegionEncode},
	{"commit", particle.RegionCommit}, {"publish", particle.RegionPublish},
}

// writerRegions are the writer's stages' region types.
func writerRegions() []string {
	regions := make([]string, len(writerStages))
	for i, s := range writerStages {
		regions[i] = s.region
	}
	return regions
}

// startTrace starts an execution trace of the process into path when
// profiles are asked for and the daemon runs in this process; stop ends
// it (again, nothing). With nothing to trace, path is "".
func (r *runner) startTrace(name string) (path string, stop func(), err error) {
	if r.o.ProfileDir == "" || r.d == nil {
		return "", func() {}, nil
	}
	if err := os.MkdirAll(r.o.ProfileDir, 0o755); err != nil {
		return "", nil, err
	}
	path = filepath.Join(r.o.ProfileDir, name+".trace")
	f, err := os.Create(path)
	if err != nil {
		return "", nil, fmt.Errorf("execution trace: %w", err)
	}
	if err := rtrace.Start(f); err != nil {
		f.Close()
		return "", nil, fmt.Errorf("execution trace: %w", err)
	}
	return path, sync.OnceFunc(func() { rtrace.Stop(); f.Close() }), nil
}

// writerSchedFigures reads the execution trace at path, of a phase that
// committed steps steps, and records how the graph writer spent each
// stage (prefix+"writer_STAGE_STATE_us_per_step") and its share of the
// writer's time in each state (prefix+"writer_STATE_share"), then names
// the goroutines that took the CPU.
func (r *runner) writerSchedFigures(prefix, path string, steps int) error {
	if path == "" || steps == 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sum, err := summarizeTrace(f, writerRegions()...)
	if err != nil {
		return err
	}
	var all schedTimes
	var line strings.Builder
	for _, s := range writerStages {
		t := sum.stages[s.region]
		fmt.Fprintf(&line, "; %s", s.name)
		for st, d := range t {
			all[st] += d
			r.fig[fmt.Sprintf("%swriter_%s_%s_us_per_step", prefix, s.name, schedStateNames[st])] = float64(d.Microseconds()) / float64(steps)
			fmt.Fprintf(&line, " %.0f", float64(d.Microseconds())/float64(steps))
		}
	}
	if total := all.total(); total > 0 {
		for st, d := range all {
			r.fig[prefix+"writer_"+schedStateNames[st]+"_share"] = d.Seconds() / total.Seconds()
		}
		r.say("ingest: the graph writer in the trace (%s): %.0f%% of its time on a CPU, %.0f%% waiting for one, %.0f%% in system calls, %.0f%% blocked; µs a step running / runnable / syscall / blocked%s",
			path, 100*r.fig[prefix+"writer_running_share"], 100*r.fig[prefix+"writer_runnable_share"],
			100*r.fig[prefix+"writer_syscall_share"], 100*r.fig[prefix+"writer_blocked_share"], line.String())
	}
	r.say("ingest: CPU seconds by where goroutines started, over the trace's %.1f s%s", sum.span.Seconds(), cpuList(sum.cpu))
	r.say("ingest: while the writer waited for a CPU, the goroutines on one, CPU seconds by where they started%s", cpuList(sum.waitedFor))
	return nil
}

// cpuList is the first eight of gs as "; fn seconds" each.
func cpuList(gs []goroutineCPU) string {
	var b strings.Builder
	for _, g := range gs[:min(8, len(gs))] {
		fmt.Fprintf(&b, "; %s %.2f", shortFunc(g.fn), g.cpu.Seconds())
	}
	return b.String()
}

// shortFunc is fn without its package path.
func shortFunc(fn string) string {
	if fn == "" {
		return "(unknown)"
	}
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		return fn[i+1:]
	}
	return fn
}
