package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

// vectorSnapshot is where the HNSW index is saved at a clean shutdown.
func (d *Daemon) vectorSnapshot() string { return filepath.Join(d.cfg.Data, "vectors.hnsw") }

// openVectorIndex returns the configured index: the HNSW saved at the
// last clean shutdown when there is one (it matches the graph exactly),
// else an empty one that the indexer fills from the graph. A snapshot is
// removed once loaded, so after a crash the index is rebuilt from the
// graph rather than trusted stale.
func (d *Daemon) openVectorIndex(dim int) (wave.Index, error) {
	v := d.cfg.Vectors
	if v.Index == "flat" {
		return wave.NewFlat(dim), nil
	}
	path := d.vectorSnapshot()
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("vector snapshot: %w", err)
	default:
		t := time.Now()
		h, rerr := wave.ReadHNSW(bufio.NewReaderSize(f, 1<<20))
		f.Close()
		if rmErr := os.Remove(path); rmErr != nil {
			return nil, fmt.Errorf("vector snapshot: %w", rmErr)
		}
		switch {
		case rerr != nil:
			d.log.Warn("vector snapshot unreadable; rebuilding from the graph", "err", rerr)
		case h.Dim() != dim:
			d.log.Warn("vector snapshot has another dimension; rebuilding from the graph", "have", h.Dim(), "want", dim)
		default:
			h.SetEfSearch(v.EfSearch)
			d.log.Info("vector snapshot loaded", "vectors", h.Len(), "took", time.Since(t))
			return h, nil
		}
	}
	return wave.NewHNSW(dim, wave.HNSWOptions{M: v.M, EfConstruction: v.EfConstruction, EfSearch: v.EfSearch}), nil
}

// saveVectorIndex writes the HNSW index for the next start (after the
// indexer has drained and before the store closes).
func (d *Daemon) saveVectorIndex() error {
	h, ok := d.index.(*wave.HNSW)
	if !ok {
		return nil
	}
	path := d.vectorSnapshot()
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("vector snapshot: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	_, err = h.WriteTo(w)
	if err == nil {
		err = w.Flush()
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
