package particle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// TestSnapshotIsConsistentWhileWritesGoOn opens a snapshot, commits more
// writes while it is open, and checks that the snapshot sees exactly
// what was there when it began, and the store afterwards sees it all.
func TestSnapshotIsConsistentWhileWritesGoOn(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ref string
	_, err := s.Update(ctx, func(b *particle.Batch) error {
		if err := b.PutEpisode(&particle.Episode{ID: "ep", Agent: "a", StartTime: t0}); err != nil {
			return err
		}
		for i := 0; i < 3; i++ {
			if err := b.PutStep(particle.DefaultNamespace, "ep", i, []byte{byte(i)}); err != nil {
				return err
			}
		}
		var err error
		ref, err = b.PutBlob([]byte("jpeg bytes"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	observe(t, s, particle.EdgeAssertion, "gripper", "holds", "red block", 0, t0)

	err = s.Snapshot(ctx, func(sn *particle.Snapshot) error {
		// Writes committed now are invisible to sn.
		observe(t, s, particle.EdgeAssertion, "gripper", "drops", "red block", 1, t0.Add(time.Second))
		if _, err := s.Update(ctx, func(b *particle.Batch) error {
			return b.PutStep(particle.DefaultNamespace, "ep", 3, []byte{3})
		}); err != nil {
			return err
		}
		var edges, nodes, steps int
		if err := sn.Edges("", func(e *particle.Edge) error {
			edges++
			if e.Assertion == nil || e.Assertion.Predicate != "holds" {
				return fmt.Errorf("snapshot sees edge %+v", e.Assertion)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := sn.Nodes(particle.DefaultNamespace, func(*particle.Node) error { nodes++; return nil }); err != nil {
			return err
		}
		if err := sn.Steps(particle.DefaultNamespace, "ep", func(idx int, raw []byte) error {
			if !bytes.Equal(raw, []byte{byte(idx)}) || idx != steps {
				return fmt.Errorf("step %d = %x", idx, raw)
			}
			steps++
			return nil
		}); err != nil {
			return err
		}
		if edges != 1 || nodes != 2 || steps != 3 {
			t.Errorf("snapshot sees %d edges, %d nodes, %d steps; want 1, 2, 3", edges, nodes, steps)
		}
		if n := 0; sn.Nodes("other/ns", func(*particle.Node) error { n++; return nil }) != nil || n != 0 {
			t.Errorf("another namespace shows %d nodes", n)
		}
		ep, err := sn.Episode(particle.DefaultNamespace, "ep")
		if err != nil || ep.Agent != "a" {
			t.Errorf("episode %+v, %v", ep, err)
		}
		if _, err := sn.Episode(particle.DefaultNamespace, "nope"); !errors.Is(err, particle.ErrNotFound) {
			t.Errorf("missing episode: %v, want ErrNotFound", err)
		}
		blob, err := sn.Blob(ref)
		if err != nil || string(blob) != "jpeg bytes" {
			t.Errorf("blob %q, %v", blob, err)
		}
		if _, err := sn.Blob("sha:nope"); !errors.Is(err, particle.ErrInvalid) {
			t.Errorf("bad blob ref: %v, want ErrInvalid", err)
		}
		dims, err := sn.EmbeddingDims(particle.KindEdge, "")
		if err != nil || dims[0] != 1 || len(dims) != 1 {
			t.Errorf("edge embedding dims %v, %v; want {0: 1}", dims, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Snapshot(ctx, func(sn *particle.Snapshot) error {
		edges, steps := 0, 0
		if err := sn.Edges("", func(*particle.Edge) error { edges++; return nil }); err != nil {
			return err
		}
		if err := sn.Steps(particle.DefaultNamespace, "ep", func(int, []byte) error { steps++; return nil }); err != nil {
			return err
		}
		if edges != 2 || steps != 4 {
			t.Errorf("a later snapshot sees %d edges and %d steps, want 2 and 4", edges, steps)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotStopsOnCancelAndAfterClose(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	_, err := s.Update(ctx, func(b *particle.Batch) error {
		for i := 0; i < 1000; i++ {
			if err := b.PutStep(particle.DefaultNamespace, "ep", i, []byte{1}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Snapshot(ctx, func(sn *particle.Snapshot) error {
		return sn.Steps(particle.DefaultNamespace, "ep", func(idx int, _ []byte) error {
			if idx == 10 {
				cancel()
			}
			return nil
		})
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled scan: %v, want context.Canceled", err)
	}
	s.Close()
	if err := s.Snapshot(context.Background(), func(*particle.Snapshot) error { return nil }); !errors.Is(err, particle.ErrClosed) {
		t.Errorf("snapshot after close: %v, want ErrClosed", err)
	}
}
