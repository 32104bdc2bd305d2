package keyword

import (
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
)

// TestOpenDiskThenAttach opens an index's files before the store exists
// (as the daemon does while the store loads), closes one that was never
// attached (a failed start) without hanging, and attaches another to a
// store: it then finds what the store holds.
func TestOpenDiskThenAttach(t *testing.T) {
	dir := t.TempDir()
	never, err := OpenDisk(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := never.Close(); err != nil {
		t.Fatalf("closing an index never attached: %v", err)
	}
	ix, err := OpenDisk(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := particle.Open(particle.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fixture(t, s)
	if err := ix.Attach(s); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.Len() == 0 {
		t.Fatal("attached index holds nothing of the store")
	}
}
