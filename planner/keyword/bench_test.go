package keyword

import (
	"fmt"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

// benchStore holds n parts, each with a serial number (an assertion
// value) and a bay: 2n+~40 nodes, n valued edges.
func benchStore(b *testing.B, n int) *particle.Store {
	s := openStore(b)
	words := []string{"gripper", "bracket", "sensor", "cable", "fixture", "camera", "motor", "valve"}
	for start := 0; start < n; start += 500 {
		update(b, s, func(bt *particle.Batch) error {
			for i := start; i < min(n, start+500); i++ {
				a, _, err := bt.Resolve(ns, particle.NodeEntity, fmt.Sprintf("%s part %d", words[i%len(words)], i))
				if err != nil {
					return err
				}
				c, _, err := bt.Resolve(ns, particle.NodeEntity, fmt.Sprintf("bay %d", i%40))
				if err != nil {
					return err
				}
				if err := bt.PutNode(a); err != nil {
					return err
				}
				if err := bt.PutNode(c); err != nil {
					return err
				}
				if _, _, err := bt.Observe(particle.Observation{Namespace: ns, Source: a.ID, Target: c.ID, Type: particle.EdgeAssertion,
					Predicate: "serial_number", Value: fmt.Sprintf("SN-%05d-XQ", i), At: t0}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return s
}

// BenchmarkSearch: one BM25 query over 20k documents, on disk (scorch
// segments merged in the background, as the daemon runs it) and in
// memory (one segment per committed batch).
func BenchmarkSearch(b *testing.B) {
	const parts = 10000
	s := benchStore(b, parts)
	for _, mode := range []string{"disk", "memory"} {
		o := Options{}
		if mode == "disk" {
			o.Dir = b.TempDir() + "/kw"
		}
		ix, err := Open(s, o)
		if err != nil {
			b.Fatal(err)
		}
		if mode == "disk" { // reopen: what a restarted daemon searches
			ix.Close()
			if ix, err = Open(s, o); err != nil {
				b.Fatal(err)
			}
		}
		for _, q := range []string{"SN-01234-XQ", "gripper part", `"camera part 77"`} {
			b.Run(fmt.Sprintf("%s/%s", mode, q), func(b *testing.B) {
				for b.Loop() {
					hits, err := ix.Search(ns, q, 20)
					if err != nil || len(hits) == 0 {
						b.Fatal(hits, err)
					}
				}
			})
		}
		ix.Close()
	}
}

// BenchmarkOpen: building the index from a store of 20k documents, and
// reopening it from disk after a clean close (the store unwritten since:
// the saved documents taken as they are).
func BenchmarkOpen(b *testing.B) {
	s := benchStore(b, 10000)
	dir := b.TempDir() + "/kw"
	b.Run("build-memory", func(b *testing.B) {
		for b.Loop() {
			ix, err := Open(s, Options{})
			if err != nil {
				b.Fatal(err)
			}
			ix.Close()
		}
	})
	ix, err := Open(s, Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	ix.Close()
	b.Run("reopen-clean-disk", func(b *testing.B) {
		for b.Loop() {
			ix, err := Open(s, Options{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			if ix.dirty {
				b.Fatal("reopen rebuilt")
			}
			ix.Close()
		}
	})
}

// BenchmarkApply is what the store subscription costs ingest per
// committed batch: a batch of 500 nodes and 500 edges whose text did
// not change (evidence for what is known: map look-ups, no bleve), and
// a batch of 100 new nodes (one bleve batch).
func BenchmarkApply(b *testing.B) {
	s := benchStore(b, 10000)
	ix, err := Open(s, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	var known particle.Changes
	s.Read(func(r particle.Reader) {
		r.Nodes(func(n *particle.Node) bool {
			known.Nodes = append(known.Nodes, n)
			return len(known.Nodes) < 500
		})
		r.Edges(func(e *particle.Edge) bool {
			known.Edges = append(known.Edges, e)
			return len(known.Edges) < 500
		})
	})
	b.Run("unchanged-500+500", func(b *testing.B) {
		for b.Loop() {
			ix.apply(known)
		}
	})
	b.Run("new-100", func(b *testing.B) {
		i := 0
		for b.Loop() {
			var ch particle.Changes
			for range 100 {
				i++
				ch.Nodes = append(ch.Nodes, &particle.Node{ID: fmt.Sprintf("new-%d", i), Namespace: ns, Type: particle.NodeEntity, Name: fmt.Sprintf("new part %d", i)})
			}
			ix.apply(ch)
		}
	})
}
