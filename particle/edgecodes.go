package particle

import (
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/ctxgraph/ctxgraph/wave"
)

// edgeCodes holds, by seq, the int8 code of each edge's and node's
// embedding (wave.Quantize; nodes and edges are numbered from one
// sequence): a quarter of the bytes of the float32 embedding, so that
// the expansion bounds and scores a candidate's similarity to the query
// (wave.CodeDot, wave.CodeBound) and a node's without reading the
// embedding ([Reader.EmbeddingCode]).
//
// A put marks its seq's code stale only when it changes the edge's or
// node's embedding (a re-observation keeps the array: the code stays), and
// lists the seq for the store's coder (coder.go), which makes the code
// off the commit path soon after; a load leaves every code stale until
// [Store.CodeAll]. A reader that finds a code stale makes it itself.
// Readers (the coder is one) claim a slot before writing it
// (codeBusy), so two never write one code, and publish it by storing
// the scale; a writer, holding the store's lock, has no reader beside
// it.
//
// Codes are of one dimension, the first embedding's; an edge or node
// with an embedding of another has none. They live in fixed chunks, made on
// first use, so growing never copies the codes held.
type edgeCodes struct {
	dim int
	// chunks covers every seq the view has numbered (writers grow it);
	// a chunk is made by the reader that first codes one of its seqs.
	chunks []atomic.Pointer[codeChunk]
	// dirty lists the seqs whose code a put made stale since the last
	// takeDirty: the coder's next work.
	dirty []uint64
}

// codeChunkSeqs is how many seqs a chunk covers.
const codeChunkSeqs = 1 << 12

// newCodeChunk makes a chunk of stale codes of dim bytes each. Its codes
// lie outside Go's heap where the kernel maps memory for them
// (anonMemory): they hold no pointers, so the collector has nothing to
// do with them, and nothing zeroes them but the kernel, when the coder
// first writes a page. On the heap, each chunk was cleared as it was
// made. A load makes every chunk at once (loaded), and where the
// daemon's start had readied its heap for huge pages (the heap's free
// pages are then all cleared before reuse) that clearing was 0.5 GB of
// a 1M-edge store's start, on its critical path (BENCHMARKS.md,
// fifty-fourth round). The memory goes back to the kernel once the
// chunk is unreachable: a reader never keeps a code past its call
// ([Reader.EmbeddingCode]), and the view holds its chunks while it is read.
func newCodeChunk(dim int) *codeChunk {
	n := codeChunkSeqs * dim
	ch := &codeChunk{}
	mem, free := anonMemory(n)
	if mem == nil {
		ch.codes = make([]int8, n)
		return ch
	}
	ch.codes = unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	ch.mapping = &codeMapping{bytes: n, free: free}
	codeBytesMapped.Add(int64(n))
	runtime.AddCleanup(ch, (*codeMapping).release, ch.mapping)
	return ch
}

// codeMapping is a chunk's codes' memory outside the heap, released by
// the chunk's cleanup.
type codeMapping struct {
	bytes    int
	free     func()
	released atomic.Bool
}

func (m *codeMapping) release() {
	m.free()
	m.released.Store(true)
	codeBytesMapped.Add(-int64(m.bytes))
}

// codeBytesMapped is the bytes of code chunks mapped outside the heap
// and not yet released.
var codeBytesMapped atomic.Int64

// MappedCodeBytes is the memory the process's stores hold for edge codes
// outside Go's heap (newCodeChunk): the runtime's memory statistics leave
// it out. A closed store's goes back to the kernel once a collection
// finds its chunks unreachable. Pages not yet written hold no memory.
func MappedCodeBytes() int64 { return codeBytesMapped.Load() }

type codeChunk struct {
	codes []int8 // dim per seq
	// mapping is the codes' memory when mapped outside the heap (nil
	// on the heap).
	mapping *codeMapping
	// state holds, per seq, codeStale, codeBusy, codeNone, or the
	// float32 bits of the scale of a code made (a zero scale as -0).
	state [codeChunkSeqs]atomic.Uint32
}

const (
	codeStale uint32 = 0          // not made yet: the next reader makes it
	codeBusy  uint32 = 1<<32 - 2  // a reader is making it
	codeNone  uint32 = 1<<32 - 1  // nothing to code (both NaN patterns)
	negZero   uint32 = 0x80000000 // a zero scale's bits, told from codeStale
)

// stale marks the code at seq as not made (a put changed the edge's
// embedding to emb) and lists it for the coder if emb can have one.
func (c *edgeCodes) stale(seq uint64, emb []float32) {
	if seq == 0 {
		return
	}
	if c.dim == 0 && len(emb) > 0 {
		c.dim = len(emb)
	}
	c.cover(seq)
	if st := c.stateAt(seq); st != nil {
		st.Store(codeStale)
	}
	if len(emb) > 0 && len(emb) == c.dim {
		c.dirty = append(c.dirty, seq)
	}
}

// takeDirty returns the seqs listed by stale since the last call (a
// writer's call).
func (c *edgeCodes) takeDirty() []uint64 {
	d := c.dirty
	c.dirty = nil
	return d
}

// sameVector reports whether a and b are the same array (or both
// empty): published embeddings are replaced, never changed in place,
// so the same array holds the same vector and keeps its code.
func sameVector(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0]
}

// unset drops the code at seq (no edge there now).
func (c *edgeCodes) unset(seq uint64) {
	if st := c.stateAt(seq); st != nil {
		st.Store(codeNone)
	}
}

// stateAt returns the state word of the code at seq, nil where its
// chunk is not made (it makes none).
func (c *edgeCodes) stateAt(seq uint64) *atomic.Uint32 {
	if ch, i := c.chunkOf(seq, false); ch != nil {
		return &ch.state[i]
	}
	return nil
}

// chunkOf returns the chunk that holds the code at seq and the code's
// index in it: nil where seq is past the chunks, or where its chunk is
// not made and create is false. With create, a chunk not made yet is
// made (a reader racing this one may make it too; one of them is kept).
func (c *edgeCodes) chunkOf(seq uint64, create bool) (*codeChunk, int) {
	k := seq / codeChunkSeqs
	if k >= uint64(len(c.chunks)) {
		return nil, 0
	}
	ch := c.chunks[k].Load()
	if ch == nil && create {
		c.chunks[k].CompareAndSwap(nil, newCodeChunk(c.dim))
		ch = c.chunks[k].Load()
	}
	return ch, int(seq % codeChunkSeqs)
}

// cover grows chunks to cover seq (a writer's call).
func (c *edgeCodes) cover(seq uint64) {
	if need := int(seq/codeChunkSeqs) + 1; need > len(c.chunks) {
		grown := make([]atomic.Pointer[codeChunk], need+need/4)
		for i := range c.chunks {
			grown[i].Store(c.chunks[i].Load())
		}
		c.chunks = grown
	}
}

// loaded ends a load: room for a code at every seq of edges and nodes,
// all stale, in chunks made now (a load puts nodes as a batch does, and
// their puts set dim where no edge has an embedding). A chunk made on first use is made by the
// reader that needs it: after a reopen, the first planner calls made
// them by the hundred (1.5 MB each at 384 dimensions), while the
// collection the daemon's start had held off marked its heap, and
// their allocations were paid for in the collector's work: a 1M-edge
// store's first expansion took 0.56-0.75 s (BENCHMARKS.md, forty-third
// round). Made during the load, while the collector rests, they are
// mapped memory the kernel zeroes when the coder writes it (every code
// is made soon after a daemon serves: Store.CodeAll), off the start's
// path (newCodeChunk).
func (c *edgeCodes) loaded(edges []*Edge, nodes []*Node) {
	for _, e := range edges {
		if e != nil && len(e.Embedding) > 0 {
			c.dim = len(e.Embedding)
			break
		}
	}
	if n := max(len(edges), len(nodes)); n > 0 {
		c.cover(uint64(n - 1))
	}
	if c.dim > 0 {
		for k := range c.chunks {
			c.chunks[k].Store(newCodeChunk(c.dim))
		}
	}
}

// EmbeddingCode returns the code of the embedding of the edge or node
// at seq and its scale (wave.Quantize), making it if it is stale. ok is
// false when there is no code: no edge or node at seq, an embedding
// missing or of another dimension than the view's codes, or another
// reader making it right now. The code stands for the embedding the
// edge or node has. Read it, don't keep it.
func (r Reader) EmbeddingCode(seq uint64) (code []int8, scale float32, ok bool) {
	if r.v == nil {
		return nil, 0, false
	}
	c := &r.v.codes
	if seq == 0 || c.dim == 0 {
		return nil, 0, false
	}
	ch, i := c.chunkOf(seq, true) // the first code of its chunk makes it
	if ch == nil {
		return nil, 0, false
	}
	code = ch.codes[i*c.dim : (i+1)*c.dim : (i+1)*c.dim]
	st := &ch.state[i]
	switch s := st.Load(); s {
	case codeNone, codeBusy:
		return nil, 0, false
	case codeStale:
		emb := r.v.embeddingAt(seq)
		if len(emb) != c.dim {
			st.CompareAndSwap(codeStale, codeNone)
			return nil, 0, false
		}
		if !st.CompareAndSwap(codeStale, codeBusy) {
			return nil, 0, false
		}
		scale = wave.Quantize(emb, code)
		bits := math.Float32bits(scale)
		if bits == codeStale {
			bits = negZero
		}
		st.Store(bits)
		return code, scale, true
	default:
		return code, math.Float32frombits(s), true
	}
}

// embeddingAt is the embedding of the edge or node at seq (nil: none).
func (v *view) embeddingAt(seq uint64) []float32 {
	if e := atSeq(v.edgeSeq, seq); e != nil {
		return e.Embedding
	}
	if n := atSeq(v.nodeSeq, seq); n != nil {
		return n.Embedding
	}
	return nil
}
