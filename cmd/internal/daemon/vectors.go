package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// vectorSnapshots are the files the indexes are saved to at a clean
// shutdown, by vectors.index.
var vectorSnapshots = map[string]string{"hnsw": "vectors.hnsw", "ivf": "vectors.ivf"}

// vectorSnapshot is where the configured index is saved at a clean
// shutdown ("" for flat, which is not saved).
func (d *Daemon) vectorSnapshot() string {
	name, ok := vectorSnapshots[d.cfg.Vectors.Index]
	if !ok {
		return ""
	}
	return filepath.Join(d.cfg.Data, name)
}

// openVectorIndex returns the configured index: the one saved at a
// clean shutdown when there is one (catchUpVectors then matches it to
// the graph), else an empty one that the indexer fills from the graph.
// The snapshot of another kind of index (left before vectors.index
// changed) is removed: it would be stale later.
func (d *Daemon) openVectorIndex(dim int) (wave.Index, error) {
	v := d.cfg.Vectors
	for kind, name := range vectorSnapshots {
		if kind == v.Index {
			continue
		}
		if err := removeIfPresent(filepath.Join(d.cfg.Data, name)); err != nil {
			return nil, fmt.Errorf("vector snapshot: %w", err)
		}
	}
	if v.Index == "flat" {
		return newVectorIndex(d.cfg, dim), nil
	}
	idx, err := d.loadVectorSnapshot(dim)
	if err == nil {
		err = d.openSplitsSnapshot(idx)
	}
	if err != nil || idx != nil {
		return idx, err
	}
	return newVectorIndex(d.cfg, dim), nil
}

// splitsSnapshot is where an IVF's splits are saved beside it at a
// clean shutdown ("" for other indexes).
func (d *Daemon) splitsSnapshot() string {
	if d.cfg.Vectors.Index != "ivf" {
		return ""
	}
	return splitsSnapshotBeside(d.vectorSnapshot())
}

// splitsSnapshotBeside is where the splits of the IVF snapshot at path
// are saved.
func splitsSnapshotBeside(path string) string { return path + ".splits" }

// openSplitsSnapshot keeps the splits saved beside the IVF snapshot
// loaded as idx open, for loadSplits once serving; it removes them when
// they cannot be used: no IVF snapshot loaded (they were saved with
// another), or no split configured.
func (d *Daemon) openSplitsSnapshot(idx wave.Index) error {
	path := d.splitsSnapshot()
	if path == "" {
		return nil
	}
	_, isIVF := idx.(*wave.IVF)
	var err error
	if v := d.cfg.Vectors; isIVF && (v.SplitByAgent || v.SplitByTime) {
		d.splitsFile, err = openIfPresent(path)
	} else {
		err = removeIfPresent(path)
	}
	if err != nil {
		return fmt.Errorf("vector splits snapshot: %w", err)
	}
	return nil
}

// openIfPresent opens the file at path for reading; one that does not
// exist gives nil and no error.
func openIfPresent(path string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return f, err
}

// removeIfPresent removes the file at path; one that does not exist is
// no error.
func removeIfPresent(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// splitIndex makes the IVF's splits the configuration asks for, once
// serving: read from the snapshot saved beside the IVF's when there is
// one (load, begun before ingest started), else filled from the index's
// lists; both in the background (wave.IVF.SplitByAgent,
// wave.SplitsLoad.Load). A snapshot that reads stays on disk beside the
// index's, which stays too (loadVectorSnapshot): a start after this run
// dies loads both again, with what changed since left out of the
// splits (splitsStale), until a checkpoint or shutdown replaces them
// (writeVectorSnapshot). Removed once read, they were filled again
// after such a start: 114 s at a million edges, 74 s of CPU beside the
// planner, when no vector checkpoint had run. One that cannot be read
// is removed.
func (d *Daemon) splitIndex(ctx context.Context, x *wave.IVF, load *wave.SplitsLoad) {
	v := d.cfg.Vectors
	if load == nil {
		if v.SplitByAgent {
			x.SplitByAgent()
		}
		if v.SplitByTime {
			x.SplitByTime()
		}
		return
	}
	f := d.splitsFile
	d.splitsFile = nil
	d.splitsLoading.Store(true)
	d.wg.Go(func() {
		defer d.splitsLoading.Store(false)
		if beforeSplitsLoad != nil {
			beforeSplitsLoad(ctx)
		}
		t := time.Now()
		got, err := load.Load(ctx, bufio.NewReaderSize(f, 1<<20), v.SplitByAgent, v.SplitByTime)
		switch {
		case errors.Is(err, context.Canceled): // stopping
		case err != nil:
			d.log.Warn("vector splits snapshot unreadable; filling the splits from the index", "err", err)
			if rmErr := removeIfSame(f); rmErr != nil {
				d.log.Warn("vector splits snapshot not removed", "err", rmErr)
			}
		case got.Splits == 0:
			d.log.Info("vector splits snapshot holds no split; filling the splits from the index")
		default:
			d.splitsLoaded.Store(true)
			// Entries the index no longer confirms (changed since the
			// start, or saved by another index) are filled anew.
			d.log.Info("vector splits snapshot loaded", "splits", got.Splits, "entries", got.Entries, "kept", got.Kept, "took", time.Since(t))
		}
		f.Close()
	})
}

// beforeSplitsLoad, when set (by tests), runs before the splits are
// read from their snapshot: it can hold the read, as a large one lasts.
var beforeSplitsLoad func(ctx context.Context)

// splitsLoadWait bounds a shutdown's wait for the splits' snapshot being
// read (awaitSplitsLoad): about 3 s at a million items.
const splitsLoadWait = 30 * time.Second

// awaitSplitsLoad waits, up to limit, for a read of the vector index's
// splits from their snapshot that is under way, when the shutdown will
// write the snapshot again (something committed since the index was
// loaded, or its files gone). Stopped, the read leaves the splits
// unready, the shutdown saves the index without them, and the next
// start fills them from the index (20-28 s of CPU at a million items)
// where the read took about 3 s. When the snapshot stays as it is
// (vectorSnapshotHolds), nothing waits.
func (d *Daemon) awaitSplitsLoad(limit time.Duration) {
	if !d.SplitsLoading() {
		return
	}
	if gen, err := d.store.Generation(); err != nil || d.vectorSnapshotHolds(gen) {
		return
	}
	t := time.Now()
	for d.SplitsLoading() && time.Since(t) < limit {
		time.Sleep(5 * time.Millisecond)
	}
	d.log.Info("shutdown waited for the vector splits to be read from their snapshot", "took", time.Since(t), "read", !d.SplitsLoading())
}

// removeIfSame removes the file f was opened from, unless another has
// taken its path since (a checkpoint's newer snapshot, written while f
// was read).
func removeIfSame(f *os.File) error {
	opened, err := f.Stat()
	if err != nil {
		return err
	}
	now, err := os.Stat(f.Name())
	if errors.Is(err, fs.ErrNotExist) || err == nil && !os.SameFile(opened, now) {
		return nil
	}
	if err != nil {
		return err
	}
	return removeIfPresent(f.Name())
}

// newVectorIndex is an empty index of the kind cfg configures.
func newVectorIndex(cfg Config, dim int) wave.Index {
	switch v := cfg.Vectors; v.Index {
	case "flat":
		return wave.NewFlat(dim)
	case "ivf":
		return wave.NewIVF(dim, wave.IVFOptions{NProbe: v.NProbe})
	default:
		return wave.NewHNSW(dim, wave.HNSWOptions{M: v.M, EfConstruction: v.EfConstruction, EfSearch: v.EfSearch})
	}
}

// loadVectorSnapshot reads the configured index's snapshot and the
// store generation it was saved at (d.vectorsAt); it returns nil (and
// logs why) when there is none or it cannot be used, and then removes
// it. A snapshot that loads stays: a run that dies before its shutdown
// saves another leaves it for the next start, which catches it up with
// the graph (catchUpVectors) instead of rebuilding the index.
func (d *Daemon) loadVectorSnapshot(dim int) (wave.Index, error) {
	v := d.cfg.Vectors
	path := d.vectorSnapshot()
	f, err := openIfPresent(path)
	if f == nil {
		if err != nil {
			err = fmt.Errorf("vector snapshot: %w", err)
		}
		return nil, err
	}
	t := time.Now()
	idx, rerr := readVectorIndex(v.Index, bufio.NewReaderSize(f, 1<<20))
	f.Close()
	var at particle.Generation
	if rerr == nil {
		at, rerr = readGeneration(vectorStampBeside(path))
	}
	var drop string
	switch {
	case rerr != nil:
		drop = "vector snapshot unreadable, or not stamped with the graph's generation; rebuilding from the graph"
	case idx.Dim() != dim:
		drop = fmt.Sprintf("vector snapshot has dimension %d, not %d; rebuilding from the graph", idx.Dim(), dim)
	}
	if drop != "" {
		d.log.Warn(drop, "err", rerr)
		if err := d.removeVectorSnapshot(); err != nil {
			return nil, err
		}
		return nil, nil
	}
	d.vectorsAt = &at
	switch x := idx.(type) {
	case *wave.HNSW:
		x.SetEfSearch(v.EfSearch)
	case *wave.IVF:
		x.SetNProbe(v.NProbe)
	}
	d.log.Info("vector snapshot loaded", "index", v.Index, "vectors", idx.Len(), "took", time.Since(t))
	return idx, nil
}

// snapshotIndex is an index read from a snapshot.
type snapshotIndex interface {
	wave.Index
	Has(id uint64) bool
}

// readVectorIndex reads a snapshot of the given kind of index.
func readVectorIndex(kind string, r io.Reader) (snapshotIndex, error) {
	if kind == "ivf" {
		return wave.ReadIVF(r)
	}
	return wave.ReadHNSW(r)
}

// saveVectorIndex writes the HNSW or IVF index for the next start, with
// the splits beside it, stamped with a generation of the graph it holds
// at least (writeVectorSnapshot): the generation first, then every
// batch queued for the index by then is waited for, then the index is
// written. At a shutdown (after the indexer has drained and before the
// store closes) that generation is the one the index matches; at a
// checkpoint, while ingest goes on, the index may hold commits after
// it, which a catch-up from the stamp removes and the fill adds again.
func (d *Daemon) saveVectorIndex(ctx context.Context) error {
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
	if d.vectorSnapshotHolds(gen) {
		d.log.Info("vector snapshot kept: nothing was written since it was loaded")
		return nil
	}
	return d.writeVectorSnapshot(gen)
}

// vectorSnapshotHolds reports whether the vector snapshot on disk still
// holds the index at the graph's generation gen: the index was loaded
// from it, stamped gen (nothing committed since), and for an IVF the
// splits saved beside it hold every split the configuration asks for.
// A restart soon after a start then keeps the files as they are, where
// the index written again would have had beside it only the splits
// ready by then: none while they are read from their snapshot, so that
// the next start filled them from the index (20-28 s of CPU at a
// million items).
func (d *Daemon) vectorSnapshotHolds(gen particle.Generation) bool {
	if d.vectorsAt == nil || *d.vectorsAt != gen {
		return false
	}
	for _, p := range []string{d.vectorSnapshot(), vectorStampBeside(d.vectorSnapshot())} {
		if _, err := os.Stat(p); err != nil {
			return false // gone since the start: written again
		}
	}
	x, ok := d.index.(*wave.IVF)
	if !ok {
		return true
	}
	f, err := os.Open(d.splitsSnapshot())
	if err != nil {
		return false
	}
	defer f.Close()
	agent, byTime, err := wave.SplitsSaved(bufio.NewReader(f), x.Dim())
	v := d.cfg.Vectors
	return err == nil && (agent || !v.SplitByAgent) && (byTime || !v.SplitByTime)
}

// writeVectorSnapshot writes the index to its snapshot, an IVF's splits
// beside it, then the stamp gen, a generation of the graph the index
// holds at least. The stale splits go first, so that none older than
// the index is ever beside it with a stamp newer than they are. A stamp
// older than the snapshot and splits (a run that died between the
// writes, or a checkpoint's index holding commits after gen) is safe:
// the catch-up from it drops and adds again more than it needs to, and
// the splits' load leaves out what it dropped. One newer cannot occur:
// the stamp is written last, and a failed write leaves the old one
// with a snapshot at least as new.
func (d *Daemon) writeVectorSnapshot(gen particle.Generation) error {
	w, _ := d.index.(io.WriterTo)
	path := d.vectorSnapshot()
	if err := removeIfPresent(d.splitsSnapshot()); err != nil {
		return fmt.Errorf("vector splits snapshot: %w", err)
	}
	t := time.Now()
	if err := writeSnapshot(path, func(f io.Writer) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		if _, err := w.WriteTo(bw); err != nil {
			return err
		}
		return bw.Flush()
	}); err != nil {
		return fmt.Errorf("vector snapshot: %w", err)
	}
	indexTook := time.Since(t)
	var splitsTook time.Duration
	if x, ok := d.index.(*wave.IVF); ok {
		t = time.Now()
		if err := d.saveSplits(x); err != nil {
			return err
		}
		splitsTook = time.Since(t)
	}
	if err := writeGeneration(vectorStampBeside(path), gen); err != nil {
		return errors.Join(fmt.Errorf("vector snapshot's stamp: %w", err), d.removeVectorSnapshot())
	}
	d.log.Info("vector snapshot written", "index_took", indexTook, "splits_took", splitsTook)
	return nil
}

// writeSnapshot writes the file at path with write, whole or not at all:
// into a temporary file beside it, synced, then renamed over it.
func writeSnapshot(path string, write func(io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// SplitsFromSnapshot reports whether this start read the vector index's
// splits from the snapshot saved beside the index (they are
// ready once each holds every item: wave.IVF.SplitsReady), once
// SplitsLoading is false.
func (d *Daemon) SplitsFromSnapshot() bool { return d.splitsLoaded.Load() }

// SplitsLoading reports whether the vector index's splits snapshot is
// being read (from the start until its splits are checked and it is
// removed).
func (d *Daemon) SplitsLoading() bool { return d.splitsLoading.Load() }

// saveSplits writes the IVF's splits beside its snapshot, for the next
// start to load instead of filling them (a million items' fill took
// 13-18 s and 20-28 s of CPU after the start).
func (d *Daemon) saveSplits(x *wave.IVF) error {
	err := writeSnapshot(d.splitsSnapshot(), func(f io.Writer) error {
		_, err := x.WriteSplitsTo(f) // buffered by the writer
		return err
	})
	if err != nil {
		return fmt.Errorf("vector splits snapshot: %w", err)
	}
	return nil
}

// vectorStampBeside is where the store generation that the vector
// snapshot at path matches is saved.
func vectorStampBeside(path string) string { return path + ".generation" }

// removeVectorSnapshot removes the configured index's snapshot, its
// stamp and the splits saved beside it.
func (d *Daemon) removeVectorSnapshot() error {
	path := d.vectorSnapshot()
	for _, p := range []string{path, vectorStampBeside(path), splitsSnapshotBeside(path)} {
		if err := removeIfPresent(p); err != nil {
			return fmt.Errorf("vector snapshot: %w", err)
		}
	}
	return nil
}

// writeGeneration saves g at path (through a synced temporary file).
func writeGeneration(path string, g particle.Generation) error {
	return writeSnapshot(path, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%d %d\n", g.Version, g.Sum)
		return err
	})
}

// readGeneration reads the generation saved at path.
func readGeneration(path string) (particle.Generation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return particle.Generation{}, err
	}
	var g particle.Generation
	if _, err := fmt.Sscanf(string(b), "%d %d\n", &g.Version, &g.Sum); err != nil {
		return particle.Generation{}, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// catchUpVectors matches the index loaded from its snapshot to the
// graph, once the store is open (catchUpIndex), before the indexer's
// fill adds what it removed. An index it cannot match is replaced by an
// empty one that the fill builds from the graph.
func (d *Daemon) catchUpVectors() error {
	d.vectorsCaughtUp = -1
	if d.vectorsAt == nil {
		return nil
	}
	t := time.Now()
	cu, err := catchUpIndex(d.store, d.index, *d.vectorsAt)
	switch {
	case errors.Is(err, errNotOfGraph):
		d.log.Warn("vector snapshot cannot be matched to the graph; rebuilding it from the graph", "err", err)
		return d.dropLoadedVectors()
	case err != nil:
		return err
	case cu.written+cu.deleted == 0:
		return nil
	}
	// The splits saved beside it hold the items before the catch-up:
	// their load leaves out those it touched (splitsStale), which the
	// splits' fill adds anew, instead of the fill making every split
	// again (20-28 s of CPU at a million items).
	d.splitsStale = cu.seqs
	d.vectorsCaughtUp = cu.written + cu.deleted
	d.log.Info("vector snapshot caught up with the graph", "since_version", d.vectorsAt.Version,
		"written", cu.written, "deleted", cu.deleted, "took", time.Since(t))
	return nil
}

// vectorStampAhead is the Badger version of the vector snapshot's
// stamp, read before the store opens so that it reads what changed
// since beside the view's load (particle.Options.ReadChangedSince).
// The vector catch-up asks it next (catchUpVectors), and the keyword
// catch-up beside it takes its answer from that read too when the
// keyword documents were saved later (particle.Store.ChangedSince
// serves a later version from an older answer); when they are the
// older, it reads its own longer span, beside the start's path. 0 when
// there is no snapshot or stamp to read; a start that then cannot use
// the snapshot read in vain.
func (d *Daemon) vectorStampAhead() uint64 {
	path := d.vectorSnapshot()
	if path == "" {
		return 0
	}
	if _, err := os.Stat(path); err != nil {
		return 0
	}
	at, err := readGeneration(vectorStampBeside(path))
	if err != nil {
		return 0
	}
	return at.Version
}

// errNotOfGraph is catchUpIndex's error for a snapshot it cannot match
// to the graph.
var errNotOfGraph = errors.New("the vector snapshot cannot be matched to the graph")

// catchUpIndex matches idx, loaded from a snapshot saved at store
// generation at, to the store: a snapshot of the store's generation
// matches it already; one of an earlier generation (a run that died
// before its shutdown saved another) has the vectors of the nodes,
// edges and episodes written or deleted since removed, which a fill from
// the graph (planner.NewIndexer) adds again. It returns how many it
// removed of each, and errNotOfGraph for a snapshot of another history
// or one whose deletions since are not known.
func catchUpIndex(store *particle.Store, idx wave.Index, at particle.Generation) (vectorCatchUp, error) {
	now, err := store.Generation()
	switch {
	case err != nil:
		return vectorCatchUp{}, err
	case at == now:
		return vectorCatchUp{}, nil
	case at.Version >= now.Version:
		return vectorCatchUp{}, fmt.Errorf("%w: saved at version %d, the graph at %d", errNotOfGraph, at.Version, now.Version)
	}
	w, err := store.ChangedSince(at.Version)
	if errors.Is(err, particle.ErrDeletionsUnknown) {
		return vectorCatchUp{}, fmt.Errorf("%w: %v", errNotOfGraph, err)
	}
	if err != nil {
		return vectorCatchUp{}, err
	}
	cu := vectorCatchUp{written: len(w.Records), deleted: len(w.Removed), seqs: make([]uint64, 0, len(w.Records)+len(w.Removed))}
	for _, rs := range [][]particle.RecordRef{w.Records, w.Removed} {
		for _, r := range rs {
			idx.Remove(r.Seq)
			cu.seqs = append(cu.seqs, r.Seq)
		}
	}
	return cu, nil
}

// vectorCatchUp is what catchUpIndex removed: the vectors of the
// records written since the snapshot, of those deleted since, and the
// seqs of both.
type vectorCatchUp struct {
	written, deleted int
	seqs             []uint64
}

// dropLoadedVectors replaces the index loaded from its snapshot by an
// empty one, and removes the snapshot.
func (d *Daemon) dropLoadedVectors() error {
	if err := d.dropSplitsSnapshot(); err != nil {
		return err
	}
	d.vectorsAt = nil
	d.index = newVectorIndex(d.cfg, d.index.Dim())
	return d.removeVectorSnapshot()
}

// dropSplitsSnapshot closes and removes the splits snapshot opened
// beside the loaded index, if any: the next fill makes the splits.
func (d *Daemon) dropSplitsSnapshot() error {
	if d.splitsFile == nil {
		return nil
	}
	d.splitsFile.Close()
	d.splitsFile = nil
	if err := removeIfPresent(d.splitsSnapshot()); err != nil {
		return fmt.Errorf("vector splits snapshot: %w", err)
	}
	return nil
}
