package keyword

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"

	"github.com/ctxgraph/ctxgraph/particle"
)

// The queries the tests below compare with a full build's answers.
var docsFileQueries = []string{"red block", "crimson cube", "SN-4471-XQ", "torque wrench", "wooden cylinder",
	"GR-0042", "HX-7781", "LOT-0007", "LOT-0003"}

// docsFiles lists the files of saved documents (and temporary ones) in
// the index dir.
func docsFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), docsFilePrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// internals opens the closed index in dir read-only and returns its
// internal values keyDocs and keyDocsFile, as persisted.
func internals(t *testing.T, dir string) (docs, stamp []byte) {
	t.Helper()
	bl, err := bleve.OpenUsing(dir, map[string]any{"read_only": true})
	if err != nil {
		t.Fatal(err)
	}
	defer bl.Close()
	if docs, err = bl.GetInternal(keyDocs); err != nil {
		t.Fatal(err)
	}
	if stamp, err = bl.GetInternal(keyDocsFile); err != nil {
		t.Fatal(err)
	}
	return docs, stamp
}

// stampedFile is the name of the documents file the closed index in
// dir names, checking that it holds only a stamp (no documents) and
// that the file is the only one of saved documents in dir.
func stampedFile(t *testing.T, dir string) string {
	t.Helper()
	docs, raw := internals(t, dir)
	if docs != nil {
		t.Errorf("bleve holds the documents as an internal value (%d bytes)", len(docs))
	}
	st, err := decodeStamp(raw)
	if err != nil {
		t.Fatalf("stamp %x: %v", raw, err)
	}
	if files := docsFiles(t, dir); !slices.Equal(files, []string{st.name()}) {
		t.Errorf("documents files %v, want only the stamped %s", files, st.name())
	}
	return st.name()
}

// waitPersisted waits until scorch has persisted its current root.
func waitPersisted(t *testing.T, ix *Index) {
	t.Helper()
	root, _ := scorchEpochs(t, ix)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, persisted := scorchEpochs(t, ix); persisted >= root {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("scorch did not persist epoch %d", root)
		}
	}
}

// manyFacts writes n facts, each a commit.
func manyFacts(t *testing.T, s *particle.Store, n int) {
	t.Helper()
	for i := range n {
		fact(t, s, ns, fmt.Sprintf("crate %d", i), "holds", fmt.Sprintf("part %d", i), fmt.Sprintf("LOT-%04d", i))
	}
}

// TestCloseSavesTheDocumentsInAFileOfTheirOwn: a clean close leaves in
// bleve's internal storage a stamp, not the documents, and the
// documents in the one file it names, beside bleve's own files (which
// bleve leaves alone); the next open takes them as they are.
func TestCloseSavesTheDocumentsInAFileOfTheirOwn(t *testing.T) {
	dir := t.TempDir()
	s := openGraph(t, dir)
	fixture(t, s)
	ix, _ := openLogged(t, s, dir)
	want := ix.Len()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	kdir := dir + "/keyword"
	file := stampedFile(t, kdir)
	_, raw := internals(t, kdir)
	if len(raw) != docsStampLen {
		t.Errorf("stamp of %d bytes", len(raw))
	}
	fi, err := os.Stat(filepath.Join(kdir, file))
	if err != nil || fi.Size() == 0 {
		t.Fatalf("documents file: %v %v", fi, err)
	}
	for _, name := range []string{"index_meta.json", "store"} {
		if _, err := os.Stat(filepath.Join(kdir, name)); err != nil {
			t.Errorf("bleve's %s: %v", name, err)
		}
	}

	ix, logs := openLogged(t, s, dir)
	if r := readyOf(t, logs); r.indexed != 0 || r.caughtUp || r.reconciled || r.crash || ix.Len() != want {
		t.Errorf("clean reopen: %+v, %d documents (want %d); logs:\n%s", r, ix.Len(), want, logs)
	}
	sameAnswers(t, ix, s, docsFileQueries)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed with nothing written: the same file, still the only one
	// (the read-only opens above left it too).
	if again := stampedFile(t, kdir); again != file {
		t.Errorf("after a close with nothing to save: %s, was %s", again, file)
	}
}

// TestPersistsDoNotRewriteTheDocuments: scorch writes every internal
// value of bleve into root.bolt at each snapshot it persists. After a
// clean reopen and batches that persist (ingest), and then a
// checkpoint, the internal values bleve holds, and those of every
// snapshot root.bolt keeps, are the stamp and the markers, a few bytes,
// never the documents (kilobytes here, 10.5 MB at 1M edges).
func TestPersistsDoNotRewriteTheDocuments(t *testing.T) {
	dir := t.TempDir()
	kdir := dir + "/keyword"
	s := openGraph(t, dir)
	fixture(t, s)
	manyFacts(t, s, 200)
	ix, _ := openLogged(t, s, dir)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	file := stampedFile(t, kdir)
	fi, err := os.Stat(filepath.Join(kdir, file))
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()

	ix, _ = openLogged(t, s, dir)
	// What scorch writes of internal values at each persist: the keys
	// this package sets (bleve adds its mapping, once at creation).
	internalBytes := func() (total int, docs []byte) {
		t.Helper()
		for _, k := range [][]byte{keyState, keyVersion, keyBoot, keyDocsFile, keyDocs} {
			v, err := ix.bl.GetInternal(k)
			if err != nil {
				t.Fatal(err)
			}
			total += len(v)
		}
		docs, err := ix.bl.GetInternal(keyDocs)
		if err != nil {
			t.Fatal(err)
		}
		return total, docs
	}
	check := func(when string) {
		t.Helper()
		total, docs := internalBytes()
		if docs != nil || total > 128 {
			t.Errorf("%s: bleve's internal values hold %d bytes (the documents: %d), the documents file %d",
				when, total, len(docs), size)
		}
	}
	check("clean reopen")
	for i := range 5 {
		fact(t, s, ns, fmt.Sprintf("probe %d", i), "serial_number", "bench", fmt.Sprintf("TMP-%04d", i))
		ix.sync()
		waitPersisted(t, ix)
		check(fmt.Sprintf("after batch %d persisted", i))
	}
	if cp := checkpoint(t, ix); !cp.Written || int64(cp.Bytes) <= size {
		t.Errorf("checkpoint %+v, want written with more than the %d bytes saved at the close", cp, size)
	}
	check("after a checkpoint")
	fact(t, s, ns, "gripper", "serial_number", "arm", "GR-0042")
	ix.sync()
	waitPersisted(t, ix)
	check("after a checkpoint and a batch")
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	// Every snapshot root.bolt keeps.
	points, err := scorch.RollbackPoints(filepath.Join(kdir, "store"))
	if err != nil || len(points) == 0 {
		t.Fatalf("root.bolt's snapshots: %d, %v", len(points), err)
	}
	for i, p := range points {
		if docs := p.GetInternal(keyDocs); docs != nil {
			t.Errorf("persisted snapshot %d holds the documents (%d bytes)", i, len(docs))
		}
		if st := p.GetInternal(keyDocsFile); len(st) != docsStampLen {
			t.Errorf("persisted snapshot %d: stamp %x", i, st)
		}
	}
	stampedFile(t, kdir)
}

// legacyIndex turns the closed index in dir into what an earlier
// version left: the documents as the internal value keyDocs, no stamp
// and no documents file.
func legacyIndex(t *testing.T, dir string) {
	t.Helper()
	bl, err := bleve.OpenUsing(dir, diskConfig)
	if err != nil {
		t.Fatal(err)
	}
	saved, file, err := readSaved(bl, dir)
	if err != nil {
		t.Fatal(err)
	}
	b := bl.NewBatch()
	b.SetInternal(keyDocs, encodeDocs(saved))
	b.DeleteInternal(keyDocsFile)
	persisted := make(chan error, 1)
	b.SetPersistedCallback(func(err error) { persisted <- err })
	if err := bl.Batch(b); err != nil {
		t.Fatal(err)
	}
	if err := <-persisted; err != nil {
		t.Fatal(err)
	}
	if err := bl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, file)); err != nil {
		t.Fatal(err)
	}
}

// TestALegacyIndexIsReadAndMigrated: an index whose documents are the
// internal value keyDocs (an earlier version's) opens clean and takes
// them as they are; the next save (a close after a write) moves them
// to a file and deletes keyDocs, with the same answers.
func TestALegacyIndexIsReadAndMigrated(t *testing.T) {
	dir := t.TempDir()
	kdir := dir + "/keyword"
	s := openGraph(t, dir)
	fixture(t, s)
	manyFacts(t, s, 10)
	ix, _ := openLogged(t, s, dir)
	want := ix.Len()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	legacyIndex(t, kdir)
	if docs, stamp := internals(t, kdir); docs == nil || stamp != nil || len(docsFiles(t, kdir)) != 0 {
		t.Fatalf("legacy index: documents %d bytes, stamp %x, files %v", len(docs), stamp, docsFiles(t, kdir))
	}
	v, err := Verify(s, kdir)
	if err != nil || len(v.Problems) != 0 || !strings.Contains(v.Note, "closed cleanly at the store's current generation") {
		t.Errorf("verify of the legacy index: %+v %v", v, err)
	}

	ix, logs := openLogged(t, s, dir)
	if r := readyOf(t, logs); r.indexed != 0 || r.caughtUp || r.reconciled || r.crash || ix.Len() != want {
		t.Errorf("reopen of the legacy index: %+v, %d documents (want %d); logs:\n%s", r, ix.Len(), want, logs)
	}
	sameAnswers(t, ix, s, docsFileQueries)
	fact(t, s, ns, "gripper", "serial_number", "arm", "GR-0042")
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	stampedFile(t, kdir) // keyDocs deleted, one file

	ix, logs = openLogged(t, s, dir)
	defer ix.Close()
	if r := readyOf(t, logs); r.indexed != 0 || r.caughtUp || r.reconciled || r.crash || ix.Len() <= want {
		t.Errorf("reopen after the migration: %+v, %d documents (%d before the write); logs:\n%s", r, ix.Len(), want, logs)
	}
	sameAnswers(t, ix, s, docsFileQueries)
}

// TestAMissingOrDamagedDocumentsFileRebuilds: the documents file of an
// index closed cleanly, or of one checkpointed by a run that died on
// this boot, removed, with a byte changed or cut short: the next open
// says why and rebuilds, with a full build's answers; a check
// (Verify) of the clean one reports it.
func TestAMissingOrDamagedDocumentsFileRebuilds(t *testing.T) {
	damages := map[string]func(path string) error{
		"missing": os.Remove,
		"byte changed": func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 0x20
			return os.WriteFile(path, b, 0o600)
		},
		"cut short": func(path string) error {
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, fi.Size()-3)
		},
	}
	for _, crashed := range []bool{false, true} {
		for name, damage := range damages {
			t.Run(fmt.Sprintf("%s/crashed=%v", name, crashed), func(t *testing.T) {
				dir := t.TempDir()
				kdir := dir + "/keyword"
				s := openGraph(t, dir)
				fixture(t, s)
				ix, _ := openLogged(t, s, dir)
				manyFacts(t, s, 10)
				if crashed {
					checkpoint(t, ix)
					fact(t, s, ns, "gripper", "serial_number", "arm", "GR-0042")
					crashIndex(t, ix)
				} else if err := ix.Close(); err != nil {
					t.Fatal(err)
				}
				_, raw := internals(t, kdir)
				st, err := decodeStamp(raw)
				if err != nil {
					t.Fatal(err)
				}
				if err := damage(filepath.Join(kdir, st.name())); err != nil {
					t.Fatal(err)
				}
				if !crashed {
					v, err := Verify(s, kdir)
					if err != nil || len(v.Problems) != 1 || !strings.Contains(v.Problems[0], st.name()) {
						t.Errorf("verify: %+v %v", v, err)
					}
				}
				// The store moves on while the index is down.
				fact(t, s, ns, "arm", "serial_number", "base", "HX-7781")

				ix, logs := openLogged(t, s, dir)
				defer ix.Close()
				want, _, err := documents(s)
				if err != nil {
					t.Fatal(err)
				}
				if r := readyOf(t, logs); !r.reconciled || r.indexed != len(want) ||
					!strings.Contains(logs.String(), "saved documents file is missing or damaged") ||
					!strings.Contains(logs.String(), st.name()) {
					t.Errorf("reopen: %+v, want a rebuild of the %d documents saying why; logs:\n%s", r, len(want), logs)
				}
				sameAnswers(t, ix, s, docsFileQueries)
				for q, n := range map[string]int{"HX-7781": 1, "LOT-0007": 1, "GR-0042": map[bool]int{false: 0, true: 1}[crashed]} {
					if hits := search(t, ix, ns, q); len(hits) != n {
						t.Errorf("%s: %v, want %d hits", q, hitIDs(hits), n)
					}
				}
				if err := ix.Close(); err != nil {
					t.Fatal(err)
				}
				stampedFile(t, kdir)
			})
		}
	}
}

// TestEachSaveLeavesOnlyItsDocumentsFile: checkpoints one after the
// other (the documents changed between them) each leave the one file
// their stamp names, the previous one removed once the new stamp is
// persisted; files a save that died left (its file written, its stamp
// never persisted; a temporary file half written) are removed by the
// next open or save, and do not stop the open from taking the saved
// documents.
func TestEachSaveLeavesOnlyItsDocumentsFile(t *testing.T) {
	dir := t.TempDir()
	kdir := dir + "/keyword"
	s := openGraph(t, dir)
	fixture(t, s)
	ix, _ := openLogged(t, s, dir)
	stamped := func() string {
		t.Helper()
		raw, err := ix.bl.GetInternal(keyDocsFile)
		if err != nil {
			t.Fatal(err)
		}
		st, err := decodeStamp(raw)
		if err != nil {
			t.Fatal(err)
		}
		return st.name()
	}
	var names []string
	for i := range 4 {
		fact(t, s, ns, fmt.Sprintf("probe %d", i), "serial_number", "bench", fmt.Sprintf("TMP-%04d", i))
		if i == 2 {
			// A save that died: its file written, its stamp never set.
			if _, err := writeDocsFile(kdir, []byte("a save that died")); err != nil {
				t.Fatal(err)
			}
		}
		checkpoint(t, ix)
		name := stamped()
		if files := docsFiles(t, kdir); !slices.Equal(files, []string{name}) {
			t.Errorf("after checkpoint %d: files %v, want only %s", i, files, name)
		}
		if slices.Contains(names, name) {
			t.Errorf("checkpoint %d: %s again, after %v", i, name, names)
		}
		names = append(names, name)
	}

	// A crash after a save wrote its file and before its stamp was
	// persisted, and one during the write of the temporary file.
	crashIndex(t, ix)
	died := docsStamp{sum: 0xdead_beef, size: 3}.name()
	for _, f := range []string{died, "documents-123456.tmp"} {
		if err := os.WriteFile(filepath.Join(kdir, f), []byte("abc"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ix, logs := openLogged(t, s, dir)
	if r := readyOf(t, logs); !r.caughtUp || !r.crash || r.indexed != 0 {
		t.Errorf("reopen after the crash: %+v, want caught up with nothing; logs:\n%s", r, logs)
	}
	if files := docsFiles(t, kdir); !slices.Equal(files, []string{names[len(names)-1]}) {
		t.Errorf("after the open: files %v, want only %s", files, names[len(names)-1])
	}
	sameAnswers(t, ix, s, []string{"TMP-0000", "TMP-0003", "SN-4471-XQ"})
	fact(t, s, ns, "gripper", "serial_number", "arm", "GR-0042")
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if last := stampedFile(t, kdir); slices.Contains(names, last) {
		t.Errorf("the close saved to %s, a checkpoint's file", last)
	}
}

// TestReadSavedRefusesABadStamp: a stamp of another version or length
// is saved documents missing, not a panic.
func TestReadSavedRefusesABadStamp(t *testing.T) {
	dir := t.TempDir()
	bl, err := bleve.NewUsing(dir, bleve.NewIndexMapping(), scorch.Name, scorch.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bl.Close()
	if _, _, err := readSaved(bl, dir); err == nil {
		t.Error("no saved documents: no error")
	}
	good := writeTestDocs(t, dir)
	for _, raw := range [][]byte{{}, {docsStampV1}, append([]byte{2}, good[1:]...), append(bytes.Clone(good), 0)} {
		if err := bl.SetInternal(keyDocsFile, raw); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readSaved(bl, dir); err == nil {
			t.Errorf("stamp %x: no error", raw)
		}
	}
	if err := bl.SetInternal(keyDocsFile, good); err != nil {
		t.Fatal(err)
	}
	if saved, _, err := readSaved(bl, dir); err != nil || len(saved.texts) != 1 {
		t.Errorf("good stamp: %+v %v", saved, err)
	}
}

// writeTestDocs writes a documents file of one document into dir and
// returns its stamp.
func writeTestDocs(t *testing.T, dir string) []byte {
	t.Helper()
	st, err := writeDocsFile(dir, encodeDocs(&savedDocs{texts: map[docKey]document{nodeKey("n-1"): {ns, "red block"}}}))
	if err != nil {
		t.Fatal(err)
	}
	return st.encode()
}
