package particle_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

// TestGenerationChangesWithEveryCommitOnly: a new store is at the zero
// generation; every committed batch moves it, a batch that fails does
// not, and a Close and Open keep it.
func TestGenerationChangesWithEveryCommitOnly(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	gen := func() particle.Generation {
		t.Helper()
		g, err := s.Generation()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if g := gen(); g != (particle.Generation{}) {
		t.Fatalf("new store at %+v, want the zero generation", g)
	}
	seen := map[particle.Generation]bool{{}: true}
	for i, name := range []string{"red block", "red block", "blue block"} {
		if _, err := s.Update(context.Background(), func(b *particle.Batch) error {
			n, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, name)
			if err != nil {
				return err
			}
			return b.PutNode(n)
		}); err != nil {
			t.Fatal(err)
		}
		g := gen()
		if seen[g] {
			t.Fatalf("commit %d left the store at a generation it had before: %+v", i, g)
		}
		seen[g] = true
	}
	before := gen()
	failed := errors.New("refused")
	if _, err := s.Update(context.Background(), func(b *particle.Batch) error {
		if _, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, "green block"); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("failing batch: %v", err)
	}
	if g := gen(); g != before {
		t.Errorf("a failed batch moved the generation: %+v -> %+v", before, g)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Generation(); !errors.Is(err, particle.ErrClosed) {
		t.Errorf("generation of a closed store: %v, want ErrClosed", err)
	}
	s = openStore(t, dir)
	if g := gen(); g != before {
		t.Errorf("reopened at %+v, closed at %+v", g, before)
	}
}
