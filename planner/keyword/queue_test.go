package keyword

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// Indexing runs on the index's worker, yet a reader sees every commit
// made before its call, also while writers keep committing and batches
// queue up.
func TestReadersSeeEveryCommitBeforeThem(t *testing.T) {
	s, ix := openIndexed(t)
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

// openIndexed opens a store and a keyword index following it, closed
// when the test ends.
func openIndexed(t *testing.T) (*particle.Store, *Index) {
	t.Helper()
	s := openStore(t)
	ix, err := Open(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return s, ix
}

// runs is how many bleve batches the worker has written.
func (ix *Index) runs() int {
	ix.q.mu.Lock()
	defer ix.q.mu.Unlock()
	return ix.q.runs
}

// A steady stream of small commits is indexed in few bleve batches: the
// worker lingers for more, yet a reader never waits for the linger.
func TestWorkerGathersCommitsAndReadersDoNotWait(t *testing.T) {
	was := linger
	linger = time.Hour // only a reader, the item count or a half-full queue ends a wait
	defer func() { linger = was }()
	s, ix := openIndexed(t)
	const ns = "t/p"
	start := ix.runs()
	for i := range 5 {
		fact(t, s, ns, fmt.Sprintf("arm %d", i), "serial_number", fmt.Sprintf("base %d", i), fmt.Sprintf("SN-%04d-QQ", i))
	}
	if n := ix.runs() - start; n != 0 {
		t.Fatalf("the worker indexed %d batches while it should linger", n)
	}
	// The reader's call ends the linger: every commit before it is found,
	// all five in one bleve batch.
	for i := range 5 {
		if hits := search(t, ix, ns, fmt.Sprintf("SN-%04d-QQ", i)); len(hits) != 1 {
			t.Fatalf("fact %d not found: %v", i, hitIDs(hits))
		}
	}
	if n := ix.runs() - start; n != 1 {
		t.Fatalf("five commits indexed in %d batches, want 1", n)
	}
	// Half a queue of commits ends the wait without a reader.
	for i := range maxQueued / 2 {
		fact(t, s, ns, fmt.Sprintf("crate %d", i), "holds", fmt.Sprintf("part %d", i), fmt.Sprintf("LOT-%04d", i))
	}
	deadline := time.Now().Add(time.Minute)
	for ix.runs()-start < 2 {
		if time.Now().After(deadline) {
			t.Fatal("a half-full queue was not indexed")
		}
		time.Sleep(time.Millisecond)
	}
	if n := ix.runs() - start; n != 2 {
		t.Fatalf("%d batches after a half-full queue, want 2", n)
	}
}
