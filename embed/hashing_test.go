package embed

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func norm(v []float32) float64 { return math.Sqrt(dot(v, v)) }

func mustEmbed(t testing.TB, e Embedder, text string) []float32 {
	t.Helper()
	v, err := e.Embed(context.Background(), text)
	if err != nil {
		t.Fatalf("Embed(%q): %v", text, err)
	}
	return v
}

func TestHashingUnitNorm(t *testing.T) {
	h := NewHashing(384)
	for _, text := range []string{
		"a",
		"the of to", // only stopwords
		"pick up the red block",
		"  Grasp   the RED block!!  ",
		"joint_3 velocity 0.25 rad/s",
		"Straße öffnen: Schublade ünter dem Tisch",
		"把红色方块放进抽屉",
		strings.Repeat("move the arm to the left and open the gripper ", 200),
	} {
		t.Run(clip(text, 20), func(t *testing.T) {
			v := mustEmbed(t, h, text)
			if len(v) != 384 {
				t.Fatalf("len = %d, want 384", len(v))
			}
			if n := norm(v); math.Abs(n-1) > 1e-5 {
				t.Fatalf("norm = %v, want 1", n)
			}
		})
	}
}

func TestHashingDimensions(t *testing.T) {
	tests := []struct {
		in, want int
	}{{0, DefaultDimensions}, {-5, DefaultDimensions}, {1, 1}, {64, 64}, {1536, 1536}}
	for _, tc := range tests {
		h := NewHashing(tc.in)
		if h.Dimensions() != tc.want {
			t.Errorf("NewHashing(%d).Dimensions() = %d, want %d", tc.in, h.Dimensions(), tc.want)
		}
		if v := mustEmbed(t, h, "open the drawer"); len(v) != tc.want {
			t.Errorf("NewHashing(%d): len = %d, want %d", tc.in, len(v), tc.want)
		}
	}
}

// TestHashingGolden pins the vectors: they are persisted, so any change
// to tokenisation, features, weights or hashing must be deliberate (and
// needs a re-embedding migration). Update the digests only then.
func TestHashingGolden(t *testing.T) {
	tests := []struct {
		text string
		dims int
		want string // sha256 of the float32 bits, little-endian, first 16 hex digits
	}{
		{"pick up the red block", 384, "e4ac6d173fab22c3"},
		{"Öffne die Schublade", 384, "f354f9d500c24688"},
		{"open the drawer", 64, "549cbd705622334e"},
	}
	for _, tc := range tests {
		v := mustEmbed(t, NewHashing(tc.dims), tc.text)
		if got := digest(v); got != tc.want {
			t.Errorf("digest(%q, %d) = %s, want %s", tc.text, tc.dims, got, tc.want)
		}
	}
}

func digest(v []float32) string {
	h := sha256.New()
	var b [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func TestHashingNormalisesCaseAndPunctuation(t *testing.T) {
	h := NewHashing(384)
	a := mustEmbed(t, h, "pick up the red block")
	b := mustEmbed(t, h, "  Pick up, the RED block!\n")
	if digest(a) != digest(b) {
		t.Fatalf("case/punctuation variants differ: cos = %v", dot(a, b))
	}
	// Word order matters through bigrams, but not much.
	c := mustEmbed(t, h, "the red block pick up")
	if cos := dot(a, c); cos > 0.999 || cos < 0.5 {
		t.Fatalf("reordered cos = %v, want in (0.5, 0.999)", cos)
	}
}

func TestHashingSimilarity(t *testing.T) {
	tests := []struct {
		anchor, near, far string
	}{
		{"pick up the red block", "grasp the red block", "open the drawer"},
		{"open the drawer", "open the top drawer", "pick up the red block"},
		{"place the cup on the shelf", "put the cups on the shelf", "wipe the table"},
		{"navigate to the kitchen", "go to kitchen", "stack blocks"},
		{"gripper", "grippers", "camera"}, // character 3-grams
	}
	h := NewHashing(384)
	for _, tc := range tests {
		t.Run(tc.anchor, func(t *testing.T) {
			a := mustEmbed(t, h, tc.anchor)
			near := dot(a, mustEmbed(t, h, tc.near))
			far := dot(a, mustEmbed(t, h, tc.far))
			if near <= far {
				t.Fatalf("cos(%q, %q) = %.3f, not above cos(.., %q) = %.3f", tc.anchor, tc.near, near, tc.far, far)
			}
		})
	}
}

func TestHashingEmpty(t *testing.T) {
	h := NewHashing(0)
	for _, text := range []string{"", "   ", "\t\n", "!!! ??? ---"} {
		if _, err := h.Embed(context.Background(), text); !errors.Is(err, ErrEmptyText) {
			t.Errorf("Embed(%q) error = %v, want ErrEmptyText", text, err)
		}
	}
	_, err := h.EmbedBatch(context.Background(), []string{"open the drawer", "ok", " "})
	if !errors.Is(err, ErrEmptyText) || !strings.Contains(err.Error(), "text 2") {
		t.Fatalf("EmbedBatch error = %v, want ErrEmptyText naming text 2", err)
	}
}

func TestHashingBatchMatchesEmbed(t *testing.T) {
	h := NewHashing(128)
	texts := make([]string, 150)
	for i := range texts {
		texts[i] = fmt.Sprintf("step %d: move joint %d by %d degrees", i, i%7, i*3)
	}
	vs, err := h.EmbedBatch(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(texts) {
		t.Fatalf("got %d vectors, want %d", len(vs), len(texts))
	}
	for i, v := range vs {
		if digest(v) != digest(mustEmbed(t, h, texts[i])) {
			t.Fatalf("batch vector %d differs from Embed", i)
		}
		if cap(v) != 128 {
			t.Fatalf("batch vector %d has cap %d; appending would clobber its neighbour", i, cap(v))
		}
	}
	if vs, err := h.EmbedBatch(context.Background(), nil); err != nil || len(vs) != 0 {
		t.Fatalf("EmbedBatch(nil) = %v, %v", vs, err)
	}
}

func TestHashingContextCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h := NewHashing(32)
	if _, err := h.Embed(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Embed error = %v, want context.Canceled", err)
	}
	if _, err := h.EmbedBatch(ctx, []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("EmbedBatch error = %v, want context.Canceled", err)
	}
}

// TestHashingConcurrent exercises the scratch pool (run with -race).
func TestHashingConcurrent(t *testing.T) {
	h := NewHashing(64)
	texts := []string{"open the drawer", "pick up the red block", "Straße", strings.Repeat("long text ", 500)}
	want := make([]string, len(texts))
	for i, s := range texts {
		want[i] = digest(mustEmbed(t, h, s))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := (g + i) % len(texts)
				v, err := h.Embed(context.Background(), texts[k])
				if err != nil || digest(v) != want[k] {
					t.Errorf("goroutine %d: text %d: err %v or digest mismatch", g, k, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkHashingEmbed(b *testing.B) {
	for _, tc := range []struct {
		name, text string
	}{
		{"instruction", "pick up the red block and place it in the top drawer"},
		{"paragraph", strings.Repeat("the robot moves its left arm toward the blue cup on the kitchen counter ", 8)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := NewHashing(384)
			ctx := context.Background()
			words := len(strings.Fields(tc.text))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if _, err := h.Embed(ctx, tc.text); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(n*words)/b.Elapsed().Seconds(), "words/s")
		})
	}
}
