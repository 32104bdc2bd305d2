package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Checkpoints bound a start after a crash. A clean shutdown saves the
// view snapshot, the vector index (with its splits) and the keyword
// index's documents, each stamped with the graph's generation, and a
// start after a crash loads what the last clean shutdown saved and
// catches each up with what the dead run committed since: work that
// grows with the writes. While it serves, the daemon saves each part
// again (a checkpoint) once storage.checkpoints gives records have been
// committed since that part was last saved, so that a crash start
// catches it up only with what came after.
//
// The parts cost very differently to catch up and to save, hence a pace
// each. On the 1M-edge store, for 191k records written since, on a slow
// host (BENCHMARKS.md, fifty-ninth round):
//   - the view's catch-up took 3-10 s, but its snapshot is a copy of the
//     graph: 3.2 GB written and about 20 s of CPU, every record read from
//     Badger again;
//   - the vector index's catch-up and fill took 23-25 s, the slowest
//     part of the start, and saving it writes 0.4 GB, its splits 0.8 GB
//     more;
//   - the keyword index's catch-up took 12-16 s beside it, and saving its
//     documents writes 11 MB.
//
// A view checkpoint scans the graph's tables on one goroutine, as of one
// Badger read transaction, while commits go on. A vector checkpoint
// writes the index and its splits as they stood at one moment, noted
// under the index's writer lock in about a millisecond (wave's
// ivf_freeze.go): the planner's searches and new vectors go on.

// checkpointPart is one part a checkpoint saves.
type checkpointPart struct {
	name  string
	every int64 // records committed between its checkpoints
	// behind is how many records a crash start would catch it up
	// with; save saves it.
	behind func() int64
	save   func(context.Context) error
}

// checkpointMetrics are the checkpoints' series.
type checkpointMetrics struct {
	runs    *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

func newCheckpointMetrics(d *Daemon, parts []checkpointPart) checkpointMetrics {
	m := checkpointMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ctxgraph_checkpoints_total", Help: "Checkpoints while serving, by part (view, vectors, keyword) and result (ok, failed).",
		}, []string{"part", "result"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ctxgraph_checkpoint_seconds", Help: "How long a checkpoint took, by part.",
			Buckets: prometheus.ExponentialBuckets(0.125, 2, 10),
		}, []string{"part"}),
	}
	d.metrics.reg.MustRegister(m.runs, m.seconds)
	for _, p := range parts {
		d.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ctxgraph_checkpoint_records_behind", ConstLabels: prometheus.Labels{"part": p.name},
			Help: "Records committed since the part was last saved: about what a start after a crash would catch it up with.",
		}, func() float64 { return float64(p.behind()) }))
	}
	return m
}

// The parts' names.
const (
	partView    = "view"
	partVectors = "vectors"
	partKeyword = "keyword"
)

// checkpointParts returns the parts storage.checkpoints saves while the
// daemon serves (a part given 0 records is not); it is called once, at
// the start. The vector index and keyword documents on disk lack what
// the start caught them up with, and a part with nothing on disk lacks
// the whole graph.
func (d *Daemon) checkpointParts() []checkpointPart {
	c := d.cfg.Storage.Checkpoints
	committed := d.store.RecordsCommitted
	d.vectorsSavedAt.Store(committed() - int64(max(d.vectorsCaughtUp, 0)))
	var noVectors atomic.Bool
	noVectors.Store(d.vectorsAt == nil) // none loaded, or dropped
	var parts []checkpointPart
	if c.ViewRecords > 0 && d.cfg.Storage.ViewSnapshot {
		parts = append(parts, checkpointPart{name: partView, every: c.ViewRecords, save: d.checkpointView, behind: func() int64 {
			if n, onDisk := d.store.RecordsSinceSnapshot(); onDisk {
				return n
			}
			return d.graphRecords()
		}})
	}
	if c.VectorRecords > 0 {
		parts = append(parts, checkpointPart{name: partVectors, every: c.VectorRecords, behind: func() int64 {
			if noVectors.Load() {
				return d.graphRecords()
			}
			return committed() - d.vectorsSavedAt.Load()
		}, save: func(ctx context.Context) error {
			at := committed() // before: what commits meanwhile counts toward the next
			if err := d.saveVectorIndex(ctx); err != nil {
				return err
			}
			d.vectorsSavedAt.Store(at)
			noVectors.Store(false)
			return nil
		}})
	}
	if c.KeywordRecords > 0 {
		parts = append(parts, checkpointPart{name: partKeyword, every: c.KeywordRecords, behind: func() int64 {
			return committed() - d.keywordSavedAt.Load()
		}, save: func(ctx context.Context) error {
			at := committed()
			kw, err := d.keyword.Checkpoint(ctx)
			if err != nil {
				return err
			}
			d.keywordSavedAt.Store(at)
			if kw.Written {
				d.log.Info("keyword checkpoint written", "docs", kw.Docs, "bytes", kw.Bytes)
			} else {
				d.log.Info("keyword checkpoint: the documents saved last are current", "docs", kw.Docs)
			}
			return nil
		}})
	}
	return parts
}

// startCheckpoints starts the checkpoints storage.checkpoints asks for.
func (d *Daemon) startCheckpoints(ctx context.Context) {
	parts := d.checkpointParts()
	d.ckptParts = parts
	if len(parts) == 0 {
		return
	}
	d.ckpt = newCheckpointMetrics(d, parts)
	retry := make([]backoff, len(parts))
	quiet := d.ingestQuiet(checkpointLull)
	d.every(ctx, d.cfg.Storage.Checkpoints.Check, "checkpoint", func(ctx context.Context) error {
		if d.SplitsLoading() {
			return nil // the splits' snapshot is still being read
		}
		lull := quiet()
		var errs []error
		for i, p := range parts {
			if !checkpointDue(p.behind(), p.every, lull) || !retry[i].allows(time.Now()) {
				continue
			}
			if err := d.checkpoint(ctx, p.name, p.save); err != nil {
				retry[i].failed(time.Now())
				errs = append(errs, fmt.Errorf("%w (next try in %v)", err, retry[i].wait))
			} else {
				retry[i] = backoff{}
			}
		}
		return errors.Join(errs...)
	})
}

// checkpointLull is how long ingest must have applied nothing for a
// due checkpoint to take its chance (checkpointDue).
const checkpointLull = 2 * time.Second

// checkpointDue reports whether a part behind by behind records, saved
// every every, is checkpointed now: once due, in a lull of ingest (lull:
// nothing applied for checkpointLull), when a checkpoint's CPU and
// writes (at 1M edges 1.2 GB for the vector index and its splits, 3.2 GB
// for the view, read from the graph again) take nothing from ingest;
// and at twice its pace whatever ingest does, so that a fleet that
// never pauses is still checkpointed.
func checkpointDue(behind, every int64, lull bool) bool {
	return behind >= every && (lull || behind >= 2*every)
}

// backoff spaces the tries of a part whose checkpoints fail (a full
// disk, say, where a view checkpoint would read the whole graph again at
// every check): a minute after the first failure, twice as long after
// each next, up to half an hour.
type backoff struct {
	next time.Time
	wait time.Duration
}

// allows reports whether a try is due at now.
func (b *backoff) allows(now time.Time) bool { return !now.Before(b.next) }

// failed notes a failure at now.
func (b *backoff) failed(now time.Time) {
	b.wait = min(max(2*b.wait, time.Minute), 30*time.Minute)
	b.next = now.Add(b.wait)
}

// graphRecords is how many nodes, edges and episodes the graph holds.
func (d *Daemon) graphRecords() int64 {
	c := d.store.Counts()
	return sum(c.Nodes) + sum(c.Edges) + c.Episodes
}

// Checkpoint saves every part storage.checkpoints names now, while the
// daemon serves: a start after a crash then catches each up only with
// what was committed after it.
func (d *Daemon) Checkpoint(ctx context.Context) error {
	var errs []error
	for _, p := range d.ckptParts {
		errs = append(errs, d.checkpoint(ctx, p.name, p.save))
	}
	return errors.Join(errs...)
}

// checkpoint runs one part's checkpoint, counting and timing it.
func (d *Daemon) checkpoint(ctx context.Context, part string, run func(context.Context) error) error {
	t := time.Now()
	err := run(ctx)
	if d.ckpt.runs != nil {
		result := "ok"
		if err != nil {
			result = "failed"
		}
		d.ckpt.runs.WithLabelValues(part, result).Inc()
		if err == nil {
			d.ckpt.seconds.WithLabelValues(part).Observe(time.Since(t).Seconds())
		}
	}
	if err != nil {
		return fmt.Errorf("%s checkpoint: %w", part, err)
	}
	d.log.Info("checkpoint written", "part", part, "took", time.Since(t))
	return nil
}

// checkpointView writes the view snapshot (particle.Store.Checkpoint),
// on one goroutine.
func (d *Daemon) checkpointView(ctx context.Context) error {
	cp, err := d.store.Checkpoint(ctx, 1)
	if err != nil {
		return err
	}
	d.log.Info("view checkpoint written", "records", cp.Records, "bytes", cp.Bytes, "took", cp.Took)
	return nil
}
