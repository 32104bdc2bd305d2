package keyword

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/blevesearch/bleve/v2"

	"github.com/ctxgraph/ctxgraph/particle"
)

// Verification is what [Verify] found.
type Verification struct {
	// Docs is how many documents the store calls for.
	Docs int
	// Problems are differences between the index and the store that
	// the index would not repair by itself.
	Problems []string
	// Note says how the index was checked, or why it will be rebuilt.
	Note string
}

// Verify compares the on-disk index in dir with what store holds,
// changing neither, as a stopped daemon's check does. An index closed
// cleanly at the store's current generation is one the next Open takes
// as it is: its saved documents must be the store's exactly. One closed
// before the store was last written is reconciled by the next Open, so
// its differences are counted in the note, not reported as problems.
// Either way bleve must hold as many documents as were saved. An
// index not closed cleanly (a crash) is caught up or rebuilt at the
// next Open, one of another mapping version rebuilt, so either is
// noted, not a problem. Without an
// index in dir, Verify builds one in memory from the store and checks
// that it holds every document.
func Verify(store *particle.Store, dir string) (*Verification, error) {
	want, _, err := documents(store)
	if err != nil {
		return nil, err
	}
	v := &Verification{Docs: len(want)}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		ix, err := Open(store, Options{})
		if err != nil {
			return nil, err
		}
		defer ix.Close()
		v.Note = "no index on disk; built in memory from the store"
		if ix.Len() != len(want) {
			v.Problems = append(v.Problems, fmt.Sprintf("built index holds %d documents, the store calls for %d", ix.Len(), len(want)))
		}
		return v, nil
	}
	bl, err := bleve.OpenUsing(dir, map[string]any{"read_only": true})
	if err != nil {
		v.Note = fmt.Sprintf("index in %s unreadable (%v); the next start rebuilds it", dir, err)
		return v, nil
	}
	defer bl.Close()
	state, _ := bl.GetInternal(keyState)
	version, _ := bl.GetInternal(keyVersion)
	switch {
	case string(state) != "clean":
		v.Note = "on-disk index not closed cleanly (a crash): the next start catches it up with the store when the crash was on this boot, else rebuilds it"
		return v, nil
	case string(version) != mappingVersion:
		v.Note = fmt.Sprintf("on-disk index of mapping %q, not %q: the next start rebuilds it", version, mappingVersion)
		return v, nil
	}
	saved, _, err := readSaved(bl, dir)
	if err != nil {
		v.Problems = append(v.Problems, fmt.Sprintf("index marked clean but its saved documents are unreadable: %v", err))
		return v, nil
	}
	var diffs []string
	stored := make(map[docKey]bool, len(want))
	for _, p := range want {
		stored[p.key] = true
		switch d, ok := saved.texts[p.key]; {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("document %q is missing from the index", p.id))
		case d != p.document:
			diffs = append(diffs, fmt.Sprintf("document %q is indexed with other text than the store holds", p.id))
		}
	}
	for k := range saved.texts {
		if !stored[k] {
			diffs = append(diffs, fmt.Sprintf("the index holds %q, which the store does not", k.docID()))
		}
	}
	var bad []string
	if gen, err := store.Generation(); err == nil && sameGeneration(saved.gen, &gen) {
		// The next Open takes the saved documents as they are: every
		// difference would stay.
		v.Note = "on-disk index, closed cleanly at the store's current generation (the next start takes it as it is), compared document by document"
		bad = diffs
	} else {
		v.Note = fmt.Sprintf("on-disk index, closed cleanly; the store was written since, and the next start reconciles the %d documents that differ", len(diffs))
	}
	if n, err := bl.DocCount(); err != nil || int(n) != len(saved.texts) {
		bad = append(bad, fmt.Sprintf("bleve holds %d documents (%v), the saved documents %d", n, err, len(saved.texts)))
	}
	slices.Sort(bad)
	if len(bad) > 20 {
		bad = append(bad[:20], fmt.Sprintf("… %d differences in all", len(bad)))
	}
	v.Problems = bad
	return v, nil
}
