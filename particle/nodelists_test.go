package particle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// appendRecentByCopy is appendRecent as it was, on a copy: the reference.
func appendRecentByCopy(ids []string, id string) []string {
	ids = slices.Clone(ids)
	if i := slices.Index(ids, id); i >= 0 {
		if i == len(ids)-1 {
			return ids
		}
		ids = slices.Delete(ids, i, i+1)
	}
	ids = append(ids, id)
	if len(ids) > MaxAttributeIDs {
		ids = slices.Delete(ids, 0, len(ids)-MaxAttributeIDs)
	}
	return ids
}

// TestAppendRecentNeverWritesItsInput gives appendRecent lists with room
// to spare, ids new and listed, below and at the bound: it answers what
// the reference does and leaves what it was given as it was.
func TestAppendRecentNeverWritesItsInput(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		n := r.IntN(MaxAttributeIDs + 3)
		ids := make([]string, n, n+r.IntN(4))
		for i := range ids {
			ids[i] = fmt.Sprintf("ep-%03d", i)
		}
		id := fmt.Sprintf("ep-%03d", r.IntN(n+5))
		was := slices.Clone(ids[:cap(ids)])
		got := appendRecent(ids, id)
		if want := appendRecentByCopy(ids, id); !slices.Equal(got, want) {
			t.Fatalf("appendRecent(%d ids, %s) = %v, want %v", n, id, got, want)
		}
		if !slices.Equal(ids[:n], was[:n]) {
			t.Fatalf("appendRecent(%d ids, %s) wrote the ids it was given", n, id)
		}
	}
}

// TestNodeListsHeldByAReaderNeverChange holds the view's lists of a node
// while batches touch it in new and old episodes, past the bound, one
// batch discarded, and give it aliases and a tag: the lists a reader holds
// stay as they were, and a node touched again in the same episode keeps
// its lists' arrays (no copy per touch).
func TestNodeListsHeldByAReaderNeverChange(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	ctx := context.Background()
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var id string
	touch := func(episode string, fail bool, more func(n *Node)) {
		t.Helper()
		_, err := s.Update(ctx, func(b *Batch) error {
			var n *Node
			if id == "" {
				n = &Node{ID: "node-red-block", Type: NodeEntity, Name: "red block"}
			} else {
				n = b.Node(id)
			}
			TouchNode(n, episode, "span-"+episode, 0.9, at)
			if more != nil {
				more(n)
			}
			if err := b.PutNode(n); err != nil {
				return err
			}
			id = n.ID
			if fail {
				return fmt.Errorf("discarded")
			}
			return nil
		})
		if (err != nil) != fail {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		touch(fmt.Sprintf("ep-%03d", i), false, nil)
	}
	type lists struct{ eps, spans, aliases, tags []string }
	held := func() lists {
		var l lists
		s.Read(func(r Reader) {
			n := r.Node(id)
			l = lists{n.Attributes.RLDSEpisodeIDs, n.Attributes.CMSSpanIDs, n.Aliases, n.Attributes.Tags}
		})
		return l
	}
	h := held()
	was := lists{slices.Clone(h.eps), slices.Clone(h.spans), slices.Clone(h.aliases), slices.Clone(h.tags)}

	touch("ep-039", false, nil) // the same episode again
	if again := held(); !sameList(again.eps, h.eps) || !sameList(again.spans, h.spans) {
		t.Error("a node touched again in the same episode had its lists copied")
	}
	touch("ep-new", true, nil)                                                               // discarded
	touch("ep-010", false, func(n *Node) { n.Aliases = append(n.Aliases, "crimson block") }) // moves to the end
	touch("ep-040", false, func(n *Node) { AddTag(n, "graspable") })
	for i := 41; i < 41+MaxAttributeIDs; i++ { // past the bound
		touch(fmt.Sprintf("ep-%03d", i), false, nil)
	}
	if !slices.Equal(h.eps, was.eps) || !slices.Equal(h.spans, was.spans) || !slices.Equal(h.aliases, was.aliases) || !slices.Equal(h.tags, was.tags) {
		t.Fatal("lists a reader held changed under it")
	}
	now := held()
	if len(now.eps) != MaxAttributeIDs || now.eps[len(now.eps)-1] != fmt.Sprintf("ep-%03d", 40+MaxAttributeIDs) {
		t.Fatalf("the node's episodes: %d, last %s", len(now.eps), now.eps[len(now.eps)-1])
	}
	if !slices.Equal(now.aliases, []string{"crimson block"}) || !slices.Contains(now.tags, "graspable") {
		t.Fatalf("aliases %q, tags %q", now.aliases, now.tags)
	}
}
