package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/planner/keyword"
	"github.com/ctxgraph/ctxgraph/wave"
)

// CheckResult is what `ctxgraph check` found in a data directory: the
// store's own consistency, and each derived index against the store.
type CheckResult struct {
	Data    string                `json:"data"`
	Store   *particle.CheckReport `json:"store"`
	Derived []DerivedCheck        `json:"derived"`
}

// DerivedCheck is the comparison of one derived index with the store.
type DerivedCheck struct {
	Name     string   `json:"name"`
	Items    int      `json:"items"`
	Problems []string `json:"problems,omitempty"`
	Note     string   `json:"note,omitempty"`
}

// OK reports whether nothing is wrong.
func (r *CheckResult) OK() bool {
	if !r.Store.OK() {
		return false
	}
	for _, d := range r.Derived {
		if len(d.Problems) > 0 {
			return false
		}
	}
	return true
}

// derivedChecks compare further derived indexes with the store; files
// of this package that add an index register its check in init.
var derivedChecks []func(ctx context.Context, cfg Config, store *particle.Store, log *slog.Logger) DerivedCheck

// errInUse is returned when the data directory is open in a daemon.
var errInUse = errors.New("the store is in use (stop the daemon first)")

// Check verifies the data directory of cfg on a stopped daemon: it opens
// the store (recovering it as a restart would), runs the store's own
// check, and rebuilds every derived index from the store to compare.
func Check(ctx context.Context, cfg Config, log *slog.Logger) (*CheckResult, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	graph := filepath.Join(cfg.Data, "graph")
	if _, err := os.Stat(graph); err != nil {
		return nil, fmt.Errorf("no store in %s: %w", cfg.Data, err)
	}
	so := particle.DefaultOptions(graph)
	so.ViewSnapshot = cfg.Storage.ViewSnapshot
	// The vector snapshot the daemon saved may need them to catch up.
	so.KeepDeletionMarkers = true
	so.Logger = log.With("component", "particle")
	store, err := particle.Open(so)
	if err != nil {
		if strings.Contains(err.Error(), "directory lock") {
			return nil, fmt.Errorf("%s: %w", graph, errInUse)
		}
		return nil, err
	}
	defer store.Close()
	res := &CheckResult{Data: cfg.Data}
	if res.Store, err = store.Check(ctx); err != nil {
		return nil, err
	}
	res.Derived = append(res.Derived, checkVectors(store, newVectorIndex(cfg, cfg.Embed.Dimensions)))
	for _, kind := range []string{"hnsw", "ivf"} {
		name := vectorSnapshots[kind]
		snaps, err := checkVectorSnapshot(ctx, store, kind, filepath.Join(cfg.Data, name), cfg.Embed.Dimensions)
		if err != nil {
			return nil, err
		}
		res.Derived = append(res.Derived, snaps...)
	}
	res.Derived = append(res.Derived, checkKeyword(store, filepath.Join(cfg.Data, "keyword")))
	for _, c := range derivedChecks {
		res.Derived = append(res.Derived, c(ctx, cfg, store, log))
	}
	return res, nil
}

// recordingIndex is a wave.Index that remembers what it was given.
type recordingIndex struct {
	wave.Index
	mu   sync.Mutex
	vecs map[uint64][]float32
}

func (r *recordingIndex) Add(id uint64, vec []float32, m wave.Meta) error {
	if err := r.Index.Add(id, vec, m); err != nil {
		return err // refused: the index does not hold it
	}
	r.mu.Lock()
	r.vecs[id] = vec
	r.mu.Unlock()
	return nil
}

func (r *recordingIndex) Remove(id uint64) bool {
	r.mu.Lock()
	delete(r.vecs, id)
	r.mu.Unlock()
	return r.Index.Remove(id)
}

// checkVectors builds the vector index as the daemon does without a
// snapshot (idx: an empty one of the configured kind) and checks it
// against the store: one vector per record with an embedding of the
// index's dimension, under the record's seq, equal to the stored
// embedding, and found by a search for itself.
func checkVectors(store *particle.Store, idx wave.Index) DerivedCheck {
	dc := DerivedCheck{Name: "vector index", Note: "rebuilt from the store, as the daemon does at start"}
	rec := &recordingIndex{Index: idx, vecs: map[uint64][]float32{}}
	ixr, err := planner.NewIndexer(store, rec, 0)
	if err != nil {
		dc.Problems = append(dc.Problems, "build: "+err.Error())
		return dc
	}
	defer ixr.Close()
	dim := idx.Dim()
	want, wrongDim := embeddings(store, dim)
	if wrongDim > 0 {
		dc.Problems = append(dc.Problems, fmt.Sprintf("%d records have embeddings of another dimension than the index's %d: they are not searchable", wrongDim, dim))
	}
	dc.Items = idx.Len()
	if idx.Len() != len(want) {
		dc.Problems = append(dc.Problems, fmt.Sprintf("index holds %d vectors, the store %d embeddings", idx.Len(), len(want)))
	}
	bad := 0
	report := func(format string, a ...any) {
		if bad++; bad <= 20 {
			dc.Problems = append(dc.Problems, fmt.Sprintf(format, a...))
		}
	}
	for seq, vec := range want {
		got, ok := rec.vecs[seq]
		switch {
		case !ok:
			report("%s (seq %d) is missing from the index", recordName(store, seq), seq)
		case !slices.Equal(got, vec):
			report("%s (seq %d): indexed vector differs from the stored embedding", recordName(store, seq), seq)
		}
	}
	for seq := range rec.vecs {
		if _, ok := want[seq]; !ok {
			report("index holds seq %d, which no stored record has", seq)
		}
	}
	// The index answers: a sample of records finds itself.
	findsItself(store, idx, want, 200, report)
	if bad > 20 {
		dc.Problems = append(dc.Problems, fmt.Sprintf("… %d vector problems in all", bad))
	}
	return dc
}

// embeddings are the vectors the store holds for the index: by seq, the
// records' embeddings of dimension dim (the view's own slices, not
// copies), and how many records hold one of another dimension.
func embeddings(store *particle.Store, dim int) (want map[uint64][]float32, wrongDim int) {
	want = map[uint64][]float32{}
	add := func(seq uint64, vec []float32) {
		switch {
		case len(vec) == 0:
		case len(vec) != dim:
			wrongDim++
		default:
			want[seq] = vec
		}
	}
	store.Read(func(r particle.Reader) {
		r.Nodes(func(n *particle.Node) bool { add(n.Seq, n.Embedding); return true })
		r.Edges(func(e *particle.Edge) bool { add(e.Seq, e.Embedding); return true })
		r.Episodes(func(e *particle.Episode) bool { add(e.Seq, e.Embedding); return true })
	})
	return want, wrongDim
}

// recordName names the record holding seq ("edge ID"), for a report.
func recordName(store *particle.Store, seq uint64) (name string) {
	name = fmt.Sprintf("seq %d", seq)
	store.Read(func(r particle.Reader) {
		if n := r.NodeBySeq(seq); n != nil {
			name = "node " + n.ID
		} else if e := r.EdgeBySeq(seq); e != nil {
			name = "edge " + e.ID
		} else if e := r.EpisodeBySeq(seq); e != nil {
			name = "episode " + e.ID
		}
	})
	return name
}

// findsItself checks that a search for each of up to n stored vectors
// finds it, with its own vector (cosine 1), and reports what does not.
func findsItself(store *particle.Store, idx wave.Index, want map[uint64][]float32, n int, report func(string, ...any)) {
	for seq, vec := range want {
		if n--; n < 0 {
			return
		}
		hits := idx.Search(vec, 1, &wave.Filter{Allow: func(id uint64) bool { return id == seq }})
		if len(hits) != 1 || hits[0].ID != seq || hits[0].Score < 0.999 {
			report("%s (seq %d): a search for its own vector returns %v", recordName(store, seq), seq, hits)
		}
	}
}

// checkVectorSnapshot loads the index (of the given kind: hnsw or ivf) a
// clean shutdown saved, the way the next start would (caught up with the
// store when saved at an earlier generation: catchUpIndex), and compares
// it with the store: the same ids (one per stored embedding; after a
// catch-up, none the store lacks, the rest being the fill's to add) and
// the stored vectors (a sample finds itself; an IVF snapshot holds int8
// codes, so the store's vectors are attached first, as the indexer does
// at start); then an IVF's splits saved beside it (checkSplitsSnapshot),
// which a catch-up drops. Without a snapshot it returns none: the next
// start rebuilds.
func checkVectorSnapshot(ctx context.Context, store *particle.Store, kind, path string, dim int) ([]DerivedCheck, error) {
	f, err := openIfPresent(path)
	if f == nil {
		return nil, err // none: nothing to check
	}
	defer f.Close()
	dc := &DerivedCheck{Name: "vector snapshot", Note: "loaded from " + filepath.Base(path) + " as the next start will"}
	h, err := readVectorIndex(kind, bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		dc.Note = fmt.Sprintf("unreadable (%v): the next start rebuilds the index from the store", err)
		return []DerivedCheck{*dc}, nil
	}
	if h.Dim() != dim {
		dc.Note = fmt.Sprintf("%d-d, not %d-d: the next start rebuilds the index from the store", h.Dim(), dim)
		return []DerivedCheck{*dc}, nil
	}
	at, err := readGeneration(vectorStampBeside(path))
	if err != nil {
		dc.Note = fmt.Sprintf("not stamped with the graph's generation (%v): the next start rebuilds the index from the store", err)
		return []DerivedCheck{*dc}, nil
	}
	cu, err := catchUpIndex(store, h, at)
	switch {
	case errors.Is(err, errNotOfGraph):
		dc.Note = fmt.Sprintf("%v: the next start rebuilds the index from the store", err)
		return []DerivedCheck{*dc}, nil
	case err != nil:
		return nil, err
	}
	caughtUp := cu.written+cu.deleted > 0
	if caughtUp {
		dc.Note += fmt.Sprintf(", caught up with the store (%d written, %d deleted since it was saved)", cu.written, cu.deleted)
	}
	want, _ := embeddings(store, dim)
	dc.Items = h.Len()
	bad := 0
	report := func(format string, a ...any) {
		if bad++; bad <= 20 {
			dc.Problems = append(dc.Problems, fmt.Sprintf(format, a...))
		}
	}
	a, attach := h.(interface{ Attach(uint64, []float32) bool })
	held := map[uint64][]float32{} // the stored vectors the snapshot holds
	for seq, vec := range want {
		switch {
		case h.Has(seq):
			held[seq] = vec
			if attach {
				a.Attach(seq, vec)
			}
		case !caughtUp:
			report("%s (seq %d) is missing from the snapshot", recordName(store, seq), seq)
		}
	}
	if h.Len() != len(held) || !caughtUp && len(held) != len(want) {
		report("snapshot holds %d vectors, the store %d embeddings (%d of them in the snapshot)", h.Len(), len(want), len(held))
	}
	findsItself(store, h, held, 200, report)
	if bad > 20 {
		dc.Problems = append(dc.Problems, fmt.Sprintf("… %d problems in all", bad))
	}
	out := []DerivedCheck{*dc}
	if x, ok := h.(*wave.IVF); ok && !caughtUp {
		splits, err := checkSplitsSnapshot(ctx, x, splitsSnapshotBeside(path))
		if err != nil {
			return nil, err
		}
		out = append(out, splits...)
	}
	return out, nil
}

// checkSplitsSnapshot loads the splits saved beside an IVF snapshot
// (path) into x, that snapshot with the store's vectors attached, as
// the next start will, and reports the saved entries x does not
// confirm: after a clean shutdown there are none. Without the file it
// returns none.
func checkSplitsSnapshot(ctx context.Context, x *wave.IVF, path string) ([]DerivedCheck, error) {
	f, err := openIfPresent(path)
	if f == nil {
		return nil, err // none: nothing to check
	}
	defer f.Close()
	dc := DerivedCheck{Name: "vector splits snapshot", Note: "loaded from " + filepath.Base(path) + " into the vector snapshot as the next start will"}
	got, err := x.ExpectSplits().Load(ctx, bufio.NewReaderSize(f, 1<<20), true, true)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		dc.Note = fmt.Sprintf("unreadable (%v): the next start fills the splits from the index", err)
		return []DerivedCheck{dc}, nil
	}
	dc.Items = got.Entries
	if got.Kept != got.Entries {
		dc.Problems = append(dc.Problems, fmt.Sprintf("%d of the %d entries saved in %d splits do not match the vector snapshot (the next start fills them anew)",
			got.Entries-got.Kept, got.Entries, got.Splits))
	}
	return []DerivedCheck{dc}, nil
}

// checkKeyword compares the keyword (text) index with the store: the
// on-disk one in dir if there is one, else one built in memory.
func checkKeyword(store *particle.Store, dir string) DerivedCheck {
	dc := DerivedCheck{Name: "keyword index"}
	v, err := keyword.Verify(store, dir)
	if err != nil {
		dc.Problems = append(dc.Problems, err.Error())
		return dc
	}
	dc.Items, dc.Problems, dc.Note = v.Docs, v.Problems, v.Note
	return dc
}
