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
	// Saved documents that differ from the store at its generation
	// would be taken as they are by the next Open: a problem.
	rewriteSaved(t, dir, func(d *savedDocs) { d.texts[nodeKey("n-ghost")] = document{ns, "ghost"} })
	v, err = Verify(s, dir)
	if err != nil || len(v.Problems) != 2 || !strings.Contains(v.Problems[0], "bleve holds") || !strings.Contains(v.Problems[1], "ghost") {
		t.Fatalf("damaged index: %+v %v", v, err)
	}
	rewriteSaved(t, dir, func(d *savedDocs) { delete(d.texts, nodeKey("n-ghost")) })
	// The store moves on behind the closed index: the next Open
	// reconciles what differs, which the note counts.
	update(t, s, func(b *particle.Batch) error {
		_, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, "torque wrench")
		return err
	})
	v, err = Verify(s, dir)
	if err != nil || len(v.Problems) != 0 || !strings.Contains(v.Note, "reconciles the 1 documents") {
		t.Fatalf("index behind the store: %+v %v", v, err)
	}
}
