package particle

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

func TestBackupWhileWritingRestoresAConsistentStore(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	writeTestGraph(t, s)
	ctx := context.Background()

	// A writer adds pairs of nodes joined by an edge, one pair per
	// batch, while the backup runs: the restored store must hold each
	// pair whole or not at all.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := s.Update(ctx, func(b *Batch) error {
				a, _, err := b.Resolve(DefaultNamespace, NodeEntity, fmt.Sprintf("a%d", i))
				if err != nil {
					return err
				}
				c, _, err := b.Resolve(DefaultNamespace, NodeEntity, fmt.Sprintf("c%d", i))
				if err != nil {
					return err
				}
				_, _, err = b.Observe(Observation{Source: a.ID, Target: c.ID, Type: EdgeCausal})
				return err
			})
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var buf bytes.Buffer
	for buf.Len() == 0 || s.Counts().Nodes[NodeEntity] < 50 {
		buf.Reset()
		if _, err := s.Backup(&buf); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()

	dir := filepath.Join(t.TempDir(), "restored")
	if err := Restore(dir, bytes.NewReader(buf.Bytes()), nil); err != nil {
		t.Fatal(err)
	}
	r := openScratchStore(t, dir)
	rep, err := r.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("restored store has problems:\n%s", problemList(rep))
	}
	// Every edge came with both its nodes (the fixture has 3 edges).
	if got := r.Counts(); got.Nodes[NodeEntity] != 2+2*(sum(got.Edges)-3) {
		t.Errorf("restored %d entities and %d edges: a batch was split", got.Nodes[NodeEntity], sum(got.Edges))
	}
	if got, want := r.Counts().Steps, int64(2); got != want {
		t.Errorf("restored steps = %d, want %d", got, want)
	}
	// A restored store goes on leasing seqs above every restored one.
	var maxSeq uint64
	r.Read(func(rd Reader) {
		rd.Edges(func(e *Edge) bool { maxSeq = max(maxSeq, e.Seq); return true })
		rd.Nodes(func(n *Node) bool { maxSeq = max(maxSeq, n.Seq); return true })
	})
	_, err = r.Update(ctx, func(b *Batch) error {
		n, _, err := b.Resolve(DefaultNamespace, NodeEntity, "after restore")
		if err == nil && n.Seq <= maxSeq {
			err = fmt.Errorf("new seq %d not above restored %d", n.Seq, maxSeq)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRestoreRefusesAStore(t *testing.T) {
	dir := t.TempDir()
	s := openScratchStore(t, dir)
	writeTestGraph(t, s)
	var buf bytes.Buffer
	if _, err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	if err := Restore(dir, &buf, nil); err == nil {
		t.Fatal("restore over an existing store succeeded")
	}
}

func TestCollectGarbage(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	writeTestGraph(t, s)
	if _, err := s.CollectGarbage(0.5); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.CollectGarbage(0.5); err == nil {
		t.Error("gc on a closed store succeeded")
	}
}

func sum[K comparable](m map[K]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
