package keyword

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

func TestVerifyComparesTheIndexOnDiskWithTheStore(t *testing.T) {
	s := openStore(t)
	fixture(t, s)
	dir := filepath.Join(t.TempDir(), "keyword")

	v, err := Verify(s, dir)
	if err != nil || len(v.Problems) != 0 || v.Docs == 0 || !strings.Contains(v.Note, "in memory") {
		t.Fatalf("no index on disk: %+v %v", v, err)
	}
	ix, err := Open(s, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	v, err = Verify(s, dir)
	if err != nil || len(v.Problems) != 0 || !strings.Contains(v.Note, "closed cleanly") {
		t.Fatalf("clean index: %+v %v", v, err)
	}
	// The store moves on behind the closed index: a clean index that no
	// longer matches means it missed changes (the next Open reconciles
	// it, but check reports it).
	update(t, s, func(b *particle.Batch) error {
		_, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, "torque wrench")
		return err
	})
	v, err = Verify(s, dir)
	if err != nil || len(v.Problems) != 1 || !strings.Contains(v.Problems[0], "missing") {
		t.Fatalf("stale index: %+v %v", v, err)
	}
}
