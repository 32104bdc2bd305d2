package particle

import (
	"context"
	"fmt"
	"testing"
)

// identities returns v's identity index as the map by key it replaced:
// each entry under its edge's identity key, and an entry that names no
// edge, or one of another identity, under a key saying so.
func identities(v *view) map[string]string {
	out := map[string]string{}
	n := 0
	v.identity.each(v, func(e *Edge, id string, matches bool) {
		switch {
		case e == nil || !matches:
			n++
			out[fmt.Sprintf("(entry %d: names %q, of another identity or none)", n, id)] = id
		default:
			out[identityOf(e)] = id
		}
	})
	return out
}

// withIdentitySumBits runs fn with the identity hashes cut to bits
// bits, so that many keys share one.
func withIdentitySumBits(t *testing.T, bits uint) {
	t.Helper()
	saved := identitySumMask
	identitySumMask = 1<<bits - 1
	t.Cleanup(func() { identitySumMask = saved })
}

// TestIdentityIndexAnswersAsAMapByKey drives a store's edges through
// creation, re-sighting, deletion and a node merge with the identity
// hashes whole and cut to 0 and 2 bits (every key, or a quarter of them,
// sharing a hash): each time every sighting after the first finds the
// edge it made, the index holds every edge once under its own identity,
// and the store's check finds nothing wrong.
func TestIdentityIndexAnswersAsAMapByKey(t *testing.T) {
	for _, bits := range []uint{64, 0, 2} {
		t.Run(fmt.Sprint(bits, "bits"), func(t *testing.T) {
			if bits < 64 {
				withIdentitySumBits(t, bits)
			}
			s := openScratchStore(t, t.TempDir())
			var ids []string
			sight := func(round int) (created int) {
				t.Helper()
				if _, err := s.Update(context.Background(), func(b *Batch) error {
					if ids == nil {
						var err error
						if ids, err = putThings(b, DefaultNamespace, 6); err != nil {
							return err
						}
					}
					for i, src := range ids {
						for j, dst := range ids {
							if i == j {
								continue
							}
							for _, ob := range []Observation{
								{Source: src, Target: dst, Type: EdgeCausal},
								{Source: src, Target: dst, Type: EdgeAssertion, Predicate: "next to", Location: fmt.Sprint("lab ", j%2)},
							} {
								_, c, err := b.Observe(ob)
								if err != nil {
									return err
								}
								if c {
									created++
								}
							}
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return created
			}
			const want = 6 * 5 * 2
			if got := sight(0); got != want {
				t.Fatalf("first sightings created %d edges, want %d", got, want)
			}
			if got := sight(1); got != 0 {
				t.Fatalf("second sightings created %d edges, want 0", got)
			}
			check := func(edges int) {
				t.Helper()
				s.mu.RLock()
				keyed := identities(s.v)
				held := s.v.identity.len()
				for id, e := range edgesByID(s.v) {
					if got := keyed[identityOf(e)]; got != id {
						t.Errorf("edge %s: its identity names %q", id, got)
					}
				}
				n := s.v.edges.len()
				s.mu.RUnlock()
				if n != edges || held != edges || len(keyed) != edges {
					t.Fatalf("%d edges, %d identity entries (%d distinct), want %d each", n, held, len(keyed), edges)
				}
				r, err := s.Check(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if p := problemList(r); p != "" {
					t.Fatalf("check:\n%s", p)
				}
			}
			check(want)
			if bits == 0 && len(s.v.identity.bySum) != 1 {
				t.Fatalf("%d entries by hash with every hash one, want 1", len(s.v.identity.bySum))
			}
			// Delete a third of the edges, then sight everything again:
			// exactly the deleted ones come back.
			deleted := 0
			if _, err := s.Update(context.Background(), func(b *Batch) error {
				i := 0
				for id := range edgesByID(s.v) {
					if i++; i%3 == 0 {
						if err := b.DeleteEdge(id); err != nil {
							return err
						}
						deleted++
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			check(want - deleted)
			if got := sight(2); got != deleted {
				t.Fatalf("sightings after deleting %d edges created %d", deleted, got)
			}
			check(want)
			// Merge one node into another: its edges move to the
			// survivor (each a new identity, or folded into the
			// survivor's edge of that identity).
			if _, err := s.MergeNodes(context.Background(), ids[0], ids[1], "test", "the same thing"); err != nil {
				t.Fatal(err)
			}
			s.mu.RLock()
			edges := s.v.edges.len()
			s.mu.RUnlock()
			check(edges)
		})
	}
}
