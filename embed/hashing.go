package embed

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// DefaultDimensions is the vector length used when none is configured.
const DefaultDimensions = 384

// Feature weights of the hashing embedder. A word contributes its
// unigram, the bigram it forms with the previous word, and its character
// 3-grams; the 3-gram weight is shared among a word's 3-grams (each gets
// weightTrigrams/sqrt(n)) so long words do not drown short ones, while
// morphological variants ("block", "blocks") still land close.
// Stopwords are down-weighted (see stopwords).
const (
	weightUnigram  = 1.0
	weightBigram   = 0.7
	weightTrigrams = 1.0
)

// stopwords are English function words. They still count, so a text
// made only of them embeds, but at stopwordScale of a content word's
// weight (bigrams take the smaller scale of their two words), so that
// sharing "the" does not make two instructions look alike.
var stopwords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "to": true, "in": true,
	"on": true, "at": true, "by": true, "for": true, "with": true,
	"from": true, "into": true, "onto": true, "and": true, "or": true,
	"is": true, "are": true, "was": true, "were": true, "be": true,
	"it": true, "its": true, "this": true, "that": true, "then": true,
}

const stopwordScale = 0.3

// Feature namespaces, hashed first so that, e.g., the unigram "red" and
// the 3-gram "red" fall in unrelated buckets.
const (
	nsUnigram byte = 'u'
	nsBigram  byte = 'b'
	nsTrigram byte = 't'
)

// FNV-1a, 64-bit (hash/fnv's constants, inlined to avoid allocations).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// Hashing is the offline default [Embedder]: signed feature hashing of
// lowercase word unigrams, word bigrams and character 3-grams of each
// word (with "<" and ">" boundary markers), L2-normalised.
//
// Words are maximal runs of Unicode letters, digits and marks, lowercased
// with [unicode.ToLower]; everything else separates words. A few English
// function words ("the", "of", "to", ...) weigh less than content words.
// Buckets and
// signs come from FNV-1a with fixed constants followed by a 64-bit mixer,
// so a text's vector depends only on the text and the dimension: it is
// identical across processes, machines and Go versions, and vectors may
// be stored and compared later. Changing the features or weights in this
// file changes every vector; the golden test pins them.
//
// Hashing understands words, not meanings: "pick up" and "grasp" share
// nothing. It is a good, cheap default for the planner's prefilter over
// robot-vocabulary text; configure [OpenAI] for semantic similarity.
//
// A Hashing is immutable and safe for concurrent use.
type Hashing struct {
	dims int
}

var _ Embedder = (*Hashing)(nil)

// NewHashing returns a hashing embedder with dims dimensions. A dims
// below 1 selects [DefaultDimensions].
func NewHashing(dims int) *Hashing {
	if dims < 1 {
		dims = DefaultDimensions
	}
	return &Hashing{dims: dims}
}

// Dimensions is the length of every vector h returns.
func (h *Hashing) Dimensions() int { return h.dims }

// Embed returns the unit-length vector of text. A text without letters
// or digits has no features and yields an error wrapping [ErrEmptyText]
// (a zero vector would have no cosine with anything).
func (h *Hashing) Embed(ctx context.Context, text string) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v := make([]float32, h.dims)
	if err := h.embedInto(v, text); err != nil {
		return nil, err
	}
	return v, nil
}

// EmbedBatch returns one vector per text, in order. It fails, naming the
// index, on the first text that has nothing to embed. The vectors share
// one backing array (each with its own capacity limit).
func (h *Hashing) EmbedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	slab := make([]float32, len(texts)*h.dims)
	for i, t := range texts {
		if i%64 == 63 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v := slab[i*h.dims : (i+1)*h.dims : (i+1)*h.dims]
		if err := h.embedInto(v, t); err != nil {
			return nil, fmt.Errorf("text %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// span is a word's byte range in scratch.buf.
type span struct{ start, end int32 }

// scratch is the per-call working memory, pooled so Embed allocates
// only its result.
type scratch struct {
	buf   []byte  // the lowercased words, concatenated
	words []span  // word boundaries in buf
	runes []int32 // rune start offsets of the current word, plus its end
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledBytes bounds what a pooled scratch keeps after a huge text.
const maxPooledBytes = 64 << 10

// embedInto writes the normalised vector of text into v (len h.dims),
// which must be zeroed.
func (h *Hashing) embedInto(v []float32, text string) error {
	s := scratchPool.Get().(*scratch)
	defer func() {
		if cap(s.buf) <= maxPooledBytes {
			scratchPool.Put(s)
		}
	}()
	s.tokenize(text)
	if len(s.words) == 0 {
		if strings.TrimSpace(text) == "" {
			return ErrEmptyText
		}
		return fmt.Errorf("%w: no letters or digits in %q", ErrEmptyText, clip(text, 40))
	}
	dims := uint64(h.dims)
	prevScale := float32(0)
	for i, w := range s.words {
		word := s.buf[w.start:w.end]
		scale := float32(1)
		if stopwords[string(word)] {
			scale = stopwordScale
		}
		addFeature(v, dims, fnvBytes(fnvByte(fnvOffset64, nsUnigram), word), weightUnigram*scale)
		if i > 0 {
			p := s.words[i-1]
			k := fnvByte(fnvOffset64, nsBigram)
			k = fnvBytes(k, s.buf[p.start:p.end])
			k = fnvByte(k, ' ')
			addFeature(v, dims, fnvBytes(k, word), weightBigram*min(scale, prevScale))
		}
		s.trigrams(v, dims, word, scale)
		prevScale = scale
	}
	var ss float64
	for _, x := range v {
		// The explicit conversion forbids fusing into an FMA (Go spec,
		// "Arithmetic operators"), keeping results identical on arm64.
		ss += float64(float64(x) * float64(x))
	}
	if ss == 0 {
		// Every feature cancelled out; astronomically unlikely.
		return fmt.Errorf("%w: features cancel out", ErrInvalid)
	}
	inv := 1 / math.Sqrt(ss)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return nil
}

// tokenize fills s.buf and s.words with the lowercased words of text.
func (s *scratch) tokenize(text string) {
	s.buf, s.words = s.buf[:0], s.words[:0]
	start, in := 0, false
	for _, r := range text {
		var ok bool
		if r < utf8.RuneSelf {
			switch {
			case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
				ok = true
			case 'A' <= r && r <= 'Z':
				r += 'a' - 'A'
				ok = true
			}
		} else if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) {
			r = unicode.ToLower(r)
			ok = true
		}
		if !ok {
			if in {
				s.words = append(s.words, span{int32(start), int32(len(s.buf))})
				in = false
			}
			continue
		}
		if !in {
			start, in = len(s.buf), true
		}
		if r < utf8.RuneSelf {
			s.buf = append(s.buf, byte(r))
		} else {
			s.buf = utf8.AppendRune(s.buf, r)
		}
	}
	if in {
		s.words = append(s.words, span{int32(start), int32(len(s.buf))})
	}
}

// trigrams adds the character 3-grams of "<word>" to v. Grams are over
// runes, not bytes.
func (s *scratch) trigrams(v []float32, dims uint64, word []byte, scale float32) {
	s.runes = s.runes[:0]
	for i := 0; i < len(word); {
		s.runes = append(s.runes, int32(i))
		if word[i] < utf8.RuneSelf {
			i++
		} else {
			_, n := utf8.DecodeRune(word[i:])
			i += n
		}
	}
	n := len(s.runes)
	s.runes = append(s.runes, int32(len(word)))
	// The padded word "<" r0 … r(n-1) ">" has n+2 symbols and n 3-grams;
	// gram j covers padded symbols j, j+1, j+2, i.e. runes j-1 … j+1.
	w := float32(weightTrigrams/math.Sqrt(float64(n))) * scale
	for j := range n {
		k := fnvByte(fnvOffset64, nsTrigram)
		if j == 0 {
			k = fnvByte(k, '<')
		}
		lo, hi := max(j-1, 0), min(j+1, n-1)
		k = fnvBytes(k, word[s.runes[lo]:s.runes[hi+1]])
		if j == n-1 {
			k = fnvByte(k, '>')
		}
		addFeature(v, dims, k, w)
	}
}

// addFeature adds ±w to the bucket of the feature with FNV state key.
// The mixed hash's high bits pick the bucket (Lemire's multiply-shift
// range reduction) and its low bit the sign, so colliding features
// cancel in expectation rather than pile up.
func addFeature(v []float32, dims, key uint64, w float32) {
	k := mix64(key)
	idx, _ := bits.Mul64(k, dims)
	if k&1 == 0 {
		v[idx] += w
	} else {
		v[idx] -= w
	}
}

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime64 }

func fnvBytes(h uint64, p []byte) uint64 {
	for _, b := range p {
		h = (h ^ uint64(b)) * fnvPrime64
	}
	return h
}

// mix64 is the MurmurHash3 64-bit finalizer; it spreads FNV's weak low
// and high bits over the whole word.
func mix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
