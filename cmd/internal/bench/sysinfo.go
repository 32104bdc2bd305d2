package bench

import (
	"bufio"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ctxgraph/ctxgraph/cmd/internal/hugepage"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// Machine describes where a run ran.
type Machine struct {
	NProc      int    `json:"nproc"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPU        string `json:"cpu"`
	MemBytes   int64  `json:"mem_bytes"`
	GoVersion  string `json:"go"`
	OS         string `json:"os"`
	// LoadStart and LoadEnd are /proc/loadavg at the start and the end:
	// other work on the machine moves the figures.
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
	// THP is the kernel's transparent huge page mode (always, madvise,
	// never): with "always" the heap gets 2 MiB pages and the planner's
	// cold reads miss the TLB far less (BENCHMARKS.md).
	THP string `json:"thp,omitempty"`
}

func machine() Machine {
	m := Machine{NProc: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, LoadStart: loadavg(), THP: hugepage.Mode()}
	m.CPU = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		n, _ := strconv.ParseInt(strings.Fields(kb)[0], 10, 64)
		m.MemBytes = n << 10
	}
	return m
}

// procField is the value of the first "name: value" line of a /proc file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// wakeSamples is how many hand-offs wakeLatency times.
const wakeSamples = 400

// wakeLatency times how long work handed to another goroutine waits
// before it runs while the goroutine that handed it over stays busy: a
// goroutine parked on a channel is sent a value, and the sender spins
// until the receiver has run. On a machine with a processor to spare
// that is a few microseconds; on a VM whose idle vCPU must be woken by
// the host it can be the length of a planner call, and then splitting a
// call over two goroutines does not shorten it (BENCHMARKS.md,
// fifteenth round). It returns n samples in µs, each taken after a rest
// of about 300 µs (so that the other processor goes idle, as it does
// between planner calls); they take about n × 0.5 ms.
func wakeLatency(n int) *dist {
	start := make(chan time.Time)
	ran := make(chan time.Duration, 1)
	go func() {
		for t0 := range start {
			ran <- time.Since(t0)
		}
	}()
	defer close(start)
	out := &dist{}
	for range n {
		time.Sleep(300 * time.Microsecond)
		start <- time.Now()
		for waiting := true; waiting; {
			select {
			case d := <-ran:
				out.addDur(d, time.Microsecond)
				waiting = false
			default:
			}
		}
	}
	return out
}

// cpuTicks is the machine's CPU time from /proc/stat's "cpu" line, in
// clock ticks: all of it, and what the host took from this VM's vCPUs
// while they had work (steal). ok is false where there is none to read.
type cpuTicks struct {
	all, steal uint64
	ok         bool
}

func readCPUTicks() cpuTicks {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}
	}
	return parseCPUTicks(string(b))
}

// parseCPUTicks reads the "cpu" line that starts a /proc/stat text.
func parseCPUTicks(stat string) cpuTicks {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}
	}
	var t cpuTicks
	// user nice system idle iowait irq softirq steal (guest time is
	// inside user's).
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuTicks{}
		}
		t.all += n
		if i == 7 {
			t.steal = n
		}
	}
	t.ok = true
	return t
}

// stealShare is the share of the vCPUs' time the host took between t0
// and t1: on a VM whose host runs other guests, a call can stall for
// milliseconds in it, wherever it is. -1 when unknown.
func stealShare(t0, t1 cpuTicks) float64 {
	if !t0.ok || !t1.ok || t1.all <= t0.all {
		return -1
	}
	return float64(t1.steal-t0.steal) / float64(t1.all-t0.all)
}

// rss is the resident set size of this process in bytes (0 if unknown).
func rss() int64 { return procKB("/proc/self/status", "VmRSS") }

// hugeBytes is the process's anonymous memory in transparent huge pages.
func hugeBytes() int64 { return procKB("/proc/self/smaps_rollup", "AnonHugePages") }

// procKB is a "name: N kB" field of a /proc file, in bytes (0 if absent).
func procKB(path, name string) int64 {
	v := procField(path, name)
	if v == "" {
		return 0
	}
	n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
	return n << 10
}

// disk is bytes on disk: in all; Badger's graph; the view snapshot a
// clean shutdown left beside it (set aside as view.snapshot.loaded once
// the daemon starts again, and removed when a new one replaces it); the
// vector index's snapshots (the index and its splits, saved at a clean
// shutdown and consumed by the next start); JetStream's streams.
type disk struct{ total, graph, viewSnapshot, vectorSnapshots, jetstream int64 }

// diskUsage is the size of the files under a daemon's data directory.
func diskUsage(dir string) disk {
	size := func(d string) int64 {
		var n int64
		_ = filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				if fi, err := e.Info(); err == nil {
					n += allocated(fi)
				}
			}
			return nil
		})
		return n
	}
	var snap int64 // the view snapshot lies in the graph's directory
	if fi, err := os.Stat(particle.ViewSnapshotPath(filepath.Join(dir, "graph"))); err == nil {
		snap = allocated(fi)
	}
	var vectors int64 // the vector index's snapshots (vectors.*)
	if files, err := filepath.Glob(filepath.Join(dir, "vectors.*")); err == nil {
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				vectors += allocated(fi)
			}
		}
	}
	return disk{total: size(dir), graph: size(filepath.Join(dir, "graph")) - snap, viewSnapshot: snap,
		vectorSnapshots: vectors, jetstream: size(filepath.Join(dir, "jetstream"))}
}

// allocated is the disk space a file takes: its blocks (Badger's value
// log is preallocated sparse), or its size where that is unknown.
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// gcStats are the process's garbage collections so far: cycles, the
// CPU the collector used (runtime/metrics estimates), and the bytes
// allocated on the heap (what brings the next cycle).
type gcStats struct {
	cycles    uint64
	cpu       float64 // seconds
	allocated uint64
}

func readGC() gcStats {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	var g gcStats
	if s[0].Value.Kind() == metrics.KindUint64 {
		g.cycles = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindFloat64 {
		g.cpu = s[1].Value.Float64()
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		g.allocated = s[2].Value.Uint64()
	}
	return g
}

// heapFigures records the heap that every collection marks, under
// prefix (when names the moment: after the load, after the reopen): a
// full collection, timed, then what it found live, how much of that
// holds pointers (what the collector scans, object by object: the
// length of a mark phase follows it) and the objects. The in-process
// daemon's heap, with the bench's workload beside it (a small part).
// After the load the graph's records are as ingest made them; after the
// reopen, as the start decoded them.
func (r *runner) heapFigures(prefix, when string) {
	t := time.Now()
	runtime.GC()
	r.fig[prefix+"full_collection_s"] = time.Since(t).Seconds()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/heap:bytes"}, {Name: "/gc/heap/objects:objects"}}
	metrics.Read(s)
	for i, name := range []string{"heap_live_bytes", "heap_scan_bytes", "heap_objects"} {
		if s[i].Value.Kind() == metrics.KindUint64 {
			r.fig[prefix+name] = float64(s[i].Value.Uint64())
		}
	}
	if edges := r.fig["graph.edges"]; edges > 0 {
		r.fig[prefix+"heap_scan_bytes_per_edge"] = r.fig[prefix+"heap_scan_bytes"] / edges
	}
	r.say("heap after the %s: %.0f MB live, %.0f MB of it holding pointers (what every collection scans), %.2f M objects; a full collection took %.2f s",
		when, r.fig[prefix+"heap_live_bytes"]/1e6, r.fig[prefix+"heap_scan_bytes"]/1e6, r.fig[prefix+"heap_objects"]/1e6, r.fig[prefix+"full_collection_s"])
}

// usage is what this process has used so far, as getrusage says: CPU
// time in user and in system mode, and minor page faults (pages the
// kernel gave it without reading them from disk: its heap growing, the
// pages of the files it maps).
type usage struct {
	user, system time.Duration
	minorFaults  int64
}

// readUsage reads usage (zero if getrusage fails).
func readUsage() usage {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return usage{}
	}
	return usage{user: time.Duration(ru.Utime.Nano()), system: time.Duration(ru.Stime.Nano()), minorFaults: int64(ru.Minflt)}
}

// sub is what was used between before and u.
func (u usage) sub(before usage) usage {
	return usage{user: u.user - before.user, system: u.system - before.system, minorFaults: u.minorFaults - before.minorFaults}
}

// cpu is the CPU time, user and system.
func (u usage) cpu() time.Duration { return u.user + u.system }

// cpuTime is the CPU time this process has used (user and system).
func cpuTime() time.Duration { return readUsage().cpu() }

// The machine's speed, probed at the start of every run so that runs on
// different days compare: the same binary ran 1.4–1.7 times slower on
// this VM on one day than five days before (BENCHMARKS.md, twenty-ninth
// round), and the planner is bound by memory latency, the index by
// arithmetic.
const (
	chaseBytes = 64 << 20 // past any L3 this code runs on
	chaseLoads = 1 << 21
	dotDim     = 384
	dotCalls   = 1 << 17
	dotRounds  = 5
	faultBytes = 32 << 20
)

// pageFaultTime is the time of the first touch of a fresh 4 KiB page of
// anonymous memory, in µs: what it takes the kernel, and under a
// hypervisor the host backing the guest's page, to give the process a
// page (faultBytes of them, touched in order; where the kernel puts
// every anonymous mapping in huge pages, THP mode "always", it times
// those). A fresh daemon faults in its heap as it grows and every page
// of the files Badger writes through memory maps; on this VM, whose host
// takes back the guest's free memory, a page cost 10-20 µs (BENCHMARKS.md,
// sixty-second round), where bare metal takes a fraction of one. It
// reports false if the memory could not be mapped.
func pageFaultTime() (float64, bool) {
	b, err := syscall.Mmap(-1, 0, faultBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return 0, false
	}
	defer syscall.Munmap(b)
	page := os.Getpagesize()
	t0 := time.Now()
	for i := 0; i < len(b); i += page {
		b[i] = 1
	}
	return float64(time.Since(t0).Nanoseconds()) / 1e3 / float64(len(b)/page), true
}

// memoryLatency is the time of one load that misses the caches, in ns:
// a chase through a random cycle over chaseBytes of memory, each load's
// address given by the one before (Sattolo's shuffle makes one cycle).
func memoryLatency() float64 {
	next := make([]uint64, chaseBytes/8)
	for i := range next {
		next[i] = uint64(i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := len(next) - 1; i > 0; i-- {
		j := r.IntN(i)
		next[i], next[j] = next[j], next[i]
	}
	at := uint64(0)
	t0 := time.Now()
	for range chaseLoads {
		at = next[at]
	}
	d := time.Since(t0)
	runtime.KeepAlive(at)
	return float64(d.Nanoseconds()) / chaseLoads
}

// dotTime is the time of one 384-dimension float32 dot product with both
// vectors in cache (the index's rescoring kernel), in ns: the best of a
// few rounds, so that a round the host interrupts does not count.
func dotTime() float64 {
	a, b := make([]float32, dotDim), make([]float32, dotDim)
	for i := range a {
		a[i], b[i] = float32(i%7)/7, float32(i%5)/5
	}
	best := math.Inf(1)
	var sink float32
	for range dotRounds {
		t0 := time.Now()
		for range dotCalls {
			sink += wave.Dot(a, b)
		}
		best = min(best, float64(time.Since(t0).Nanoseconds())/dotCalls)
	}
	runtime.KeepAlive(sink)
	return best
}
