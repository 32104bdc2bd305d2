package keyword

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"

	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/particle"
)

var (
	// ErrClosed is returned by Search after Close.
	ErrClosed = errors.New("keyword: closed")
)

// Options configures an Index.
type Options struct {
	// Dir is where the index lives on disk (for the daemon,
	// DATA/keyword). Empty keeps it in memory.
	Dir string
	// BatchSize is how many documents one bleve batch of a build holds.
	// Default 2000.
	BatchSize int
	// Logger receives structured logs. Nil discards them.
	Logger *slog.Logger
}

func (o *Options) ensureDefaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = 2000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Kind is what a hit is.
type Kind uint8

// Kinds of documents.
const (
	KindNode Kind = iota + 1
	KindEdge
	KindEpisode
	KindSpan
)

func (k Kind) String() string {
	switch k {
	case KindNode:
		return "node"
	case KindEdge:
		return "edge"
	case KindEpisode:
		return "episode"
	case KindSpan:
		return "span"
	}
	return "unknown"
}

// Hit is one search result.
type Hit struct {
	Kind Kind
	// ID is the node, edge, episode or span id.
	ID string
	// Namespace is the hit's tenant/project.
	Namespace string
	// Score is the BM25 score (higher is better).
	Score float64
	// Nodes are the ids of the nodes that list a span (spans only).
	Nodes []string
}

// Index is the keyword index over one store. It is safe for concurrent
// use.
type Index struct {
	store *particle.Store
	bl    bleve.Index
	m     *mapping.IndexMappingImpl // for analysing queries
	opts  Options
	log   *slog.Logger

	mu sync.RWMutex // guards the fields below
	// texts is every document's text: a committed batch's records are
	// compared with it (no hashing, no allocation), and only what
	// changed reaches bleve.
	texts map[docKey]document
	// saved is what the index on disk was closed with, or checkpointed
	// (until the build has used it); diskGen is the store generation the
	// documents saved on disk match (nil: none does), at a clean close or
	// a Checkpoint.
	saved     *savedDocs
	diskGen   *particle.Generation
	nss       map[string]bool     // namespaces with documents (never shrinks)
	spanNodes map[docKey][]string // span -> nodes listing it
	dirty     bool                // the on-disk clean marker has been cleared
	// crashed: the on-disk index was left by a run that died on this
	// boot, and build catches it up (openDisk).
	crashed bool
	closed  bool

	closeOnce sync.Once
	closeErr  error
	// checkpointMu is held by a Checkpoint, and by Close from its save
	// until bleve is closed: a checkpoint never writes to a closed
	// bleve, and Close waits for one in progress.
	checkpointMu sync.Mutex

	q *queue // committed changes waiting to be indexed (queue.go)
}

// Internal keys of the on-disk index.
var (
	keyState   = []byte("ctxgraph.state")
	keyVersion = []byte("ctxgraph.version")
	keyBoot    = []byte("ctxgraph.boot") // the boot the marker was cleared on
	// keyDocsFile is the stamp of the file the saved documents are in
	// (saved.go); keyDocs held the documents themselves, as indexes
	// saved by earlier versions still do.
	keyDocsFile = []byte("ctxgraph.documents.file")
	keyDocs     = []byte("ctxgraph.documents")
)

// Open builds (or, from Dir, reconciles) the index from store and keeps
// it current from then on. Call it before writers start, as the vector
// index is built: a batch committed between the build and the
// subscription would be missed until the next Open. Committed batches
// are indexed by a goroutine of the index (queue.go); Close ends it.
// It is OpenDisk then Attach.
func Open(store *particle.Store, o Options) (*Index, error) {
	ix, err := OpenDisk(o)
	if err != nil {
		return nil, err
	}
	if err := ix.Attach(store); err != nil {
		return nil, err
	}
	return ix, nil
}

// OpenDisk opens (or creates) the index in Dir (in memory without one)
// without a store, so that it can open while the store loads; Attach
// then reconciles it with the store. Until Attach the index must not be
// searched.
func OpenDisk(o Options) (*Index, error) {
	o.ensureDefaults()
	m, err := newMapping()
	if err != nil {
		return nil, fmt.Errorf("keyword: mapping: %w", err)
	}
	ix := &Index{m: m, opts: o, log: o.Logger, texts: map[docKey]document{},
		nss: map[string]bool{}, spanNodes: map[docKey][]string{}, q: newQueue()}
	if o.Dir == "" {
		ix.bl, err = bleve.NewUsing("", m, scorch.Name, scorch.Name, nil)
	} else {
		err = ix.openDisk(m)
	}
	if err != nil {
		return nil, fmt.Errorf("keyword: open index: %w", err)
	}
	return ix, nil
}

// Attach builds what the store holds into an index from OpenDisk
// (reconciling what a clean index on disk already holds) and keeps it
// current from then on (see Open). On error the index is closed.
func (ix *Index) Attach(store *particle.Store) error {
	ix.store = store
	if err := ix.build(); err != nil {
		ix.bl.Close()
		return fmt.Errorf("keyword: build: %w", err)
	}
	ix.startWorker()
	store.Subscribe(ix.enqueue)
	return nil
}

// diskConfig is the on-disk index's bleve configuration. Its batches
// are not synced: durability is the job of the clean marker and of
// checkpoints (Checkpoint), whose batches are waited for until persisted.
var diskConfig = map[string]any{"unsafe_batch": true}

// openDisk opens the index in Dir when it was closed cleanly with this
// mapping, loading its saved documents, or when a run that died on this
// boot left it (crashed: build catches it up); otherwise it starts a
// new one.
//
// A run that dies leaves the index without its clean marker. Its
// batches were not synced, but they are in the files the run wrote, and
// a process's death leaves those to the kernel, which writes them: on
// the same boot the index holds the documents saved at its last clean
// close or checkpoint and some of the batches after, each whole (scorch
// introduces a batch's segment at once). A new boot may have lost writes
// the run had not synced, in any order: such an index is rebuilt. The first batch
// after a start records the boot it ran on beside clearing the marker.
func (ix *Index) openDisk(m *mapping.IndexMappingImpl) error {
	if _, err := os.Stat(ix.opts.Dir); err == nil {
		bl, err := bleve.OpenUsing(ix.opts.Dir, diskConfig)
		if err == nil {
			state, _ := bl.GetInternal(keyState)
			version, _ := bl.GetInternal(keyVersion)
			boot, _ := bl.GetInternal(keyBoot)
			saved, file, derr := readSaved(bl, ix.opts.Dir)
			usable := string(version) == mappingVersion && derr == nil
			switch {
			case usable && string(state) == "clean":
				ix.bl, ix.saved = bl, saved
				ix.diskGen = saved.gen
				removeDocsFiles(ix.log, ix.opts.Dir, file) // left by a save that did not complete
				return nil
			case usable && string(state) == "dirty" && len(boot) > 0 && string(boot) == bootID():
				ix.log.Info("keyword index not closed cleanly, by a run that died on this boot; catching it up with the store", "dir", ix.opts.Dir)
				ix.bl, ix.saved, ix.crashed = bl, saved, true
				ix.dirty = true // and it stays so until a clean close
				removeDocsFiles(ix.log, ix.opts.Dir, file)
				return nil
			}
			if derr != nil && file != "" {
				ix.log.Warn("keyword index's saved documents file is missing or damaged", "dir", ix.opts.Dir, "file", file, "err", derr)
			}
			ix.log.Warn("keyword index not closed cleanly (on an earlier boot), from another version or without its saved documents; rebuilding",
				"dir", ix.opts.Dir, "state", string(state), "version", string(version), "saved_documents_err", derr)
			bl.Close()
		} else {
			ix.log.Warn("keyword index unreadable; rebuilding", "dir", ix.opts.Dir, "err", err)
		}
	}
	return ix.startOver(m)
}

// startOver replaces whatever is in Dir with a new, empty index.
func (ix *Index) startOver(m *mapping.IndexMappingImpl) error {
	if err := os.RemoveAll(ix.opts.Dir); err != nil {
		return err
	}
	bl, err := bleve.NewUsing(ix.opts.Dir, m, scorch.Name, scorch.Name, diskConfig)
	if err != nil {
		return err
	}
	ix.bl = bl
	ix.dirty = true // nothing persisted yet says clean
	return nil
}

// bootID names the machine's current boot ("" where unknown, which
// matches no boot recorded).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Document ids: a kind letter, then the record's key, parts separated
// by the unit separator.
const sep = "\x1f"

// docKey names a document without building its id string: the
// subscription looks documents up by key on every committed batch.
// Node and edge ids are unique across namespaces; episode and span ids
// are unique within one.
type docKey struct {
	kind   byte // n, e, p (episode), s (span)
	ns, id string
}

func nodeKey(id string) docKey          { return docKey{'n', "", id} }
func edgeKey(id string) docKey          { return docKey{'e', "", id} }
func episodeKey(ns, id string) docKey   { return docKey{'p', ns, id} }
func spanKey(ns, id string) docKey      { return docKey{'s', ns, id} }
func nodeDocID(id string) string        { return nodeKey(id).docID() }
func edgeDocID(id string) string        { return edgeKey(id).docID() }
func episodeDocID(ns, id string) string { return episodeKey(ns, id).docID() }
func spanDocID(ns, id string) string    { return spanKey(ns, id).docID() }

// docID is the bleve document id of k.
func (k docKey) docID() string {
	if k.kind == 'n' || k.kind == 'e' {
		return string(k.kind) + sep + k.id
	}
	return string(k.kind) + sep + k.ns + sep + k.id
}

// parseDocID inverts the doc id builders.
func parseDocID(id string) (Kind, string, string, bool) {
	k, rest, ok := strings.Cut(id, sep)
	if !ok {
		return 0, "", "", false
	}
	switch k {
	case "n":
		return KindNode, "", rest, true
	case "e":
		return KindEdge, "", rest, true
	case "p", "s":
		ns, rid, ok := strings.Cut(rest, sep)
		if !ok {
			return 0, "", "", false
		}
		if k == "p" {
			return KindEpisode, ns, rid, true
		}
		return KindSpan, ns, rid, true
	}
	return 0, "", "", false
}

// The text each record contributes.

func nodeText(n *particle.Node) string {
	if len(n.Aliases) == 0 {
		return n.Name
	}
	return n.Name + "\n" + strings.Join(n.Aliases, "\n")
}

func edgeText(e *particle.Edge) string {
	if e.Assertion == nil {
		return ""
	}
	return e.Assertion.Value
}

// pending is one document a build wants.
type pending struct {
	key docKey
	id  string
	document
}

func want(k docKey, ns, text string) pending { return pending{k, k.docID(), document{ns, text}} }

// documents computes every document the store's records call for, and
// which nodes list each span.
func documents(store *particle.Store) (docs []pending, spanNodes map[docKey][]string, err error) {
	spanNodes = map[docKey][]string{}
	namespaces := map[string]bool{}
	store.Read(func(r particle.Reader) {
		r.NodesBySeq(func(n *particle.Node) bool {
			docs = append(docs, want(nodeKey(n.ID), n.Namespace, nodeText(n)))
			namespaces[n.Namespace] = true
			for _, sid := range n.Attributes.CMSSpanIDs {
				k := spanKey(n.Namespace, sid)
				spanNodes[k] = append(spanNodes[k], n.ID)
			}
			return true
		})
		r.EdgesBySeq(func(e *particle.Edge, _ *particle.EdgeFacts) bool {
			if t := edgeText(e); t != "" {
				docs = append(docs, want(edgeKey(e.ID), e.Namespace, t))
			}
			return true
		})
		r.EpisodesBySeq(func(ep *particle.Episode) bool {
			namespaces[ep.Namespace] = true
			if ep.LanguageInstruction != "" {
				docs = append(docs, want(episodeKey(ep.Namespace, ep.ID), ep.Namespace, ep.LanguageInstruction))
			}
			return true
		})
	})
	for ns := range namespaces {
		err := store.Spans(ns, func(raw []byte) error {
			id, text, err := cms.DecodeStoredText(raw)
			if err != nil {
				return err
			}
			if text != "" {
				docs = append(docs, want(spanKey(ns, id), ns, text))
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("spans of %s: %w", ns, err)
		}
	}
	return docs, spanNodes, nil
}

// build fills the index with what the store holds. When the documents
// saved at the last clean close (or checkpoint) are those of the store's
// generation (nothing committed since), it takes them as they are: the
// index on disk holds exactly them. When they are of an earlier generation and
// the store knows what was written and deleted since (Store.ChangedSince),
// it catches up with that alone (catchUp), whether the index was closed
// cleanly or a run that died on this boot left it. Otherwise it computes
// every document from the store, indexes those whose text differs from
// the saved one and deletes the saved ones the store no longer calls
// for; after a crash it starts over instead.
func (ix *Index) build() error {
	t0 := time.Now()
	saved := ix.saved
	ix.saved = nil
	if saved == nil {
		saved = &savedDocs{} // a new index: bleve holds nothing
	}
	crashed := ix.crashed
	ix.crashed = false
	if gen, err := ix.store.Generation(); !crashed && err == nil && sameGeneration(saved.gen, &gen) {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		ix.texts, ix.spanNodes = saved.texts, saved.spanNodes
		for _, d := range ix.texts {
			ix.nss[d.NS] = true
		}
		ix.log.Info("keyword index ready", "docs", len(ix.texts), "indexed", 0, "reconciled", false, "took", time.Since(t0))
		return nil
	}
	noCatchUp := errors.New("the saved documents are of no store generation")
	if saved.gen != nil {
		d, err := ix.store.ChangedSince(saved.gen.Version)
		if err == nil {
			changedTook := time.Since(t0)
			changed, writeTook, err := ix.catchUp(saved, d)
			if err != nil {
				return err
			}
			ix.log.Info("keyword index ready", "docs", len(ix.texts), "indexed", changed, "caught_up", true,
				"after_a_crash", crashed, "took", time.Since(t0), "changed_since_took", changedTook, "write_took", writeTook)
			return nil
		}
		noCatchUp = err
	}
	if crashed {
		// bleve may hold documents a batch after the saved ones left,
		// which nothing here names: start over.
		ix.log.Warn("keyword index left by a crash cannot catch up with the store; rebuilding", "err", noCatchUp)
		ix.bl.Close()
		if err := ix.startOver(ix.m); err != nil {
			return err
		}
		saved = &savedDocs{}
	}
	t := time.Now()
	docs, spanNodes, err := documents(ix.store)
	if err != nil {
		return err
	}
	documentsTook := time.Since(t)
	for k, nodes := range spanNodes {
		ix.spanNodes[k] = append(ix.spanNodes[k], nodes...)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	w := ix.newBatchWriter()
	for _, p := range docs {
		ix.nss[p.NS] = true
		ix.texts[p.key] = p.document
		if old, ok := saved.texts[p.key]; ok && old == p.document {
			continue
		}
		if err := w.index(p.id, p.document); err != nil {
			return err
		}
	}
	for k := range saved.texts {
		if _, ok := ix.texts[k]; !ok {
			if err := w.delete(k.docID()); err != nil {
				return err
			}
		}
	}
	if err := w.flush(); err != nil {
		return err
	}
	ix.log.Info("keyword index ready", "docs", len(ix.texts), "indexed", w.changed, "reconciled", true,
		"took", time.Since(t0), "documents_took", documentsTook, "write_took", w.took)
	return nil
}

// batchWriter writes a build's documents to bleve in batches of
// Options.BatchSize. ix.mu is held.
type batchWriter struct {
	ix      *Index
	b       *bleve.Batch
	changed int           // documents indexed or deleted
	took    time.Duration // in bleve's Batch
}

func (ix *Index) newBatchWriter() *batchWriter { return &batchWriter{ix: ix, b: ix.bl.NewBatch()} }

func (w *batchWriter) index(id string, d document) error {
	if err := w.b.Index(id, d); err != nil {
		return err
	}
	return w.added()
}

func (w *batchWriter) delete(id string) error {
	w.b.Delete(id)
	return w.added()
}

func (w *batchWriter) added() error {
	w.changed++
	if w.b.Size() >= w.ix.opts.BatchSize {
		return w.flush()
	}
	return nil
}

func (w *batchWriter) flush() error {
	if w.b.Size() == 0 {
		return nil
	}
	t := time.Now()
	err := w.ix.writeLocked(w.b)
	w.took += time.Since(t)
	w.b = w.ix.bl.NewBatch()
	return err
}

// catchUp brings an index that holds the saved documents (and, left by
// a run that died on this boot, possibly some of the batches after
// them) to the store, given d, what the store holds written and deleted
// since the saved documents' generation: the documents of those records
// and spans are indexed again with their text now, or deleted, whatever
// bleve holds of them; every other document is the saved one. It reads
// the records by seq and id, not every record of the store. Like the
// indexing of a commit's changes, it adds the nodes written since to
// the lists of the spans they name and takes none away (a search drops
// a span's nodes that are gone).
func (ix *Index) catchUp(saved *savedDocs, d particle.Delta) (changed int, writeTook time.Duration, err error) {
	type text struct {
		ns, text string
	}
	now := map[docKey]text{}
	spanNodes := map[docKey][]string{}
	ix.store.Read(func(r particle.Reader) {
		for _, refs := range [][]particle.RecordRef{d.Records, d.Removed} {
			for _, ref := range refs {
				switch ref.Kind {
				case particle.KindNode:
					t := text{ns: ref.NS}
					if n := r.Node(ref.ID); n != nil {
						t = text{n.Namespace, nodeText(n)}
						for _, sid := range n.Attributes.CMSSpanIDs {
							k := spanKey(n.Namespace, sid)
							spanNodes[k] = append(spanNodes[k], n.ID)
						}
					}
					now[nodeKey(ref.ID)] = t
				case particle.KindEdge:
					t := text{ns: ref.NS}
					e := r.EdgeBySeq(ref.Seq)
					if ref.Seq == 0 {
						e = r.Edge(ref.ID) // a record from before seqs
					}
					if e != nil && e.ID == ref.ID {
						t = text{e.Namespace, edgeText(e)}
					}
					now[edgeKey(ref.ID)] = t
				case particle.KindEpisode:
					t := text{ns: ref.NS}
					if ep := r.Episode(ref.NS, ref.ID); ep != nil {
						t.text = ep.LanguageInstruction
					}
					now[episodeKey(ref.NS, ref.ID)] = t
				}
			}
		}
	})
	for _, sp := range d.Spans {
		now[spanKey(sp.NS, sp.ID)] = text{sp.NS, ix.spanText(sp.NS, sp.ID)}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.texts, ix.spanNodes = saved.texts, saved.spanNodes
	for k, nodes := range spanNodes {
		for _, id := range nodes {
			ix.listSpanNode(k, id)
		}
	}
	w := ix.newBatchWriter()
	for k, t := range now {
		if t.text == "" {
			delete(ix.texts, k)
			err = w.delete(k.docID())
		} else {
			ix.texts[k] = document{t.ns, t.text}
			err = w.index(k.docID(), document{t.ns, t.text})
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if err := w.flush(); err != nil {
		return 0, 0, err
	}
	for _, doc := range ix.texts {
		ix.nss[doc.NS] = true
	}
	return w.changed, w.took, nil
}

// writeLocked runs a batch, first clearing the on-disk clean marker
// (and recording the boot it runs on: openDisk). ix.mu is held.
func (ix *Index) writeLocked(b *bleve.Batch) error {
	if !ix.dirty && ix.opts.Dir != "" {
		markRunning(b)
	}
	ix.dirty = true
	return ix.bl.Batch(b)
}

// markRunning adds to b the on-disk state of an index that runs: the
// clean marker cleared, and the boot it runs on (openDisk).
func markRunning(b *bleve.Batch) {
	b.SetInternal(keyState, []byte("dirty"))
	b.SetInternal(keyBoot, []byte(bootID()))
}

// stage adds the document k to b if its text changed (an empty text
// removes it). ix.mu is held.
func (ix *Index) stage(b *bleve.Batch, k docKey, ns, text string) {
	old, had := ix.texts[k]
	if had == (text != "") && old.Text == text {
		return // unchanged, or absent and still empty
	}
	if text == "" {
		b.Delete(k.docID())
		delete(ix.texts, k)
		return
	}
	ix.nss[ns] = true
	if err := b.Index(k.docID(), document{ns, text}); err != nil {
		ix.log.Warn("keyword: stage document", "id", k.docID(), "err", err)
		return
	}
	ix.texts[k] = document{ns, text}
}

// apply indexes what one committed batch changed.
func (ix *Index) apply(ch particle.Changes) { ix.applyAll([]particle.Changes{ch}) }

// applyAll indexes what committed batches changed, in commit order, in
// one bleve batch.
func (ix *Index) applyAll(chs []particle.Changes) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return
	}
	b := ix.bl.NewBatch()
	for _, ch := range chs {
		ix.stageChanges(b, ch)
	}
	if b.Size() == 0 {
		return
	}
	if err := ix.writeLocked(b); err != nil {
		ix.log.Error("keyword: index batch", "err", err)
	}
}

// stageChanges adds one batch's changes to b. ix.mu is held.
func (ix *Index) stageChanges(b *bleve.Batch, ch particle.Changes) {
	for _, n := range ch.Nodes {
		ix.stage(b, nodeKey(n.ID), n.Namespace, nodeText(n))
		for _, sid := range n.Attributes.CMSSpanIDs {
			k := spanKey(n.Namespace, sid)
			if known := ix.listSpanNode(k, n.ID); !known {
				ix.stage(b, k, n.Namespace, ix.spanText(n.Namespace, sid))
			}
		}
	}
	for _, e := range ch.Edges {
		ix.stage(b, edgeKey(e.ID), e.Namespace, edgeText(e))
	}
	for _, ep := range ch.Episodes {
		ix.stage(b, episodeKey(ep.Namespace, ep.ID), ep.Namespace, ep.LanguageInstruction)
	}
	// Removed records (an entity merged into another) leave the index;
	// span hits naming a removed node are dropped by the reader.
	for _, n := range ch.RemovedNodes {
		ix.stage(b, nodeKey(n.ID), n.Namespace, "")
	}
	for _, e := range ch.RemovedEdges {
		ix.stage(b, edgeKey(e.ID), e.Namespace, "")
	}
}

// listSpanNode adds node id to the nodes listing span k, and reports
// whether the span was listed by any node before. ix.mu is held.
func (ix *Index) listSpanNode(k docKey, id string) (known bool) {
	nodes, known := ix.spanNodes[k]
	if !slices.Contains(nodes, id) {
		ix.spanNodes[k] = append(nodes, id)
	}
	return known
}

func (ix *Index) spanText(ns, id string) string {
	raw, err := ix.store.Span(ns, id)
	if err != nil {
		ix.log.Warn("keyword: read span", "span", id, "err", err)
		return ""
	}
	s, err := cms.DecodeStored(raw)
	if err != nil {
		ix.log.Warn("keyword: decode span", "span", id, "err", err)
		return ""
	}
	return s.Text
}

// Search returns the k best documents of namespace ns for query, by
// BM25. Quoted phrases must match as phrases; identifier-like tokens
// ("SN-4471-XQ") also match whole. An empty query has no hits.
func (ix *Index) Search(ns, query string, k int) ([]Hit, error) {
	ix.sync()
	ix.mu.RLock()
	closed, known, only := ix.closed, ix.nss[ns], len(ix.nss) == 1
	ix.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if k <= 0 || !known {
		return nil, nil
	}
	q, err := ix.compile(ns, query, !only)
	if err != nil || q == nil {
		return nil, err
	}
	req := bleve.NewSearchRequestOptions(q, k, 0, false)
	res, err := ix.bl.Search(req)
	if err != nil {
		return nil, fmt.Errorf("keyword: search: %w", err)
	}
	hits := make([]Hit, 0, len(res.Hits))
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for _, h := range res.Hits {
		kind, hns, id, ok := parseDocID(h.ID)
		if !ok {
			continue
		}
		if hns == "" {
			hns = ns
		}
		hit := Hit{Kind: kind, ID: id, Namespace: hns, Score: h.Score}
		if kind == KindSpan {
			hit.Nodes = slices.Clone(ix.spanNodes[spanKey(hns, id)])
		}
		hits = append(hits, hit)
	}
	return hits, nil
}

// SavedGeneration returns the store generation of the documents the
// index on disk was opened with, which Attach catches up from (ok false
// when there are none, or once Attach has used them).
func (ix *Index) SavedGeneration() (g particle.Generation, ok bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.saved == nil || ix.saved.gen == nil {
		return g, false
	}
	return *ix.saved.gen, true
}

// Len is the number of documents indexed.
func (ix *Index) Len() int {
	ix.sync()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.texts)
}

// Close stops following the store and closes the index. On disk it
// first saves every document's text with the store's generation, and the
// clean marker, so that the next Open reuses the index (and, if nothing
// was committed to the store meanwhile, the documents). It is safe to
// call twice.
func (ix *Index) Close() error {
	ix.closeOnce.Do(func() {
		// The generation first: every batch of it has been queued by
		// now, and stop indexes what is queued (the documents saved may
		// be newer than the generation, never older).
		var gen *particle.Generation // nil: not attached, or the store closed
		if ix.store != nil {
			if g, err := ix.store.Generation(); err == nil {
				gen = &g
			}
		}
		ix.stop()
		// A checkpoint in progress ends before bleve closes; one after
		// finds the index closed.
		ix.checkpointMu.Lock()
		defer ix.checkpointMu.Unlock()
		ix.mu.Lock()
		ix.closed = true
		// An index never attached holds none of the store's documents:
		// its saved ones stay as they are, unless bleve was written
		// (a new index, empty like its texts).
		save := ix.opts.Dir != "" && (ix.dirty || (ix.store != nil && !sameGeneration(ix.diskGen, gen)))
		var docs []byte
		if save {
			docs = encodeDocs(&savedDocs{gen: gen, texts: ix.texts, spanNodes: ix.spanNodes})
		}
		ix.mu.Unlock()
		var errs []error
		if save {
			errs = append(errs, ix.markClean(docs))
		}
		errs = append(errs, ix.bl.Close())
		ix.closeErr = errors.Join(errs...)
	})
	return ix.closeErr
}

// markClean saves the documents (their file, then their stamp and the
// clean marker in one batch) and waits until scorch has written it.
func (ix *Index) markClean(docs []byte) error {
	// Not marked clean (an error, a timeout): the next Open rebuilds or
	// catches up, which is safe.
	return ix.saveDocs(context.Background(), "mark clean", docs, func(b *bleve.Batch) {
		b.SetInternal(keyState, []byte("clean"))
	})
}

// saveDocs writes the saved documents docs (encodeDocs) to their file
// (saved.go), then their stamp and the mapping version in one batch,
// with what state adds to it (the on-disk state), and waits until
// scorch has persisted it, or ctx ends. Scorch persists its epochs in
// order, so every batch run before is on disk too. Then the stamp
// persisted names the new file, and the others are removed; a save that
// fails leaves them, for the next save, or open, to remove (the batch
// may yet persist). saveDocs does not run twice at once: checkpointMu
// is held.
func (ix *Index) saveDocs(ctx context.Context, what string, docs []byte, state func(*bleve.Batch)) error {
	st, err := writeDocsFile(ix.opts.Dir, docs)
	if err != nil {
		return fmt.Errorf("keyword: %s: writing the documents: %w", what, err)
	}
	b := ix.bl.NewBatch()
	b.SetInternal(keyDocsFile, st.encode())
	b.DeleteInternal(keyDocs) // saved by an earlier version: scorch would write it on every persist
	b.SetInternal(keyVersion, []byte(mappingVersion))
	state(b)
	done := make(chan error, 1)
	b.SetPersistedCallback(func(err error) { done <- err })
	if err := ix.bl.Batch(b); err != nil {
		return fmt.Errorf("keyword: %s: %w", what, err)
	}
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("keyword: %s: persist: %w", what, err)
		}
		removeDocsFiles(ix.log, ix.opts.Dir, st.name())
		return nil
	case <-ctx.Done():
		return fmt.Errorf("keyword: %s: waiting for the batch to persist: %w", what, ctx.Err())
	case <-timeout.C:
		return fmt.Errorf("keyword: %s: persisting timed out", what)
	}
}

// CheckpointInfo is what a Checkpoint saved.
type CheckpointInfo struct {
	// Generation is the store generation the saved documents are
	// current at (they may hold commits after it, never fewer).
	Generation particle.Generation
	// Docs is how many documents were saved, Bytes the size of their
	// encoding.
	Docs, Bytes int
	// Written is false when the documents on disk were already those
	// of Generation (nothing was committed since the last checkpoint
	// or clean open): nothing was written.
	Written bool
}

// Checkpoint bounds what a start after a crash must catch up with. A
// crash start on the same boot catches the index up from the saved
// documents' generation (build, catchUp): without checkpoints those are
// the last clean close's, so a daemon that ran for days before dying
// re-indexes days of writes. Checkpoint saves every document's text
// with the store's generation now, as Close does, but not the clean
// marker: the index stays as a running one (a crash start still
// catches it up, from this generation on). A running daemon calls it
// from time to time.
//
// It takes the store's generation, waits until every batch of it is
// indexed, and writes the documents (to their file, and its stamp in
// one bleve batch: saveDocs), waiting until the batch is persisted and
// with it every batch indexed before (a crash loses batches not yet
// persisted, which a catch-up from the generation would not index
// again). When nothing was committed since the documents on
// disk were saved it writes nothing. It fails on an index in memory,
// one not attached, or one closed (ErrClosed); ctx ends its waits (the
// checkpoint then may or may not take effect, either being safe).
func (ix *Index) Checkpoint(ctx context.Context) (CheckpointInfo, error) {
	ix.checkpointMu.Lock()
	defer ix.checkpointMu.Unlock()
	if err := ix.checkpointable(); err != nil {
		return CheckpointInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return CheckpointInfo{}, fmt.Errorf("keyword: checkpoint: %w", err)
	}
	// The generation first: every batch of it has been queued by now
	// (Close does the same), unless the index stopped following the
	// store meanwhile (Close began), which checkpointable tells.
	gen, err := ix.store.Generation()
	if err != nil {
		return CheckpointInfo{}, fmt.Errorf("keyword: checkpoint: %w", err)
	}
	if err := ix.checkpointable(); err != nil {
		return CheckpointInfo{}, err
	}
	if err := ix.syncContext(ctx); err != nil {
		return CheckpointInfo{}, fmt.Errorf("keyword: checkpoint: waiting for the index: %w", err)
	}
	info := CheckpointInfo{Generation: gen}
	ix.mu.Lock()
	info.Docs = len(ix.texts)
	if sameGeneration(ix.diskGen, &gen) {
		ix.mu.Unlock()
		return info, nil
	}
	docs := encodeDocs(&savedDocs{gen: &gen, texts: ix.texts, spanNodes: ix.spanNodes})
	// An index bleve was not written to since its clean open keeps its
	// clean marker: it holds exactly the documents saved. One written to
	// is marked running again, which a new index (startOver) was not.
	running := ix.dirty
	ix.mu.Unlock()
	info.Bytes = len(docs)
	err = ix.saveDocs(ctx, "checkpoint", docs, func(b *bleve.Batch) {
		if running {
			markRunning(b)
		}
	})
	if err != nil {
		return CheckpointInfo{}, err
	}
	info.Written = true
	ix.mu.Lock()
	ix.diskGen = &gen
	ix.mu.Unlock()
	ix.log.Debug("keyword index checkpoint", "docs", info.Docs, "bytes", info.Bytes, "generation", gen.Version)
	return info, nil
}

// checkpointable reports why Checkpoint cannot run, if it cannot: the
// index is closed or closing (its worker stopped, commits are no longer
// indexed), in memory, or not attached. checkpointMu is held, so Close
// cannot close bleve meanwhile.
func (ix *Index) checkpointable() error {
	ix.mu.RLock()
	closed := ix.closed
	ix.mu.RUnlock()
	ix.q.mu.Lock()
	attached, stopped := ix.q.started, ix.q.stopped
	ix.q.mu.Unlock()
	switch {
	case closed || stopped:
		return fmt.Errorf("keyword: checkpoint: %w", ErrClosed)
	case ix.opts.Dir == "":
		return errors.New("keyword: checkpoint: the index is in memory")
	case !attached:
		return errors.New("keyword: checkpoint: the index is not attached to a store")
	}
	return nil
}
