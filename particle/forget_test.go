package particle

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
)

func TestForgetRemovesTheEntityFromEveryTable(t *testing.T) {
	dir := t.TempDir()
	s := openScratchStore(t, dir)
	writeTestGraph(t, s)
	ctx := context.Background()
	red := EntityID(DefaultNamespace, NodeEntity, "red block")
	// A second name for it, merged in: the merge leaves a redirect and a
	// merge record naming both.
	var crimson string
	if _, err := s.Update(ctx, func(b *Batch) error {
		n, _, err := b.Resolve(DefaultNamespace, NodeEntity, "crimson block")
		crimson = n.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MergeNodes(ctx, red, crimson, "test", "same block"); err != nil {
		t.Fatal(err)
	}

	var scrubbed []string
	f, err := s.Forget(ctx, red, "alice", "customer asked", func(b *Batch, f *Forgotten) error {
		for _, ep := range f.EpisodeIDs {
			n, err := b.ScrubSteps(DefaultNamespace, ep, func(raw []byte) ([]byte, bool, error) {
				return bytes.ReplaceAll(raw, []byte("image"), []byte("scrubbed")), true, nil
			})
			if err != nil {
				return err
			}
			f.Steps += n
		}
		scrubbed = f.Names
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.Edges != 3 || f.Episodes != 1 || f.Steps != 2 || f.Records != 2 || f.Who != "alice" || f.Why != "customer asked" {
		t.Errorf("forgotten = %+v", f)
	}
	if !slices.Contains(scrubbed, "red block") || !slices.Contains(scrubbed, "crimson block") {
		t.Errorf("names handed to scrub = %v", scrubbed)
	}
	check := func(s *Store) {
		t.Helper()
		if _, err := s.Node(red); !errors.Is(err, ErrNotFound) {
			t.Errorf("node still there: %v", err)
		}
		var left []string
		s.Read(func(r Reader) {
			if n := r.Lookup(DefaultNamespace, NodeEntity, "crimson block"); n != nil {
				left = append(left, "alias "+n.ID)
			}
			r.Edges(func(e *Edge) bool {
				if e.Source == red || e.Target == red {
					left = append(left, "edge "+e.ID)
				}
				return true
			})
			if ep := r.Episode(DefaultNamespace, "ep-1"); slices.Contains(ep.Nodes, red) || len(ep.Edges) != 0 {
				left = append(left, "episode lists")
			}
		})
		if len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
		if ms, _ := s.Merges(); len(ms) != 0 {
			t.Errorf("merge records left: %+v", ms)
		}
		err := s.Steps(DefaultNamespace, "ep-1", func(_ int, raw []byte) error {
			if bytes.Contains(raw, []byte("image")) {
				t.Errorf("step not scrubbed: %s", raw)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		fs, err := s.Forgottens()
		if err != nil || len(fs) != 1 || fs[0].ID != red || fs[0].NameSHA256 != NameDigest("Red  Block") || fs[0].Who != "alice" {
			t.Errorf("forgotten records = %+v, %v", fs, err)
		}
		if r, err := s.Check(ctx); err != nil || !r.OK() {
			t.Errorf("store after forget: %v\n%s", err, problemList(r))
		}
	}
	check(s)
	s.Close()
	check(openScratchStore(t, dir))
}

func TestForgetRefusals(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	writeTestGraph(t, s)
	ctx := context.Background()
	if _, err := s.Forget(ctx, EpisodeNodeID(DefaultNamespace, "ep-1"), "a", "b", nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("forget an episode node: %v, want ErrInvalid", err)
	}
	if _, err := s.Forget(ctx, "no-such-node", "a", "b", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("forget a missing node: %v, want ErrNotFound", err)
	}
}
