package particle

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestUpdateTimesByStage: each committed batch adds its stages' times;
// the caller's function is its apply stage, Badger's commit its commit
// stage; a batch that fails adds nothing.
func TestUpdateTimesByStage(t *testing.T) {
	s := openScratchStore(t, t.TempDir())
	before := s.UpdateTimes()
	const nap = 5 * time.Millisecond
	for range 2 {
		if _, err := s.Update(context.Background(), func(b *Batch) error {
			time.Sleep(nap)
			n, _, err := b.Resolve(DefaultNamespace, NodeEntity, "cup")
			if err != nil {
				return err
			}
			return b.PutNode(n)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Update(context.Background(), func(*Batch) error { return errors.New("refused") }); err == nil {
		t.Fatal("a failing batch committed")
	}
	d := s.UpdateTimes().Sub(before)
	if d.Batches != 2 {
		t.Errorf("%d batches counted, want 2", d.Batches)
	}
	if d.Apply < 2*nap {
		t.Errorf("apply %v, want at least the two functions' %v", d.Apply, 2*nap)
	}
	if d.Commit <= 0 || d.Encode <= 0 || d.Publish < 0 {
		t.Errorf("stages %+v: a commit and an encoding take time", d)
	}
	if d.Total() != d.Apply+d.Encode+d.Commit+d.Publish || len(d.ByStage()) != 4 {
		t.Errorf("total %v of %+v", d.Total(), d)
	}
}
