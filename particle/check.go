package particle

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// CheckReport is what [Store.Check] found: how many records of each kind
// it read and every inconsistency between them.
type CheckReport struct {
	Nodes    int64 `json:"nodes"`
	Edges    int64 `json:"edges"`
	Episodes int64 `json:"episodes"`
	Steps    int64 `json:"steps"`
	Spans    int64 `json:"spans"`
	Blobs    int64 `json:"blobs"`
	Sessions int64 `json:"sessions"`
	Aliases  int64 `json:"aliases"`
	// Identities and Adjacency count legacy entries (see prefix):
	// counted, not required.
	Identities int64 `json:"identities"`
	Adjacency  int64 `json:"adjacency"`
	Applied    int64 `json:"applied"`
	Records    int64 `json:"records"`
	// Vectors counts the embeddings stored apart from their records.
	Vectors int64 `json:"vectors"`
	// EdgeChunks counts the chunks of episodes' edge lists stored apart
	// from their records.
	EdgeChunks int64 `json:"edge_chunks"`
	// Problems lists the inconsistencies, at most MaxCheckProblems of
	// each kind; Suppressed counts the rest by kind.
	Problems   []Problem        `json:"problems"`
	Suppressed map[string]int64 `json:"suppressed,omitempty"`
}

// Problem is one inconsistency: its kind (a short stable name such as
// "edge-endpoint") and what exactly is wrong.
type Problem struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// MaxCheckProblems bounds the problems a report lists per kind.
const MaxCheckProblems = 20

// OK reports whether the check found nothing wrong.
func (r *CheckReport) OK() bool { return len(r.Problems) == 0 && len(r.Suppressed) == 0 }

// Add records a problem of kind; past MaxCheckProblems of a kind it is
// only counted.
func (r *CheckReport) Add(kind, format string, args ...any) {
	n := 0
	for _, p := range r.Problems {
		if p.Kind == kind {
			n++
		}
	}
	if n >= MaxCheckProblems {
		if r.Suppressed == nil {
			r.Suppressed = map[string]int64{}
		}
		r.Suppressed[kind]++
		return
	}
	r.Problems = append(r.Problems, Problem{Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// Check verifies the store's own consistency, reading Badger directly
// (not the view) in one read transaction:
//
//   - every value decodes, and its key matches its id and namespace;
//   - every edge's endpoints exist, and it has exactly its identity
//     entry and its out and in adjacency entries, each pointing back at it;
//   - every alias and identity entry points at a live record of the
//     right type; no two records share a compact seq;
//   - every embedding a record keeps apart is stored, with the length
//     the record gives it, and no stored one lacks its record;
//   - every episode's node exists; every step belongs to an episode and
//     lies inside its step count; every blob a step references exists;
//   - the recorded counts match what is stored;
//   - the memory-resident view (loaded at Open) matches Badger: the same
//     nodes, the same edges field by field, embeddings included, and the
//     same adjacency lists.
//
// Run it on a store no daemon is writing to: it holds the view's read
// lock from start to end, so writers wait for it.
func (s *Store) Check(ctx context.Context) (*CheckReport, error) {
	r := &CheckReport{}
	// The scan compares each edge with the view's as it reads it and
	// keeps only what the cross-checks need, not a second copy of the
	// graph (at 1M edges that copy, embeddings included, held 4 GB of
	// heap): the view must be whole, and unchanged until the end.
	s.IndexLoaded()
	s.WaitLinked()
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := newChecker(r, s.v)
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			k := item.KeyCopy(nil)
			if err := item.Value(func(v []byte) error { c.visit(k, v); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("particle: check: %w", err)
	}
	c.crossCheck()
	c.checkView()
	return r, nil
}

// checker holds what one pass over the keys collected; crossCheck then
// compares the tables with each other, and checkView what remains of
// the view.
type checker struct {
	r *CheckReport
	v *view // the view, read-locked for the whole check

	nodes    map[string]*Node       // id; without their embeddings
	edges    map[string]checkedEdge // id
	episodes map[string]*Episode    // ns \0 id
	// edgeChunks holds the chunk numbers of each episode's edge list
	// stored apart, by ns \0 id, in key order.
	edgeChunks map[string][]int
	seqs       map[uint64]seqOwner
	aliases    [][2]string // alias key, node id
	steps      [][3]string // ns, episode, index
	stepIdx    []int
	blobRefs   map[string]string // blob hex -> a step that references it
	blobs      map[string]bool
	spans      map[int]int64
	counts     *Counts
	// vectors holds, by vector key, the embeddings records keep apart
	// that the pass has not reached yet (the vector table comes after
	// the records); apart the seqs of the records whose it has.
	vectors map[string]vectorWant
	apart   seqBits
	// identityOf holds the edges whose identity entry in the view names
	// another edge: by id, the edge it names (checked once all are read).
	identityOf map[string]string

	// Scratch space for comparing records with the view's, reused.
	stored, held bytes.Buffer
	enc          [2]*json.Encoder
	key          []byte
	vec          []float32
}

func newChecker(r *CheckReport, v *view) *checker {
	c := &checker{r: r, v: v, nodes: map[string]*Node{}, edges: map[string]checkedEdge{}, episodes: map[string]*Episode{},
		edgeChunks: map[string][]int{}, seqs: map[uint64]seqOwner{}, blobs: map[string]bool{}, vectors: map[string]vectorWant{}, identityOf: map[string]string{}}
	c.enc = [2]*json.Encoder{json.NewEncoder(&c.stored), json.NewEncoder(&c.held)}
	return c
}

// checkedEdge is what the check keeps of an edge it read: what the
// cross-checks after the scan need. Its strings are the view's copy of
// the edge's where the view holds it, so that it keeps no decoded record
// alive.
type checkedEdge struct {
	namespace, source, target string
}

// seqOwner names the record holding a seq ("edge", its id).
type seqOwner struct{ kind, id string }

// vectorWant is an embedding a record keeps apart: its length, and
// whose it is. Where the view holds the same edge, held is the view's
// embedding of it, which the stored one must equal.
type vectorWant struct {
	n       int
	owner   seqOwner
	seq     uint64
	compare bool
	held    []float32
}

var blobRef = regexp.MustCompile(`blob:([0-9a-f]{64})`)

func (c *checker) visit(k, v []byte) {
	if len(k) == 0 {
		return
	}
	body := string(k[1:])
	r := c.r
	switch prefix(k[0]) {
	case prefixNode:
		r.Nodes++
		ns, id, _ := strings.Cut(body, "\x00")
		n, apart, err := decodeNodeApart(v, false)
		if err != nil {
			r.Add("decode", "node %s: %v", id, err)
			return
		}
		if n.ID != id || n.Namespace != ns {
			r.Add("key-mismatch", "node key %q/%q holds node %q/%q", ns, id, n.Namespace, n.ID)
		}
		if !n.Type.Valid() {
			r.Add("node-type", "node %s has unknown type %q", n.ID, n.Type)
		}
		n.Embedding = nil // not compared; the nodes are kept until the end
		c.nodes[n.ID] = n
		c.seq(n.Seq, seqOwner{"node", n.ID})
		if apart > 0 {
			c.vectors[string(vectorKey(k))] = vectorWant{n: apart, owner: seqOwner{"node", n.ID}, seq: n.Seq}
		}
	case prefixEdge:
		r.Edges++
		ns, id, _ := strings.Cut(body, "\x00")
		e, apart, err := decodeEdgeApart(v, false)
		if err != nil {
			r.Add("decode", "edge %s: %v", id, err)
			return
		}
		if e.ID != id || e.Namespace != ns {
			r.Add("key-mismatch", "edge key %q/%q holds edge %q/%q", ns, id, e.Namespace, e.ID)
		}
		if !e.Type.Valid() {
			r.Add("edge-type", "edge %s has unknown type %q", e.ID, e.Type)
		}
		c.edge(e, k, apart)
	case prefixAlias:
		r.Aliases++
		c.aliases = append(c.aliases, [2]string{body, string(v)})
	case prefixIdentity:
		r.Identities++
	case prefixEpisode:
		r.Episodes++
		ns, id, _ := strings.Cut(body, "\x00")
		e, err := decodeEpisode(v)
		if err != nil {
			r.Add("decode", "episode %s: %v", id, err)
			return
		}
		if e.ID != id || e.Namespace != ns {
			r.Add("key-mismatch", "episode key %q/%q holds episode %q/%q", ns, id, e.Namespace, e.ID)
		}
		c.episodes[ns+"\x00"+id] = e
		c.seq(e.Seq, seqOwner{"episode", ns + "/" + id})
	case prefixStep:
		r.Steps++
		idx, ok := stepIndexOf(k)
		parts := strings.Split(string(k[1:max(1, len(k)-5)]), "\x00")
		if !ok || len(parts) != 2 || k[len(k)-5] != 0 {
			r.Add("key-corrupt", "step key %x", k)
			return
		}
		c.steps = append(c.steps, [3]string{parts[0], parts[1], fmt.Sprint(idx)})
		c.stepIdx = append(c.stepIdx, idx)
		for _, m := range blobRef.FindAllSubmatch(v, -1) {
			if c.blobRefs == nil {
				c.blobRefs = map[string]string{}
			}
			c.blobRefs[string(m[1])] = fmt.Sprintf("%s/%s step %d", parts[0], parts[1], idx)
		}
	case prefixSpan:
		r.Spans++
		var sp struct {
			Level int `json:"level"`
		}
		if err := json.Unmarshal(v, &sp); err != nil {
			r.Add("decode", "span %q: %v", body, err)
			return
		}
		if c.spans == nil {
			c.spans = map[int]int64{}
		}
		c.spans[sp.Level]++
	case prefixSession:
		r.Sessions++
	case prefixBlob:
		r.Blobs++
		if sum, err := hex.DecodeString(body); err != nil || len(sum) != 32 {
			r.Add("key-corrupt", "blob key %q", body)
		}
		c.blobs[body] = true
	case prefixOut, prefixIn:
		r.Adjacency++
	case prefixApplied:
		r.Applied++
	case prefixRecord:
		r.Records++
	case prefixVector:
		r.Vectors++
		c.vector(k, v)
	case prefixEpisodeEdges:
		r.EdgeChunks++
		c.edgeChunk(k, v)
	case prefixMeta:
		if body == "counts" {
			var cn Counts
			if _, err := decodeValue(v, &cn); err != nil {
				r.Add("decode", "counts: %v", err)
				return
			}
			c.counts = &cn
		}
	default:
		r.Add("key-corrupt", "key with unknown table prefix %#x", k[0])
	}
}

// decodeNodeApart decodes a stored node without its embedding if that
// is stored apart: apart is then its length (newReader). inPlace is
// decodeNodeAt's.
func decodeNodeApart(b []byte, inPlace bool) (*Node, int, error) {
	if isBinary(b) {
		return decodeNodeV2(b, inPlace)
	}
	n, err := decodeNodeAt(b, nil, inPlace)
	return n, 0, err
}

// decodeEdgeApart is decodeNodeApart for an edge.
func decodeEdgeApart(b []byte, inPlace bool) (*Edge, int, error) {
	if isBinary(b) {
		return decodeEdgeV2(b, inPlace)
	}
	e, err := decodeEdgeAt(b, nil, inPlace)
	return e, 0, err
}

// edge compares an edge read from Badger (key k; apart, the length of
// its embedding if stored apart) with the view's copy of it, and keeps
// what the cross-checks need.
func (c *checker) edge(e *Edge, k []byte, apart int) {
	held := c.v.edges.get(c.v, e.ID)
	same := held != nil && c.sameEdge(e, held, apart > 0)
	switch {
	case held == nil:
		c.r.Add("view", "edge %s is in Badger, not in the view", e.ID)
	case !same:
		c.r.Add("view", "edge %s differs between the view and Badger", e.ID)
	}
	// What is kept points into the view's copy where the two are the
	// same, else into copies of the decoded record's strings.
	owner, kept := seqOwner{kind: "edge"}, checkedEdge{}
	if same {
		owner.id, kept = held.ID, checkedEdge{namespace: held.Namespace, source: held.Source, target: held.Target}
	} else {
		owner.id, kept = strings.Clone(e.ID), checkedEdge{namespace: strings.Clone(e.Namespace), source: strings.Clone(e.Source), target: strings.Clone(e.Target)}
	}
	// Its identity entry in the view: present, and naming it or an edge
	// Badger holds (which crossCheck sees once every edge is read).
	c.key = appendIdentityOf(c.key[:0], e)
	if named := c.v.identity.find(c.v, c.key); named == nil {
		c.r.Add("view-identity", "edge %s: the view has no identity entry for it", e.ID)
	} else if named.ID != e.ID {
		c.identityOf[owner.id] = named.ID
	}
	c.edges[owner.id] = kept
	c.seq(e.Seq, owner)
	if apart > 0 {
		w := vectorWant{n: apart, owner: owner, seq: e.Seq, compare: same}
		if same {
			w.held = held.Embedding
		}
		c.vectors[string(vectorKey(k))] = w
	}
}

// sameEdge reports whether the edge read from Badger equals the view's,
// field by field as JSON; their embeddings are compared here only when
// the record holds its own (apart: the stored one is compared when the
// scan reaches it).
func (c *checker) sameEdge(stored, held *Edge, apart bool) bool {
	if !apart && !slices.Equal(stored.Embedding, held.Embedding) {
		return false
	}
	s, h := *stored, *held
	s.Embedding, h.Embedding = nil, nil
	c.stored.Reset()
	c.held.Reset()
	if c.enc[0].Encode(&s) != nil || c.enc[1].Encode(&h) != nil {
		return false
	}
	return bytes.Equal(c.stored.Bytes(), c.held.Bytes())
}

// vector checks the embedding v stored apart under vector key k against
// the record that keeps it so and, for an edge the view holds, against
// the view's embedding of it.
func (c *checker) vector(k, v []byte) {
	w, ok := c.vectors[string(k)]
	if !ok {
		c.r.Add("vector-orphan", "an embedding is stored for %q, whose record is missing or holds its own", k[1:])
		return
	}
	delete(c.vectors, string(k))
	emb, err := appendVector(c.vec, v, w.n)
	if err != nil {
		c.r.Add("vector-length", "%q: %v", k[1:], err)
		return
	}
	c.vec = emb
	c.apart.set(w.seq, true)
	if w.compare && !slices.Equal(emb, w.held) {
		c.r.Add("view", "%s %s differs between the view and Badger: its embedding", w.owner.kind, w.owner.id)
	}
}

func (c *checker) seq(seq uint64, owner seqOwner) {
	if seq == 0 {
		c.r.Add("seq", "%s %s has no compact seq", owner.kind, owner.id)
		return
	}
	if other, ok := c.seqs[seq]; ok {
		c.r.Add("seq", "%s %s and %s %s share seq %d", other.kind, other.id, owner.kind, owner.id, seq)
		return
	}
	c.seqs[seq] = owner
}

func (c *checker) crossCheck() {
	r := c.r
	for k, w := range c.vectors {
		r.Add("vector-missing", "%s %q keeps its embedding of %d floats apart, and none is stored", w.owner.kind, k[1:], w.n)
	}
	for id, e := range c.edges {
		for _, end := range []struct{ role, id string }{{"source", e.source}, {"target", e.target}} {
			n, ok := c.nodes[end.id]
			switch {
			case !ok:
				r.Add("edge-endpoint", "edge %s: %s %s does not exist", id, end.role, end.id)
			case n.Namespace != e.namespace:
				r.Add("edge-endpoint", "edge %s in %s: %s %s is in %s", id, e.namespace, end.role, end.id, n.Namespace)
			}
		}
	}

	for _, kv := range c.aliases {
		ak, id := kv[0], kv[1]
		n := c.nodes[id]
		if n == nil {
			r.Add("alias", "alias %q names node %s, which does not exist", ak, id)
			continue
		}
		// A merged node's names point at the survivor, which may be of
		// another type; the namespace must match.
		if ns, _, _ := strings.Cut(ak, "\x00"); ns != n.Namespace {
			r.Add("alias", "alias %q names node %s of namespace %s", ak, id, n.Namespace)
		}
	}

	for k, ep := range c.episodes {
		if ep.NodeID != "" && c.nodes[ep.NodeID] == nil {
			r.Add("episode", "episode %s/%s: node %s does not exist", ep.Namespace, ep.ID, ep.NodeID)
		}
		got := c.edgeChunks[k]
		for i := range ep.sealed {
			if i >= len(got) || got[i] != i {
				r.Add("episode-edges", "episode %s/%s: edge chunk %d of %d is not stored", ep.Namespace, ep.ID, i, ep.sealed)
				break
			}
		}
		if len(got) > ep.sealed {
			r.Add("episode-edges", "episode %s/%s: %d edge chunks stored past its %d", ep.Namespace, ep.ID, len(got)-ep.sealed, ep.sealed)
		}
	}
	for k := range c.edgeChunks {
		if c.episodes[k] == nil {
			ns, id, _ := strings.Cut(k, "\x00")
			r.Add("episode-edges", "edge chunks stored for episode %s/%s, which does not exist", ns, id)
		}
	}
	for i, st := range c.steps {
		ep := c.episodes[st[0]+"\x00"+st[1]]
		switch {
		case ep == nil:
			r.Add("step", "step %s of %s/%s belongs to no episode", st[2], st[0], st[1])
		case c.stepIdx[i] >= ep.Steps:
			r.Add("step", "step %s of %s/%s is past the episode's %d steps", st[2], st[0], st[1], ep.Steps)
		}
	}
	refs := make([]string, 0, len(c.blobRefs))
	for h := range c.blobRefs {
		refs = append(refs, h)
	}
	slices.Sort(refs)
	for _, h := range refs {
		if !c.blobs[h] {
			r.Add("blob", "%s references blob %s, which does not exist", c.blobRefs[h], h)
		}
	}

	if c.counts == nil {
		if r.Steps+r.Spans+r.Blobs+r.Sessions > 0 {
			r.Add("counts", "no recorded counts, but %d steps, %d spans, %d blobs, %d sessions are stored", r.Steps, r.Spans, r.Blobs, r.Sessions)
		}
		return
	}
	for _, cmp := range []struct {
		what       string
		have, want int64
	}{
		{"steps", c.counts.Steps, r.Steps}, {"spans", c.counts.Spans, r.Spans},
		{"blobs", c.counts.Blobs, r.Blobs}, {"sessions", c.counts.Sessions, r.Sessions},
	} {
		if cmp.have != cmp.want {
			r.Add("counts", "recorded %s %d, stored %d", cmp.what, cmp.have, cmp.want)
		}
	}
	for lvl, n := range c.spans {
		if c.counts.SpansLevels[lvl] != n {
			r.Add("counts", "recorded spans at level %d: %d, stored %d", lvl, c.counts.SpansLevels[lvl], n)
		}
	}
	for lvl, n := range c.counts.SpansLevels {
		if n != 0 && c.spans[lvl] == 0 {
			r.Add("counts", "recorded spans at level %d: %d, stored 0", lvl, n)
		}
	}
}

// checkView compares the memory-resident view with what Badger holds,
// beyond the edges the scan compared one by one.
func (c *checker) checkView() {
	r, v := c.r, c.v
	if len(v.nodes) != len(c.nodes) {
		r.Add("view", "view holds %d nodes, Badger %d", len(v.nodes), len(c.nodes))
	}
	if v.edges.len() != len(c.edges) {
		r.Add("view", "view holds %d edges, Badger %d", v.edges.len(), len(c.edges))
	}
	if len(v.episodes) != len(c.episodes) {
		r.Add("view", "view holds %d episodes, Badger %d", len(v.episodes), len(c.episodes))
	}
	for id := range c.nodes {
		if v.nodes[id] == nil {
			r.Add("view", "node %s is in Badger, not in the view", id)
		}
	}
	// Adjacency and identity: the view's, against what Badger's edges
	// imply.
	want := func(end func(checkedEdge) string) map[string][]string {
		out := map[string][]string{}
		for id, e := range c.edges {
			out[end(e)] = append(out[end(e)], id)
		}
		return out
	}
	for _, side := range []struct {
		name string
		disk map[string][]string
		mem  map[string][]string
	}{
		{"out", want(func(e checkedEdge) string { return e.source }), v.adjacencyIDs(v.out)},
		{"in", want(func(e checkedEdge) string { return e.target }), v.adjacencyIDs(v.in)},
	} {
		for node, ids := range side.disk {
			got := slices.Clone(side.mem[node])
			slices.Sort(got)
			slices.Sort(ids)
			if !slices.Equal(got, ids) {
				r.Add("view-adjacency", "node %s: view %s-edges %v, Badger %v", node, side.name, got, ids)
			}
		}
		for node, ids := range side.mem {
			if len(ids) > 0 && len(side.disk[node]) == 0 {
				r.Add("view-adjacency", "node %s: view has %s-edges %v, Badger none", node, side.name, ids)
			}
		}
	}
	c.checkAdjacencyFacts(v)
	for id, named := range c.identityOf {
		if _, ok := c.edges[named]; !ok {
			r.Add("view-identity", "edge %s: its identity names edge %s, not in Badger", id, named)
		}
	}
	// Each identity entry names an edge Badger holds, whose identity it
	// is (the view's copy of the edge: the scan found it equal to
	// Badger's, or reported it).
	v.identity.each(v, func(e *Edge, id string, matches bool) {
		switch _, stored := c.edges[id]; {
		case e == nil && id == "":
			r.Add("view-identity", "an identity entry names a seq at which the view holds no edge")
		case e == nil:
			r.Add("view-identity", "an identity entry names edge %s, which the view does not hold", id)
		case !stored:
			r.Add("view-identity", "identity %q names edge %s, not in Badger", identityOf(e), id)
		case !matches:
			r.Add("view-identity", "an identity entry names edge %s, whose identity is another", id)
		}
	})
	c.checkSeqIndex(v)
	// The view's apart set says which embeddings a rewrite leaves as
	// stored: one too many would lose an embedding.
	for id, n := range v.nodes {
		if v.apart.has(n.Seq) && !c.apart.has(n.Seq) {
			r.Add("view-vector", "node %s: the view has its embedding stored apart, Badger does not", id)
		}
	}
	v.edges.each(v, func(id string, e *Edge) bool {
		if e == nil {
			return true // not at its seq: checkEdgeSeqs says so
		}
		if v.apart.has(e.Seq) && !c.apart.has(e.Seq) {
			r.Add("view-vector", "edge %s: the view has its embedding stored apart, Badger does not", id)
		}
		if _, stored := c.edges[id]; !stored {
			r.Add("view", "edge %s is in the view, not in Badger", id)
		}
		return true
	})
}

// checkAdjacencyFacts checks that every adjacency list is in seq order
// and that each entry holds its edge's facts as the view keeps them by
// seq (the expansion reads the entries' copies).
func (c *checker) checkAdjacencyFacts(v *view) {
	for _, side := range []struct {
		name string
		m    map[string][]adjEdge
	}{{"out", v.out}, {"in", v.in}} {
		for node, list := range side.m {
			for i, a := range list {
				if i > 0 && list[i-1].seq >= a.seq {
					c.r.Add("view-adjacency", "node %s: %s-edges out of seq order (%d after %d)", node, side.name, a.seq, list[i-1].seq)
				}
				if a.seq >= uint64(len(v.edgeFacts)) || v.edgeFacts[a.seq] != a.facts {
					c.r.Add("view-adjacency", "node %s: the %s-edge at seq %d holds facts other than the edge's", node, side.name, a.seq)
				}
			}
		}
	}
}

// adjacencyIDs is an adjacency map with edge ids in place of seqs (a
// seq the view does not resolve shows as "seq:N").
func (v *view) adjacencyIDs(m map[string][]adjEdge) map[string][]string {
	out := make(map[string][]string, len(m))
	for node, list := range m {
		ids := make([]string, 0, len(list))
		for _, a := range list {
			if e := atSeq(v.edgeSeq, a.seq); e != nil {
				ids = append(ids, e.ID)
			} else {
				ids = append(ids, fmt.Sprintf("seq:%d", a.seq))
			}
		}
		out[node] = ids
	}
	return out
}

// checkSeqIndex checks the view's seq-indexed slices against its maps:
// every item with a seq is found at it, and nothing else is.
func (c *checker) checkSeqIndex(v *view) {
	checkSeqs(c.r, "node", v.nodes, v.nodeSeq, func(n *Node) uint64 { return n.Seq })
	checkEdgeSeqs(c.r, v)
	checkSeqs(c.r, "episode", v.episodes, v.episodeSeq, func(e *Episode) uint64 { return e.Seq })
}

func checkSeqs[T any](r *CheckReport, what string, items map[string]*T, bySeq []*T, seqOf func(*T) uint64) {
	held := 0
	for k, x := range items {
		if s := seqOf(x); s != 0 {
			held++
			if atSeq(bySeq, s) != x {
				r.Add("view-seq", "%s %q is not at its seq %d", what, k, s)
			}
		}
	}
	checkIndexed(r, what, bySeq, held)
}

// checkIndexed reports a slice by seq that holds another number of what
// than the held ones with a seq.
func checkIndexed[T any](r *CheckReport, what string, bySeq []*T, held int) {
	indexed := 0
	for _, x := range bySeq {
		if x != nil {
			indexed++
		}
	}
	if indexed != held {
		r.Add("view-seq", "view indexes %d %ss by seq, holds %d with a seq", indexed, what, held)
	}
}

// checkEdgeSeqs is checkSeqs of the edges, held by id as seqs
// (edgeIDs): each names an edge of its id at its seq, none of those
// without one has one, and the slice by seq holds no other edge.
func checkEdgeSeqs(r *CheckReport, v *view) {
	for id, seq := range v.edges.bySeq {
		if e := atSeq(v.edgeSeq, seq); e == nil || e.ID != id || e.Seq != seq {
			r.Add("view-seq", "edge %q is not at its seq %d", id, seq)
		}
	}
	for id, e := range v.edges.unseq {
		if e.Seq != 0 {
			r.Add("view-seq", "edge %q has seq %d, but is held as one without", id, e.Seq)
		}
	}
	checkIndexed(r, "edge", v.edgeSeq, len(v.edges.bySeq))
}

// edgeChunk checks one stored chunk of an episode's edge list (key
// prefixEpisodeEdges ns \0 id \0 chunk) and notes its number.
func (c *checker) edgeChunk(k, v []byte) {
	body, n, ok := parseEpisodeEdgesKey(k)
	if !ok {
		c.r.Add("key-corrupt", "edge chunk key %x", k)
		return
	}
	ep := string(body)
	ids, err := appendEdgeChunk(nil, v, false)
	switch {
	case err != nil:
		c.r.Add("decode", "edge chunk %d of episode %q: %v", n, ep, err)
	case len(ids) != episodeEdgeChunk:
		c.r.Add("episode-edges", "edge chunk %d of episode %q holds %d ids, not %d", n, ep, len(ids), episodeEdgeChunk)
	}
	c.edgeChunks[ep] = append(c.edgeChunks[ep], n)
}
