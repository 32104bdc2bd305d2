package keyword

import (
	"fmt"
	"sync"
	"testing"
)

// Indexing runs on the index's worker, yet a reader sees every commit
// made before its call, also while writers keep committing and batches
// queue up.
func TestReadersSeeEveryCommitBeforeThem(t *testing.T) {
	s := openStore(t)
	ix, err := Open(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	const ns = "t/p"
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a second writer, to fill the queue meanwhile
		defer wg.Done()
		for i := range 3 * maxQueued {
			fact(t, s, ns, fmt.Sprintf("crate %d", i), "holds", fmt.Sprintf("part %d", i), fmt.Sprintf("LOT-%04d", i))
		}
	}()
	for i := range 40 {
		serial := fmt.Sprintf("SN-%04d-QQ", i)
		fact(t, s, ns, fmt.Sprintf("arm %d", i), "serial_number", fmt.Sprintf("base %d", i), serial)
		if hits := search(t, ix, ns, serial); len(hits) != 1 {
			t.Fatalf("commit %d: search for %s right after its commit found %v", i, serial, hitIDs(hits))
		}
	}
	wg.Wait()
	want, _, err := documents(s)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Len() != len(want) {
		t.Errorf("index holds %d documents, the store calls for %d", ix.Len(), len(want))
	}
	if hits := search(t, ix, ns, "LOT-0047"); len(hits) != 1 {
		t.Errorf("the other writer's last fact: %v", hitIDs(hits))
	}
}
