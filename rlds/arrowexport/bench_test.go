package arrowexport_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport/arrowexporttest"
	"github.com/ctxgraph/ctxgraph/wave"
)

// The medium store of the benchmarks: a fleet's worth of steps (7-joint
// state, gripper, 7-dof action, the wire's float32) and an edge observed
// every tenth step.
const (
	benchEpisodes = 200
	benchSteps    = 600 // per episode: 120k steps
)

var benchStore struct {
	st    *particle.Store
	dir   string
	steps int64
}

// mediumStore builds the benchmark store once per process, writing steps
// straight through Store.Update and the rlds step encoding (no NATS, no
// Applier), so that setup takes seconds.
func mediumStore(b *testing.B) *particle.Store {
	b.Helper()
	if benchStore.st != nil {
		return benchStore.st
	}
	dir, err := os.MkdirTemp("", "arrowexport-bench-*")
	if err != nil {
		b.Fatal(err)
	}
	benchStore.dir = dir
	o := particle.DefaultOptions(dir)
	o.SyncWrites = false
	st, err := particle.Open(o)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ns := particle.DefaultNamespace
	vec := func(n, seed int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(float32(float64((seed*31+i*7)%1000)/500 - 1))
		}
		return v
	}
	for e := 0; e < benchEpisodes; e++ {
		id := fmt.Sprintf("ep-%05d", e)
		agent := fmt.Sprintf("robot-%02d", e%8)
		for lo := 0; lo < benchSteps; lo += 200 {
			_, err := st.Update(ctx, func(bt *particle.Batch) error {
				ep := bt.Episode(ns, id)
				if ep == nil {
					ep = &particle.Episode{ID: id, Namespace: ns, Agent: agent, StartTime: t0.Add(time.Duration(e) * time.Hour),
						LanguageInstruction: "pick up the red block", Features: map[string]string{
							"observation/state": "float32[7]", "observation/gripper": "float32[1]", "action": "float32[7]"}}
				}
				tool, _, err := bt.Resolve(ns, particle.NodeTool, "gripper")
				if err != nil {
					return err
				}
				obj, _, err := bt.Resolve(ns, particle.NodeEntity, fmt.Sprintf("block %d", e%50))
				if err != nil {
					return err
				}
				for _, n := range []*particle.Node{tool, obj} {
					if err := bt.PutNode(n); err != nil {
						return err
					}
				}
				for i := lo; i < lo+200; i++ {
					s := &rlds.Step{
						Index: i, Timestamp: ep.StartTime.Add(time.Duration(i) * 100 * time.Millisecond),
						Observation: rlds.Features{
							"state":   {DType: rlds.Float32, Shape: []int{7}, Data: vec(7, i)},
							"gripper": {DType: rlds.Float32, Shape: []int{1}, Data: vec(1, i+3)},
						},
						Action:   rlds.Features{"": {DType: rlds.Float32, Shape: []int{7}, Data: vec(7, i+5)}},
						Discount: 1, IsFirst: i == 0, IsLast: i == benchSteps-1,
						LanguageInstruction: "pick up the red block",
					}
					raw, err := rlds.EncodeStep(s)
					if err != nil {
						return err
					}
					if err := bt.PutStep(ns, id, i, raw); err != nil {
						return err
					}
					if i%10 == 0 {
						idx := i
						edge, _, err := bt.Observe(particle.Observation{Namespace: ns, Source: tool.ID, Target: obj.ID,
							Type: particle.EdgeToolUse, Predicate: "acts_on", At: s.Timestamp,
							Provenance: particle.Provenance{EpisodeID: id, StepIndex: &idx, Agent: agent},
							Decay:      wave.DecayExp, HalfLife: time.Hour, Reinforce: 0.2})
						if err != nil {
							return err
						}
						if !containsStr(ep.Edges, edge.ID) {
							ep.Edges = append(ep.Edges, edge.ID)
						}
					}
				}
				ep.Steps = lo + 200
				ep.EndTime = ep.StartTime.Add(time.Duration(ep.Steps) * 100 * time.Millisecond)
				return bt.PutEpisode(ep)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	benchStore.st, benchStore.steps = st, benchEpisodes*benchSteps
	return st
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestMain closes and removes the benchmark store.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchStore.st != nil {
		benchStore.st.Close()
	}
	if benchStore.dir != "" {
		os.RemoveAll(benchStore.dir)
	}
	os.Exit(code)
}

// countingWriter counts bytes and discards them.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(b []byte) (int, error) { c.n += int64(len(b)); return len(b), nil }

// memWatch samples the heap at every batch and keeps the peak.
type memWatch struct {
	arrowexport.RecordWriter
	base, peak uint64
}

func newMemWatch(w arrowexport.RecordWriter) *memWatch {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &memWatch{RecordWriter: w, base: ms.HeapInuse, peak: ms.HeapInuse}
}

func (m *memWatch) Write(rec arrow.Record) error {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.peak = max(m.peak, ms.HeapInuse)
	return m.RecordWriter.Write(rec)
}

// peakAllocator counts the bytes the export's Arrow buffers hold, and
// their peak: the memory the batch size bounds (the heap also holds
// Badger's block cache, bounded by its own options).
type peakAllocator struct {
	cur, peak atomic.Int64
}

func (a *peakAllocator) add(n int) {
	if c := a.cur.Add(int64(n)); c > a.peak.Load() {
		a.peak.Store(c)
	}
}

func (a *peakAllocator) Allocate(size int) []byte {
	a.add(size)
	return memory.DefaultAllocator.Allocate(size)
}

func (a *peakAllocator) Reallocate(size int, b []byte) []byte {
	a.add(size - len(b))
	return memory.DefaultAllocator.Reallocate(size, b)
}

func (a *peakAllocator) Free(b []byte) {
	a.add(-len(b))
	memory.DefaultAllocator.Free(b)
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmHWM is the process's peak resident set, in bytes (0 where /proc is
// missing).
func vmHWM() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}

// BenchmarkExportSteps exports the medium store's steps table in each
// format to a discarding writer and reports steps/s, MB/s of output,
// and the heap's peak growth during the export (memory bounded by the
// batch size, not the store). Run:
//
//	go test -run '^$' -bench ExportSteps -benchtime 5x ./rlds/arrowexport
func BenchmarkExportSteps(b *testing.B) {
	st := mediumStore(b)
	for _, f := range arrowexporttest.SingleFileFormats {
		b.Run(string(f), func(b *testing.B) {
			var out countingWriter
			var peak uint64
			var alloc peakAllocator
			cpu0 := cpuTime()
			for b.Loop() {
				out.n = 0
				w, err := arrowexport.NewWriter(f, &out)
				if err != nil {
					b.Fatal(err)
				}
				mw := newMemWatch(w)
				stats, err := arrowexport.Run(context.Background(), st, arrowexport.Options{Table: arrowexport.TableSteps, Alloc: &alloc}, mw)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				if stats.Rows != benchStore.steps {
					b.Fatalf("%d rows, want %d", stats.Rows, benchStore.steps)
				}
				peak = max(peak, mw.peak-mw.base)
			}
			secs := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(benchStore.steps)/secs, "steps/s")
			// Steps per second of CPU (both cores' time added): what the
			// export costs, whatever else shares the machine.
			b.ReportMetric(float64(benchStore.steps)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "steps/cpu-s")
			b.ReportMetric(float64(out.n)/secs/1e6, "MB/s")
			b.ReportMetric(float64(out.n)/1e6, "MB/export")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(alloc.peak.Load())/(1<<20), "peak-arrow-MB")
			b.ReportMetric(vmHWM()/(1<<20), "peak-RSS-MB")
		})
	}
}

// BenchmarkExportBatchSize shows what bounds memory: the Arrow buffers
// an export holds grow with its batch size, not with the store.
func BenchmarkExportBatchSize(b *testing.B) {
	st := mediumStore(b)
	for _, rows := range []int{1024, 4096, 16384} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			var alloc peakAllocator
			for b.Loop() {
				w, _ := arrowexport.NewWriter(arrowexport.FormatArrowStream, io.Discard)
				if _, err := arrowexport.Run(context.Background(), st, arrowexport.Options{Table: arrowexport.TableSteps, BatchRows: rows, Alloc: &alloc}, w); err != nil {
					b.Fatal(err)
				}
				w.Close()
			}
			b.ReportMetric(float64(alloc.peak.Load())/(1<<20), "peak-arrow-MB")
			b.ReportMetric(float64(benchStore.steps)/(b.Elapsed().Seconds()/float64(b.N)), "steps/s")
		})
	}
}

// BenchmarkWriteSameBytes is the baseline: writing as many bytes as the
// Arrow IPC stream export produces, with no reading and no encoding, in
// 1 MiB chunks, to a discarding writer and to a file.
func BenchmarkWriteSameBytes(b *testing.B) {
	st := mediumStore(b)
	var out countingWriter
	w, _ := arrowexport.NewWriter(arrowexport.FormatArrowStream, &out)
	if _, err := arrowexport.Run(context.Background(), st, arrowexport.Options{Table: arrowexport.TableSteps}, w); err != nil {
		b.Fatal(err)
	}
	w.Close()
	size := out.n
	chunk := bytes.Repeat([]byte{0x5a}, 1<<20)
	for _, dst := range []string{"discard", "file"} {
		b.Run(dst, func(b *testing.B) {
			for b.Loop() {
				var sink io.Writer = io.Discard
				var f *os.File
				if dst == "file" {
					var err error
					f, err = os.Create(filepath.Join(b.TempDir(), "same.bytes"))
					if err != nil {
						b.Fatal(err)
					}
					sink = f
				}
				for left := size; left > 0; left -= int64(len(chunk)) {
					if _, err := sink.Write(chunk[:min(int64(len(chunk)), left)]); err != nil {
						b.Fatal(err)
					}
				}
				if f != nil {
					f.Close()
				}
			}
			secs := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(benchStore.steps)/secs, "steps/s")
			b.ReportMetric(float64(size)/secs/1e6, "MB/s")
		})
	}
}

// BenchmarkScanSteps is the read side alone: the snapshot's scan of
// every stored step, with and without parsing, building no columns.
func BenchmarkScanSteps(b *testing.B) {
	st := mediumStore(b)
	for _, parse := range []bool{false, true} {
		b.Run(fmt.Sprintf("parse=%v", parse), func(b *testing.B) {
			var bytes int64
			for b.Loop() {
				bytes = 0
				var v rlds.StepView
				err := st.Snapshot(context.Background(), func(sn *particle.Snapshot) error {
					return sn.Episodes(particle.DefaultNamespace, func(ep *particle.Episode) error {
						return sn.Steps(particle.DefaultNamespace, ep.ID, func(_ int, raw []byte) error {
							bytes += int64(len(raw))
							if parse {
								return v.Parse(raw)
							}
							return nil
						})
					})
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			secs := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(benchStore.steps)/secs, "steps/s")
			b.ReportMetric(float64(bytes)/secs/1e6, "MB/s")
		})
	}
}
