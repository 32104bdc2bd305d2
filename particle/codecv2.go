package particle

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Format 2 stores a node, edge or episode in binary:
//
//	format u8 (=2) | kind u8 | embedding: count+1 uvarint (0 = nil), count × float32 LE | fields
//
// The fields follow in the order of the struct in types.go, each as
// codecbin.go writes its type: strings length-prefixed, integers as
// varints, floats as 8 bytes little-endian, times tagged, slices, maps and
// pointers with a presence or count+1 prefix (nil stays nil), map keys
// sorted. An episode's free-form Metadata travels as JSON. The embedding
// comes first so that embeddingLen reads its size without decoding.
const formatV2 byte = 2

// Format 3 is format 2 with the embedding stored apart, under its own key
// (vectorKey): the value holds the embedding's count+1 (0 = nil) where
// format 2 has the count and the floats. Nodes and edges are written so.
// A batch rewrites every node and edge it touches, and an ingest batch
// touches the same robots, tools and goals and re-observes the same
// edges batch after batch, but it rarely changes their embeddings: a
// 384-d embedding is 1.5 KB of a 1.7 KB node. Stored apart, it is
// written when it changes (Batch.flush) instead of with every rewrite.
const formatV3 byte = 3

// maxVectorLen bounds the count a format-3 value gives its embedding.
const maxVectorLen = 1 << 20

// kinds of format-2 values.
const (
	kindNode    byte = 1
	kindEdge    byte = 2
	kindEpisode byte = 3
)

// newWriter starts a value of kind with room for size bytes after the
// embedding, taken from slab (nil: the heap): in format 3 with apart (the
// embedding's floats left to the caller to store), else in format 2. It
// returns the writer by value: keep it in a local.
func newWriter(kind byte, emb []float32, size int, slab *valueSlab, apart bool) wr {
	if apart {
		w := wr{b: slab.alloc(2 + binaryLenMax + size)}
		w.u8(formatV3)
		w.u8(kind)
		w.count(emb == nil, len(emb))
		return w
	}
	w := wr{b: slab.alloc(2 + binaryLenMax + 4*len(emb) + size)}
	w.u8(formatV2)
	w.u8(kind)
	w.floats(emb)
	return w
}

// strsSize bounds the encoded size of ss.
func strsSize(ss []string) int {
	n := binaryLenMax
	for _, s := range ss {
		n += binaryLenMax + len(s)
	}
	return n
}

// binaryLenMax is the most bytes a uvarint takes.
const binaryLenMax = 10

// newReader sets r to read b, checks the header of a format-2 or
// format-3 value of kind and reads its embedding: in format 3, apart is
// the count of the floats stored apart (0 when there are none: emb is
// then nil or empty as the value says), which the caller attaches
// (vectorOf, mappedVector). inPlace: the value's strings alias b
// (rd.strings).
// Callers keep r on the stack: a reopen decodes a million values, and a
// reader on the heap each was 80 MB of garbage.
func newReader(r *rd, b []byte, kind byte, inPlace bool) (emb []float32, apart int) {
	*r = rd{b: b}
	f := r.u8()
	if f != formatV2 && f != formatV3 || r.u8() != kind {
		r.fail(fmt.Sprintf("not a format-2 or format-3 value of kind %d", kind))
		return nil, 0
	}
	if f == formatV2 {
		emb = r.floats()
	} else {
		switch n := r.uvar(); {
		case n == 1:
			emb = []float32{}
		case n > maxVectorLen+1:
			r.fail("embedding count")
		case n > 1:
			apart = int(n - 1)
		}
	}
	r.strings(inPlace)
	return emb, apart
}

// vectorValue is the value that stores emb apart: its floats,
// little-endian, and nothing else.
func vectorValue(emb []float32, slab *valueSlab) []byte {
	return appendFloats(slab.alloc(4*len(emb)), emb)
}

// vectorOf decodes the n floats that vectorValue stored in b (nil: the
// vector key was not found).
func vectorOf(b []byte, n int) ([]float32, error) { return appendVector(nil, b, n) }

// appendVector is vectorOf decoding into dst's array when it is large
// enough (a reader that compares vectors one at a time reuses one).
func appendVector(dst []float32, b []byte, n int) ([]float32, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: its embedding of %d floats, stored apart, is missing", ErrCorrupt, n)
	}
	if len(b) != 4*n {
		return nil, fmt.Errorf("%w: embedding of %d floats stored in %d bytes", ErrCorrupt, n, len(b))
	}
	out := slices.Grow(dst[:0], n)[:n]
	readFloats(out, b)
	return out, nil
}

func (w *wr) belief(b Belief) {
	w.f64(b.Score)
	w.f64(b.Alpha)
	w.f64(b.Beta)
	w.f64(b.Evidence)
	w.time(b.UpdatedAt)
}

func (r *rd) belief() Belief {
	return Belief{Score: r.f64(), Alpha: r.f64(), Beta: r.f64(), Evidence: r.f64(), UpdatedAt: r.time()}
}

// encodeNodeV2 encodes n in format 2, or with apart in format 3 (its
// embedding for the caller to store with vectorValue).
func encodeNodeV2(n *Node, slab *valueSlab, apart bool) ([]byte, error) {
	size := 96 + len(n.ID) + len(n.Name) + len(n.Namespace) + len(n.Type) +
		strsSize(n.Aliases) + strsSize(n.Attributes.Tags) + strsSize(n.Attributes.CMSSpanIDs) + strsSize(n.Attributes.RLDSEpisodeIDs)
	for k, v := range n.Attributes.Props {
		size += 2*binaryLenMax + len(k) + len(v)
	}
	w := newWriter(kindNode, n.Embedding, size, slab, apart)
	w.str(n.ID)
	w.str(n.Namespace)
	w.str(string(n.Type))
	w.str(n.Name)
	w.strs(n.Aliases)
	w.strs(n.Attributes.Tags)
	w.strs(n.Attributes.CMSSpanIDs)
	w.strs(n.Attributes.RLDSEpisodeIDs)
	w.strMap(n.Attributes.Props)
	w.belief(n.Belief)
	w.time(n.CreatedAt)
	w.time(n.UpdatedAt)
	w.uvar(n.Seq)
	if w.err != nil {
		return nil, fmt.Errorf("encode node %s: %w", n.ID, w.err)
	}
	return w.b, nil
}

// decodeNodeV2 decodes a format-2 or format-3 node; apart is the count of
// the embedding's floats stored apart (newReader).
func decodeNodeV2(b []byte, inPlace bool) (n *Node, apart int, err error) {
	r := &rd{}
	emb, apart := newReader(r, b, kindNode, inPlace)
	n = &Node{Embedding: emb}
	n.ID = r.str()
	n.Namespace = r.str()
	n.Type = NodeType(r.str())
	n.Name = r.str()
	n.Aliases = r.strs()
	n.Attributes.Tags = r.strs()
	n.Attributes.CMSSpanIDs = r.strs()
	n.Attributes.RLDSEpisodeIDs = r.strs()
	n.Attributes.Props = r.strMap()
	n.Belief = r.belief()
	n.CreatedAt = r.time()
	n.UpdatedAt = r.time()
	n.Seq = r.uvar()
	if err := r.done(); err != nil {
		return nil, 0, fmt.Errorf("decode node: %w", err)
	}
	return n, apart, nil
}

// encodeEdgeV2 encodes e in format 2, or with apart in format 3.
func encodeEdgeV2(e *Edge, slab *valueSlab, apart bool) ([]byte, error) {
	// At most 16 bytes a time, 8 a float, 10 a varint or string length.
	size := 320 + len(e.ID) + len(e.Namespace) + len(e.Source) + len(e.Target) + len(e.Type) +
		len(e.Scope.Location) + len(e.Salience.DecayFn) + len(e.Policy.Sensitivity) + len(e.Policy.Subject) +
		len(e.Policy.Origin) + len(e.Status) + len(e.SupersededBy) + strsSize(e.Scope.Audience) +
		strsSize(e.Policy.AllowRoles) + strsSize(e.Policy.DenyRoles) + strsSize(e.Contradicts)
	if a := e.Assertion; a != nil {
		size += 2*binaryLenMax + len(a.Predicate) + len(a.Value)
	}
	for i := range e.Provenance {
		p := &e.Provenance[i]
		size += 48 + len(p.EpisodeID) + len(p.CMSSpanID) + len(p.Agent)
	}
	w := newWriter(kindEdge, e.Embedding, size, slab, apart)
	w.str(e.ID)
	w.str(e.Namespace)
	w.str(e.Source)
	w.str(e.Target)
	w.str(string(e.Type))
	w.time(e.Scope.TimeRange.From)
	w.time(e.Scope.TimeRange.To)
	w.str(e.Scope.Location)
	w.strs(e.Scope.Audience)
	w.count(e.Provenance == nil, len(e.Provenance))
	for i := range e.Provenance {
		p := &e.Provenance[i]
		w.str(p.EpisodeID)
		w.present(p.StepIndex != nil)
		if p.StepIndex != nil {
			w.ivar(int64(*p.StepIndex))
		}
		w.str(p.CMSSpanID)
		w.str(p.Agent)
		w.time(p.ObservedAt)
	}
	w.ivar(int64(e.Evidence))
	w.present(e.Assertion != nil)
	if e.Assertion != nil {
		w.str(e.Assertion.Predicate)
		w.str(e.Assertion.Value)
	}
	w.f64(e.Confidence)
	w.belief(e.Belief)
	w.f64(e.Salience.Score)
	w.str(e.Salience.DecayFn)
	w.f64(e.Salience.HalfLifeS)
	w.time(e.Salience.LastUpdated)
	w.strs(e.Policy.AllowRoles)
	w.strs(e.Policy.DenyRoles)
	w.str(string(e.Policy.Sensitivity))
	w.str(e.Policy.Subject)
	w.present(e.Policy.Portable != nil)
	if e.Policy.Portable != nil {
		w.boolean(*e.Policy.Portable)
	}
	w.str(e.Policy.Origin)
	w.time(e.ValidFrom)
	w.time(e.ValidTo)
	w.str(string(e.Status))
	w.str(e.SupersededBy)
	w.time(e.EndedAt)
	w.strs(e.Contradicts)
	w.time(e.CreatedAt)
	w.time(e.UpdatedAt)
	w.uvar(e.Seq)
	if w.err != nil {
		return nil, fmt.Errorf("encode edge %s: %w", e.ID, w.err)
	}
	return w.b, nil
}

// decodeEdgeV2 decodes a format-2 or format-3 edge; apart is the count of
// the embedding's floats stored apart (newReader).
func decodeEdgeV2(b []byte, inPlace bool) (_ *Edge, apart int, _ error) {
	return decodeEdgeAs(b, inPlace, nil)
}

// decodeEdgeAs is decodeEdgeV2 decoding into st when st is not nil: the
// edge returned is st's, and its lists and provenance lie in st's
// buffers, until st.pack copies it out or the next decode replaces it.
func decodeEdgeAs(b []byte, inPlace bool, st *edgeStage) (_ *Edge, apart int, _ error) {
	r := &rd{}
	st.begin()
	emb, apart := newReader(r, b, kindEdge, inPlace)
	// The fields ahead of the provenance are read into head; once the
	// provenance's length is read, the edge is allocated in a box that
	// holds it and the assertion (boxFor): one object for a load to
	// allocate and every collection to mark, where there were three
	// (the edge with its assertion, the provenance, its step indices).
	var head Edge
	head.Embedding = emb
	head.ID = r.str()
	head.Namespace = r.str()
	head.Source = r.str()
	head.Target = r.str()
	head.Type = internEdgeType(EdgeType(r.str()))
	head.Scope.TimeRange.From = r.time()
	head.Scope.TimeRange.To = r.time()
	head.Scope.Location = r.str()
	head.Scope.Audience = st.list(r)
	n, isNil := r.count(5)
	e, a := st.box(n)
	prov := e.Provenance
	*e = head
	if !isNil {
		e.Provenance = prov
		var steps []int // the step indices past stepIndexes, if any
		for i := range e.Provenance {
			p := &e.Provenance[i]
			p.EpisodeID = r.str()
			if r.present() {
				step := r.integer()
				if p.StepIndex = stepIndex(step); p.StepIndex == nil {
					p.StepIndex = st.stepOf(step, i, n, &steps)
				}
			}
			p.CMSSpanID = r.str()
			p.Agent = r.str()
			p.ObservedAt = r.time()
		}
	}
	e.Evidence = r.integer()
	if r.present() {
		*a = Assertion{Predicate: r.str(), Value: r.str()}
		e.Assertion = a
	}
	e.Confidence = r.f64()
	e.Belief = r.belief()
	e.Salience.Score = r.f64()
	e.Salience.DecayFn = r.str()
	e.Salience.HalfLifeS = r.f64()
	e.Salience.LastUpdated = r.time()
	e.Policy.AllowRoles = st.list(r)
	e.Policy.DenyRoles = st.list(r)
	e.Policy.Sensitivity = Sensitivity(r.str())
	e.Policy.Subject = r.str()
	if r.present() {
		e.Policy.Portable = st.flag(r.boolean())
	}
	e.Policy.Origin = r.str()
	e.ValidFrom = r.time()
	e.ValidTo = r.time()
	e.Status = Status(r.str())
	e.SupersededBy = r.str()
	e.EndedAt = r.time()
	e.Contradicts = st.list(r)
	e.CreatedAt = r.time()
	e.UpdatedAt = r.time()
	e.Seq = r.uvar()
	if err := r.done(); err != nil {
		return nil, 0, fmt.Errorf("decode edge: %w", err)
	}
	return e, apart, nil
}

func encodeEpisodeV2(e *Episode, slab *valueSlab) ([]byte, error) {
	// The metadata is marshalled first so that the buffer is sized once;
	// its error still ranks after the times' (the order of the fields).
	var js []byte
	var jsErr error
	if e.Metadata != nil {
		js, jsErr = json.Marshal(e.Metadata)
	}
	size := 128 + len(js) + len(e.ID) + len(e.Namespace) + len(e.Agent) + len(e.Location) +
		len(e.LanguageInstruction) + len(e.LastTool) + len(e.NodeID) + strsSize(e.Nodes) + strsSize(e.Edges)
	for k, v := range e.Features {
		size += 2*binaryLenMax + len(k) + len(v)
	}
	w := newWriter(kindEpisode, e.Embedding, size, slab, false)
	w.str(e.ID)
	w.str(e.Namespace)
	w.str(e.Agent)
	w.time(e.StartTime)
	w.time(e.EndTime)
	w.str(e.Location)
	w.str(e.LanguageInstruction)
	w.strs(e.Nodes)
	w.strs(e.Edges)
	w.present(e.Outcome.Success != nil)
	if e.Outcome.Success != nil {
		w.boolean(*e.Outcome.Success)
	}
	w.present(e.Outcome.RewardSum != nil)
	if e.Outcome.RewardSum != nil {
		w.f64(*e.Outcome.RewardSum)
	}
	w.ivar(int64(e.Steps))
	w.boolean(e.Ended)
	if e.Metadata == nil {
		w.uvar(0)
	} else {
		if jsErr != nil && w.err == nil {
			w.err = jsErr
		}
		w.count(false, len(js))
		w.b = append(w.b, js...)
	}
	w.strMap(e.Features)
	w.str(e.LastTool)
	w.str(e.NodeID)
	w.uvar(e.Seq)
	if e.sealed > 0 {
		// Only an episode whose edge list has chunks stored apart has
		// the field: other records are as before it existed.
		w.uvar(uint64(e.sealed))
	}
	if w.err != nil {
		return nil, fmt.Errorf("encode episode %s: %w", e.ID, w.err)
	}
	return w.b, nil
}

func decodeEpisodeV2(b []byte, inPlace bool) (*Episode, error) {
	r := &rd{}
	emb, apart := newReader(r, b, kindEpisode, inPlace)
	if apart > 0 {
		r.fail("an episode's embedding stored apart")
	}
	e := &Episode{Embedding: emb}
	e.ID = r.str()
	e.Namespace = r.str()
	e.Agent = r.str()
	e.StartTime = r.time()
	e.EndTime = r.time()
	e.Location = r.str()
	e.LanguageInstruction = r.str()
	e.Nodes = r.strs()
	e.Edges = r.strs()
	if r.present() {
		v := r.boolean()
		e.Outcome.Success = &v
	}
	if r.present() {
		v := r.f64()
		e.Outcome.RewardSum = &v
	}
	e.Steps = r.integer()
	e.Ended = r.boolean()
	if n, isNil := r.count(1); !isNil {
		if at, ok := r.span(uint64(n)); ok {
			if err := json.Unmarshal(r.b[at:at+n], &e.Metadata); err != nil {
				r.fail("metadata: " + err.Error())
			} else if e.Metadata == nil {
				r.fail("metadata: null")
			}
		}
	}
	e.Features = r.strMap()
	e.LastTool = r.str()
	e.NodeID = r.str()
	e.Seq = r.uvar()
	if r.err == nil && r.off < len(r.b) {
		n := r.uvar()
		if n == 0 || n > maxEpisodeEdgeChunks {
			r.fail("edge chunk count")
		}
		e.sealed = int(n)
	}
	if err := r.done(); err != nil {
		return nil, fmt.Errorf("decode episode: %w", err)
	}
	return e, nil
}
