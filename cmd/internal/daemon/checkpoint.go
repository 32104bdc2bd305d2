package daemon

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Checkpoints bound a start after a crash. A clean shutdown saves the
// view snapshot, the vector index and the keyword index's documents,
// each stamped with the graph's generation, and a start after a crash
// loads what the last clean shutdown saved and catches each up with
// what the dead run committed since: work that grows with the writes
// (on the 1M-edge store, 191k records written since took 33.7 s to
// catch up, against 3-5 s to start after a few thousand). While it
// serves, the daemon saves all three again (a checkpoint) once
// storage.checkpoint_records records have been committed since the
// last, so that a crash start catches up at most about that many.
//
// A checkpoint scans the graph's tables on one goroutine (the view
// snapshot is written from Badger, as of one read transaction, while
// commits go on) and holds the vector index's writer lock while it
// writes the index out (the planner's searches go on; new vectors wait),
// so it is paced by the records written, not by the clock.

// checkpointMetrics are the checkpoints' series.
type checkpointMetrics struct {
	runs    *prometheus.CounterVec
	seconds prometheus.Histogram
}

func newCheckpointMetrics(d *Daemon) checkpointMetrics {
	m := checkpointMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ctxgraph_checkpoints_total", Help: "Checkpoints of the view snapshot, vector index and keyword documents while serving, by result (ok, failed).",
		}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ctxgraph_checkpoint_seconds", Help: "How long a checkpoint took, all three parts.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 10),
		}),
	}
	d.metrics.reg.MustRegister(m.runs, m.seconds, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_records_since_checkpoint", Help: "Records committed that the view snapshot on disk does not hold: what a start after a crash would catch up with.",
	}, func() float64 { n, _ := d.store.RecordsSinceSnapshot(); return float64(n) }))
	return m
}

// startCheckpoints starts the checkpoints, unless storage.view_snapshot
// or storage.checkpoint_records turns them off.
func (d *Daemon) startCheckpoints(ctx context.Context) {
	if !d.cfg.Storage.ViewSnapshot || d.cfg.Storage.CheckpointRecords <= 0 {
		return
	}
	d.ckpt = newCheckpointMetrics(d)
	d.every(ctx, d.cfg.Storage.CheckpointCheck, "checkpoint", func(ctx context.Context) error {
		if !d.checkpointDue() {
			return nil
		}
		return d.Checkpoint(ctx)
	})
}

// checkpointDue reports whether storage.checkpoint_records records have
// been committed since the view snapshot on disk, or there is none and
// the graph holds records (a start that loaded from Badger: the next
// crash would load from Badger again).
func (d *Daemon) checkpointDue() bool {
	if d.SplitsLoading() {
		return false // the index's snapshot is still being read
	}
	n, onDisk := d.store.RecordsSinceSnapshot()
	if !onDisk {
		c := d.store.Counts()
		return n > 0 || sum(c.Nodes)+sum(c.Edges)+c.Episodes > 0
	}
	return n >= d.cfg.Storage.CheckpointRecords
}

// Checkpoint saves the view snapshot, the vector index and the keyword
// index's documents while the daemon serves: a start after a crash then
// catches each up only with what was committed after it.
func (d *Daemon) Checkpoint(ctx context.Context) error {
	t := time.Now()
	view, err := d.store.Checkpoint(ctx, 1)
	if err != nil {
		return d.checkpointDone(t, fmt.Errorf("view snapshot: %w", err))
	}
	viewTook := time.Since(t)
	vt := time.Now()
	if err := d.checkpointVectors(ctx); err != nil {
		return d.checkpointDone(t, err)
	}
	vectorsTook := time.Since(vt)
	kt := time.Now()
	if d.keyword != nil {
		if _, err := d.keyword.Checkpoint(ctx); err != nil {
			return d.checkpointDone(t, fmt.Errorf("keyword documents: %w", err))
		}
	}
	d.log.Info("checkpoint written", "records", view.Records, "view_bytes", view.Bytes, "view_took", viewTook,
		"vectors_took", vectorsTook, "keyword_took", time.Since(kt), "took", time.Since(t))
	return d.checkpointDone(t, nil)
}

// checkpointDone counts a checkpoint's end and returns its error.
func (d *Daemon) checkpointDone(began time.Time, err error) error {
	if d.ckpt.runs == nil {
		return err
	}
	if err != nil {
		d.ckpt.runs.WithLabelValues("failed").Inc()
		return fmt.Errorf("checkpoint: %w", err)
	}
	d.ckpt.runs.WithLabelValues("ok").Inc()
	d.ckpt.seconds.Observe(time.Since(began).Seconds())
	return nil
}

// checkpointVectors saves the vector index while the daemon serves,
// stamped with a generation of the graph it holds at least: the
// generation first, then every batch queued for the index by then is
// waited for, then the index is written (with what ingest added since,
// which a catch-up from the stamp removes and the fill adds again, as
// after a shutdown that died between the snapshot and its stamp). The
// splits saved at the last clean shutdown are of an older index, and
// go.
func (d *Daemon) checkpointVectors(ctx context.Context) error {
	w, ok := d.index.(io.WriterTo)
	path := d.vectorSnapshot()
	if !ok || path == "" || d.indexer == nil {
		return nil
	}
	gen, err := d.store.Generation()
	if err != nil {
		return fmt.Errorf("vector snapshot: %w", err)
	}
	if err := d.indexer.SyncThrough(ctx, d.indexer.Queued()); err != nil {
		return fmt.Errorf("vector snapshot: %w", err)
	}
	if err := removeIfPresent(d.splitsSnapshot()); err != nil {
		return fmt.Errorf("vector splits snapshot: %w", err)
	}
	return d.writeVectorSnapshot(w, path, gen)
}
