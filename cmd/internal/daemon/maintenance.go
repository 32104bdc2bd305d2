package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxgraph/ctxgraph/cmd/internal/hugepage"
	"github.com/ctxgraph/ctxgraph/particle"
)

// consumerConfig is the durable consumer of stream. After a restore
// (DATA/restore.json) it starts at the backup's position, so that the
// restored store re-consumes what arrived after the backup; a consumer
// that was started that way keeps its start on later runs.
func (d *Daemon) consumerConfig(ctx context.Context, stream, durable string) (jetstream.ConsumerConfig, error) {
	cc := ConsumerConfig(d.cfg, durable)
	if m, err := readRestoreMarker(d.cfg.Data); err != nil {
		return cc, err
	} else if m != nil {
		if pos, ok := m.Positions[stream]; ok {
			start, err := d.replayFrom(ctx, stream, pos)
			if err != nil {
				return cc, err
			}
			if start > 0 {
				if err := d.js.DeleteConsumer(ctx, stream, durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
					return cc, fmt.Errorf("reset consumer %s after restore: %w", durable, err)
				}
				cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
				d.log.Info("restored store: replaying the stream from the backup's position", "stream", stream, "from_seq", start)
				return cc, nil
			}
		}
	}
	if cons, err := d.js.Consumer(ctx, stream, durable); err == nil {
		if have := cons.CachedInfo().Config; have.DeliverPolicy == jetstream.DeliverByStartSequencePolicy {
			cc.DeliverPolicy, cc.OptStartSeq = have.DeliverPolicy, have.OptStartSeq
		}
	}
	return cc, nil
}

// replayFrom is the stream sequence to re-consume from after a restore:
// the message after the backup's applied position, if the stream is the
// log the backup was taken from (same creation time) and still holds it;
// 0 when there is nothing to replay from.
func (d *Daemon) replayFrom(ctx context.Context, stream string, pos StreamPosition) (uint64, error) {
	st, err := d.js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	info := st.CachedInfo()
	if !info.Created.Equal(pos.Created) {
		d.log.Warn("restored store: the stream is not the log the backup was taken from; nothing to replay",
			"stream", stream, "backup_stream_created", pos.Created, "stream_created", info.Created)
		return 0, nil
	}
	start := pos.Applied + 1
	if info.State.FirstSeq > start {
		d.log.Error("restored store: the stream no longer holds every message after the backup; some are lost to its limits",
			"stream", stream, "from_seq", start, "first_seq", info.State.FirstSeq)
		start = info.State.FirstSeq
	}
	return start, nil
}

// startMaintenance starts the background work the store needs: value-log
// garbage collection and the retention pass, on their schedules, and the
// huge-page keeper (memory.huge_pages). It
// clears the restore marker, whose positions the consumers now hold.
func (d *Daemon) startMaintenance(ctx context.Context) {
	if err := removeIfPresent(restoreMarkerPath(d.cfg.Data)); err != nil {
		d.log.Warn("remove restore marker", "err", err)
	}
	d.maint = newMaintenanceMetrics()
	d.metrics.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ctxgraph_storage_ok", Help: "1 while storage commits succeed; 0 while ingest is paused on storage errors.",
		}, func() float64 {
			if d.storeOK.Load() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ctxgraph_ingest_retries_total", Help: "Messages handed back for a retry with backoff (message failures).",
		}, func() float64 { return float64(d.sumConsumers(func(c *consumer) int64 { return c.retried.Load() })) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ctxgraph_ingest_storage_pauses_total", Help: "Batch retries held back because storage failed.",
		}, func() float64 { return float64(d.sumConsumers(func(c *consumer) int64 { return c.paused.Load() })) }),
		d.maint.gcRuns, d.maint.retained,
	)
	if every := d.cfg.Storage.GCInterval; every > 0 {
		d.every(ctx, every, "value-log gc", func(context.Context) error {
			n, err := d.store.CollectGarbage(d.cfg.Storage.GCDiscardRatio)
			d.maint.gcRuns.Inc()
			if n > 0 {
				d.log.Info("value-log gc rewrote files", "files", n)
			}
			return err
		})
	}
	d.hugePages(ctx)
	if d.cfg.Memory.LimitMiB > 0 {
		d.fitMemoryLimit()
		d.every(ctx, memoryLimitInterval, "memory limit", func(context.Context) error {
			d.fitMemoryLimit()
			return nil
		})
	}
	if d.cfg.Retention.Enabled && len(d.cfg.Retention.Rules) > 0 {
		d.every(ctx, d.cfg.Retention.Interval, "retention", func(ctx context.Context) error {
			_, err := d.RunRetention(ctx, time.Now())
			return err
		})
	}
}

// memoryLimitInterval is how often fitMemoryLimit follows the edges'
// codes as the graph grows (a chunk of codes is 1.5 MB at 384
// dimensions, one for every 4,096 edges).
const memoryLimitInterval = 10 * time.Second

// fitMemoryLimit keeps memory.limit_mib the budget of the daemon's
// memory, not of Go's alone: Go's soft limit is set to it less what
// the edges' codes hold outside the heap (particle.MappedCodeBytes),
// which Go does not count (0.5 GB at 1M edges).
func (d *Daemon) fitMemoryLimit() {
	debug.SetMemoryLimit(goMemoryLimit(d.cfg.Memory.LimitMiB<<20, particle.MappedCodeBytes()))
}

// goMemoryLimit is Go's share of a memory budget of which outside bytes
// are held outside its heap: the rest, but never under half the budget
// (a collector that ran without end would not give the codes back).
func goMemoryLimit(budget, outside int64) int64 { return max(budget-outside, budget/2) }

// hugePages backs the heap with huge pages as memory.huge_pages,
// memory.collapse_idle and the host's transparent huge page mode allow:
// in mode "madvise" (the common one) a keeper collapses the heap until
// ctx ends if collapse_idle is on (a start's load is marked apart,
// readyHeapForLoad); in mode "always" the kernel gives them unasked; in
// mode "never", or with no THP at all, the host has ruled them out and
// the daemon leaves it so.
func (d *Daemon) hugePages(ctx context.Context) {
	mode := hugepage.Mode()
	switch {
	case !d.cfg.Memory.HugePages:
		if mode == "madvise" {
			d.log.Info("the heap keeps 4 KiB pages: memory.huge_pages is off; "+
				"huge pages lower the planner's latency on a large store (BENCHMARKS.md)", "thp", mode)
		}
	case mode == "madvise":
		if d.cfg.Memory.CollapseIdle {
			d.keepHugePages(ctx)
		}
	case mode != "always":
		d.log.Info("the heap keeps 4 KiB pages: this host offers no transparent huge pages", "thp", mode)
	}
}

// readyHeapForLoad has the start's load fault its heap in huge pages
// where memory.huge_pages is on and the host has free 2 MiB blocks to
// spare, or, on a host that takes free memory back, faults it in ahead
// in 4 KiB pages (hugepage.ForLoad). The load is about what the view snapshot
// (when the store so loads its view) and the vector snapshot hold, plus
// a quarter for the maps and lists built beside them; without snapshots
// (a new store, a start from Badger) there is little to gain and
// nothing is marked. It returns how long it took (the start's heap
// phase, which its log line gives too).
func (d *Daemon) readyHeapForLoad(so particle.Options) time.Duration {
	if !d.cfg.Memory.HugePages {
		return 0
	}
	t := time.Now()
	files := []string{d.vectorSnapshot()}
	if so.ViewSnapshot {
		files = append(files, particle.ViewSnapshotToLoad(so.Dir))
	}
	var n int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	n += n / 4
	adv := hugepage.ForLoad(n)
	took := time.Since(t)
	if adv.Advised > 0 {
		d.log.Info("the load's heap faults in huge pages", "took", took.Round(time.Millisecond), "advised_mib", adv.Advised>>20, "load_mib", n>>20,
			"free_huge_mib", adv.Free>>20, "free_mib", adv.FreeAll>>20)
		return took
	}
	if adv.Populated > 0 {
		d.log.Info("the load's heap faulted in ahead, in 4 KiB pages", "took", took.Round(time.Millisecond), "why", adv.Reason, "populated_mib", adv.Populated>>20,
			"of_it_freed_before_mib", adv.Reused>>20, "load_mib", n>>20, "free_mib", adv.FreeAll>>20)
		return took
	}
	// A large load in 4 KiB pages takes seconds longer (BENCHMARKS.md,
	// sixty-first round): say why where an operator looks.
	level := slog.LevelDebug
	if n >= 1<<30 {
		level = slog.LevelInfo
	}
	d.log.Log(context.Background(), level, "the load's heap faults in 4 KiB pages", "why", adv.Reason, "load_mib", n>>20,
		"free_huge_mib", adv.Free>>20, "free_mib", adv.FreeAll>>20)
	return time.Since(t)
}

// keepHugePages runs a huge-page keeper until ctx ends (memory.huge_pages
// and memory.collapse_idle), and counts what it collapsed in
// ctxgraph_heap_huge_pages_mib. The keeper collapses the heap only
// while the daemon is idle
// (hugepage.Options.Quiet): no ingest batch applied for 2 s, and no
// planner call begun for 1 s. It marks no mapping: a heap growing under
// ingest faults in 4 KiB pages, which keeps the writer's pace. And a
// collapse stalls, for milliseconds on a VM, every thread that touches
// the 2 MiB it moves or faults a page meanwhile (BENCHMARKS.md,
// forty-first round): a pass stops at the first call that comes.
func (d *Daemon) keepHugePages(ctx context.Context) {
	k := hugepage.New(hugepage.Options{Logger: d.log, Quiet: d.idle(2*time.Second, time.Second)})
	d.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_heap_huge_pages_mib", Help: "MiB of heap the huge-page keeper collapsed into 2 MiB pages (memory.huge_pages).",
	}, func() float64 { return float64(2 * k.Stats().Collapsed) }))
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := k.Run(ctx); err != nil {
			d.log.Warn("huge pages unavailable; the heap keeps 4 KiB pages", "err", err)
		}
	}()
}

// idle returns a func reporting whether no ingest batch has been applied
// for at least ingest and no planner call has begun for at least plan;
// one goroutine may call it.
func (d *Daemon) idle(ingest, plan time.Duration) func() bool {
	quiet := d.ingestQuiet(ingest)
	return func() bool { return quiet() && d.planner.Idle() >= plan }
}

// ingestQuiet returns a func reporting whether no ingest batch has
// been applied for at least quiet; one goroutine may call it.
func (d *Daemon) ingestQuiet(quiet time.Duration) func() bool {
	last, since := int64(-1), time.Now()
	return func() bool {
		if n := d.sumConsumers(func(c *consumer) int64 { return c.applied.Load() }); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet
	}
}

// maintenanceMetrics are the series of the background work.
type maintenanceMetrics struct {
	gcRuns   prometheus.Counter
	retained *prometheus.CounterVec
}

func newMaintenanceMetrics() maintenanceMetrics {
	return maintenanceMetrics{
		gcRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ctxgraph_storage_gc_runs_total", Help: "Value-log garbage collection passes.",
		}),
		retained: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ctxgraph_retention_removed_total", Help: "Items the retention pass removed or archived, by kind.",
		}, []string{"kind"}),
	}
}

// RunRetention runs one retention pass as of now with the configured
// rules (whether or not the schedule is enabled).
func (d *Daemon) RunRetention(ctx context.Context, now time.Time) (particle.RetentionReport, error) {
	rep, err := d.store.Retain(ctx, particle.RetentionOptions{
		Rules: d.cfg.Retention.Rules, Archive: d.cfg.Retention.Action == "archive", Now: now,
	})
	d.maint.retained.WithLabelValues("edge").Add(float64(rep.Edges))
	d.maint.retained.WithLabelValues("node").Add(float64(rep.Nodes))
	if rep.Edges+rep.Nodes > 0 {
		d.log.Info("retention pass", "edges", rep.Edges, "nodes", rep.Nodes, "archived", rep.Archived)
	}
	return rep, err
}

// every runs fn every interval until ctx ends, on a goroutine the daemon
// waits for at shutdown.
func (d *Daemon) every(ctx context.Context, interval time.Duration, what string, fn func(context.Context) error) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := fn(ctx); err != nil && ctx.Err() == nil {
					d.log.Warn(what+" failed", "err", err)
				}
			}
		}
	}()
}

func (d *Daemon) sumConsumers(f func(*consumer) int64) int64 {
	var n int64
	for _, c := range d.consumers {
		n += f(c)
	}
	return n
}
