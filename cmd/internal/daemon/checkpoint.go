package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Checkpoints bound a start after a crash. A clean shutdown saves the
// view snapshot, the vector index (with its splits) and the keyword
// index's documents, each stamped with the graph's generation, and a
// start after a crash loads what the last clean shutdown saved and
// catches each up with what the dead run committed since: work that
// grows with the writes. While it serves, the daemon saves them again
// (checkpoints), so that a crash start catches up only what came after.
//
// The parts cost very differently, so each has its own pace. On the
// 1M-edge store, for 191k records written since:
//   - the view's catch-up took 1.2 s, but writing its snapshot means
//     reading every record from Badger again and writing 3.1 GB (13 s
//     and about 20 s of CPU at a clean shutdown): it is checkpointed
//     every storage.view_checkpoint_records records;
//   - the vector index's catch-up and fill took 13.5 s of the start's 19
//     and the keyword index's 9.2 s beside it, while writing them takes
//     about a second: they are checkpointed every
//     storage.checkpoint_records records.
//
// A view checkpoint scans the graph's tables on one goroutine, as of one
// Badger read transaction, while commits go on. A vector checkpoint
// holds the index's writer lock while it writes the index out (the
// planner's searches go on; new vectors wait).

// checkpointMetrics are the checkpoints' series.
type checkpointMetrics struct {
	runs    *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

func newCheckpointMetrics(d *Daemon) checkpointMetrics {
	m := checkpointMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ctxgraph_checkpoints_total", Help: "Checkpoints while serving, by part (view: the view snapshot; indexes: the vector index and keyword documents) and result (ok, failed).",
		}, []string{"part", "result"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ctxgraph_checkpoint_seconds", Help: "How long a checkpoint took, by part.",
			Buckets: prometheus.ExponentialBuckets(0.125, 2, 10),
		}, []string{"part"}),
	}
	d.metrics.reg.MustRegister(m.runs, m.seconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ctxgraph_records_since_view_checkpoint", Help: "Records committed that the view snapshot on disk does not hold: what a start after a crash would catch the view up with.",
		}, func() float64 { n, _ := d.store.RecordsSinceSnapshot(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ctxgraph_records_since_index_checkpoint", Help: "Records committed since the vector index and keyword documents were last saved: about what a start after a crash would catch them up with.",
		}, func() float64 { return float64(d.indexesBehind()) }))
	return m
}

// checkpointParts name a checkpoint's parts.
const (
	partView    = "view"
	partIndexes = "indexes"
)

// startCheckpoints starts the checkpoints that storage.checkpoint_records
// and storage.view_checkpoint_records (with storage.view_snapshot) ask
// for.
func (d *Daemon) startCheckpoints(ctx context.Context) {
	st := d.cfg.Storage
	view, indexes := st.ViewSnapshot && st.ViewCheckpointRecords > 0, st.CheckpointRecords > 0
	if !view && !indexes {
		return
	}
	// The index snapshots on disk lack what the start caught up with,
	// and all of the graph when there were none.
	d.indexesAt.Store(d.store.RecordsCommitted() - int64(d.vectorsCaughtUp))
	if d.vectorsCaughtUp < 0 {
		d.indexesAt.Store(math.MinInt64 / 2)
	}
	d.ckpt = newCheckpointMetrics(d)
	d.every(ctx, st.CheckpointCheck, "checkpoint", func(ctx context.Context) error {
		if d.SplitsLoading() || d.graphEmpty() {
			return nil // the splits' snapshot is still being read; nothing to save
		}
		var errs []error
		if n, onDisk := d.store.RecordsSinceSnapshot(); view && (!onDisk || n >= st.ViewCheckpointRecords) {
			errs = append(errs, d.checkpoint(ctx, partView, d.checkpointView))
		}
		if indexes && d.indexesBehind() >= st.CheckpointRecords {
			errs = append(errs, d.checkpoint(ctx, partIndexes, d.checkpointIndexes))
		}
		return errors.Join(errs...)
	})
}

// graphEmpty reports whether the graph holds no node, edge or episode.
func (d *Daemon) graphEmpty() bool {
	c := d.store.Counts()
	return sum(c.Nodes)+sum(c.Edges)+c.Episodes == 0
}

// indexesBehind is how many records were committed since the vector
// index and the keyword documents were last saved.
func (d *Daemon) indexesBehind() int64 { return d.store.RecordsCommitted() - d.indexesAt.Load() }

// Checkpoint saves the view snapshot, the vector index and the keyword
// index's documents while the daemon serves: a start after a crash then
// catches each up only with what was committed after it.
func (d *Daemon) Checkpoint(ctx context.Context) error {
	return errors.Join(d.checkpoint(ctx, partView, d.checkpointView), d.checkpoint(ctx, partIndexes, d.checkpointIndexes))
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

// checkpointIndexes saves the vector index and the keyword index's
// documents.
func (d *Daemon) checkpointIndexes(ctx context.Context) error {
	at := d.store.RecordsCommitted() // before: what commits meanwhile counts toward the next
	t := time.Now()
	if err := d.checkpointVectors(ctx); err != nil {
		return err
	}
	vectorsTook := time.Since(t)
	kt := time.Now()
	kw, err := d.keyword.Checkpoint(ctx)
	if err != nil {
		return fmt.Errorf("keyword documents: %w", err)
	}
	d.indexesAt.Store(at)
	d.log.Info("index checkpoint written", "vectors_took", vectorsTook, "keyword_docs", kw.Docs, "keyword_bytes", kw.Bytes,
		"keyword_took", time.Since(kt), "took", time.Since(t))
	return nil
}

// checkpointVectors saves the vector index while the daemon serves,
// stamped with a generation of the graph it holds at least: the
// generation first, then every batch queued for the index by then is
// waited for, then the index and its splits are written
// (writeVectorSnapshot; with what ingest added since, which a catch-up
// from the stamp removes and the fill adds again).
func (d *Daemon) checkpointVectors(ctx context.Context) error {
	if _, ok := d.index.(io.WriterTo); !ok || d.vectorSnapshot() == "" || d.indexer == nil {
		return nil
	}
	gen, err := d.store.Generation()
	if err != nil {
		return fmt.Errorf("vector snapshot: %w", err)
	}
	if err := d.indexer.SyncThrough(ctx, d.indexer.Queued()); err != nil {
		return fmt.Errorf("vector snapshot: %w", err)
	}
	return d.writeVectorSnapshot(gen)
}
