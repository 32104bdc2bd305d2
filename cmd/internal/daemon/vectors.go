package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

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

// openVectorIndex returns the configured index: the one saved at the
// last clean shutdown when there is one (it matches the graph exactly),
// else an empty one that the indexer fills from the graph. A snapshot is
// removed once loaded, so after a crash the index is rebuilt from the
// graph rather than trusted stale; so is the snapshot of another kind of
// index (left before vectors.index changed), which would be stale later.
func (d *Daemon) openVectorIndex(dim int) (wave.Index, error) {
	v := d.cfg.Vectors
	for kind, name := range vectorSnapshots {
		if kind == v.Index {
			continue
		}
		if err := os.Remove(filepath.Join(d.cfg.Data, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("vector snapshot: %w", err)
		}
	}
	if v.Index == "flat" {
		return newVectorIndex(d.cfg, dim), nil
	}
	idx, err := d.loadVectorSnapshot(dim)
	if err != nil || idx != nil {
		return idx, err
	}
	return newVectorIndex(d.cfg, dim), nil
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

// loadVectorSnapshot reads and removes the configured index's snapshot;
// it returns nil (and logs why) when there is none or it cannot be used.
func (d *Daemon) loadVectorSnapshot(dim int) (wave.Index, error) {
	v := d.cfg.Vectors
	path := d.vectorSnapshot()
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("vector snapshot: %w", err)
	}
	t := time.Now()
	idx, rerr := readVectorIndex(v.Index, bufio.NewReaderSize(f, 1<<20))
	f.Close()
	if rmErr := os.Remove(path); rmErr != nil {
		return nil, fmt.Errorf("vector snapshot: %w", rmErr)
	}
	switch {
	case rerr != nil:
		d.log.Warn("vector snapshot unreadable; rebuilding from the graph", "err", rerr)
		return nil, nil
	case idx.Dim() != dim:
		d.log.Warn("vector snapshot has another dimension; rebuilding from the graph", "have", idx.Dim(), "want", dim)
		return nil, nil
	}
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

// saveVectorIndex writes the HNSW or IVF index for the next start (after
// the indexer has drained and before the store closes).
func (d *Daemon) saveVectorIndex() error {
	w, ok := d.index.(io.WriterTo)
	if !ok {
		return nil
	}
	path := d.vectorSnapshot()
	if path == "" {
		return nil
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("vector snapshot: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	_, err = w.WriteTo(bw)
	if err == nil {
		err = bw.Flush()
	}
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
		return fmt.Errorf("vector snapshot: %w", err)
	}
	return nil
}
