package wave

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// clustered returns n L2-normalised dim-dimensional vectors drawn from c
// isotropic gaussian clusters around random unit centres, the noise
// having norm about 0.6 (comparable to the distance between centres),
// deterministically from seed. The seed also draws the centres, so
// queries must come from the same call: split its result.
func clustered(seed uint64, n, dim, c int) [][]float32 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	centres := make([][]float32, c)
	for i := range centres {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		Normalize(v)
		centres[i] = v
	}
	sigma := 0.6 / math.Sqrt(float64(dim))
	out := make([][]float32, n)
	flat := make([]float32, n*dim)
	for i := range out {
		v := flat[i*dim : (i+1)*dim : (i+1)*dim]
		ctr := centres[r.IntN(c)]
		for j := range v {
			v[j] = ctr[j] + float32(sigma*r.NormFloat64())
		}
		Normalize(v)
		out[i] = v
	}
	return out
}

// bruteTop is the reference: sort everything.
func bruteTop(vecs map[uint64][]float32, q []float32, k int, admit func(uint64) bool) []Hit {
	var all []Hit
	for id, v := range vecs {
		if admit == nil || admit(id) {
			all = append(all, Hit{ID: id, Score: dotGeneric(q, v)})
		}
	}
	slices.SortFunc(all, func(a, b Hit) int {
		if worse(b, a) {
			return -1
		}
		if worse(a, b) {
			return 1
		}
		return 0
	})
	return all[:min(k, len(all))]
}

func TestDot(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 384, 1000} {
		a, b := make([]float32, n), make([]float32, n)
		var want float64
		for i := range a {
			a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			want += float64(a[i]) * float64(b[i])
		}
		for name, fn := range map[string]func(a, b []float32) float32{"Dot": Dot, "blas32": dotBLAS, "generic": dotGeneric} {
			got := fn(a, b)
			if math.Abs(float64(got)-want) > 1e-4*math.Max(1, math.Sqrt(float64(n))) {
				t.Errorf("%s n=%d: got %v, want %v", name, n, got, want)
			}
		}
	}
}

func TestDotI8(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 3, 7, 8, 9, 31, 32, 33, 64, 100, 384, 1000} {
		q, v := make([]float32, n), make([]float32, n)
		c := make([]int8, n)
		for i := range q {
			q[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		Normalize(q)
		Normalize(v)
		scale := quantize(v, c)
		var want, exact float64
		for i := range q {
			want += float64(q[i]) * float64(c[i])
			exact += float64(q[i]) * float64(v[i])
		}
		for name, fn := range map[string]func([]float32, []int8) float32{"dotI8": dotI8, "generic": dotI8Generic} {
			got := fn(q, c)
			if math.Abs(float64(got)-want) > 1e-3*math.Max(1, math.Abs(want)) {
				t.Errorf("%s n=%d: got %v, want %v", name, n, got, want)
			}
			// Quantisation error stays far below score gaps that matter.
			if d := math.Abs(float64(scale*got) - exact); d > 0.01 {
				t.Errorf("%s n=%d: quantised score %v, exact %v", name, n, scale*got, exact)
			}
		}
	}
	c := make([]int8, 3)
	if s := quantize([]float32{0, 0, 0}, c); s != 0 || c[0] != 0 {
		t.Fatalf("quantize(zero) = %v, %v", s, c)
	}
	if s := quantize([]float32{-2, 1, 0}, c); c[0] != -127 || c[1] != 64 || math.Abs(float64(s)-2.0/127) > 1e-7 {
		t.Fatalf("quantize = %v, %v", s, c)
	}
}

// TestFiniteFindsEveryBadComponent puts a NaN or an infinity at every
// position of a 384-d vector (through the SIMD kernel and its tail),
// and checks that huge finite components, whose squares overflow, pass.
func TestFiniteFindsEveryBadComponent(t *testing.T) {
	const dim = 384
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(i%7) - 3
	}
	if !finite(v) {
		t.Fatal("a finite vector is not finite")
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for i := range v {
			w := slices.Clone(v)
			w[i] = bad
			if finite(w) {
				t.Fatalf("%v at %d of %d: finite", bad, i, dim)
			}
			if finite(w[:i+1]) {
				t.Fatalf("%v last of %d: finite", bad, i+1)
			}
		}
	}
	if !finite(nil) {
		t.Fatal("no components: not finite")
	}
	huge := slices.Repeat([]float32{3e38, -3e38}, dim/2)
	if !finite(huge) {
		t.Fatal("huge finite components: not finite")
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   []float32
		ok   bool
		want []float32
	}{
		{"unit", []float32{1, 0}, true, []float32{1, 0}},
		{"scale", []float32{3, 4}, true, []float32{0.6, 0.8}},
		{"negative", []float32{0, -2}, true, []float32{0, -1}},
		{"zero", []float32{0, 0, 0}, false, []float32{0, 0, 0}},
		{"empty", nil, false, nil},
		{"tiny", []float32{1e-30, 0}, true, []float32{1, 0}},
		{"huge", []float32{3e38, 3e38}, true, []float32{float32(math.Sqrt2 / 2), float32(math.Sqrt2 / 2)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := slices.Clone(tc.in)
			if ok := Normalize(v); ok != tc.ok {
				t.Fatalf("Normalize ok = %v, want %v", ok, tc.ok)
			}
			for i := range v {
				if math.Abs(float64(v[i]-tc.want[i])) > 1e-6 {
					t.Fatalf("got %v, want %v", v, tc.want)
				}
			}
		})
	}
}

func TestFlatAddErrors(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	tests := []struct {
		name string
		vec  []float32
		want error
	}{
		{"ok", []float32{1, 0, 0}, nil},
		{"short", []float32{1, 0}, ErrDimension},
		{"long", []float32{1, 0, 0, 0}, ErrDimension},
		{"nil", nil, ErrDimension},
		{"nan", []float32{nan, 0, 0}, ErrNonFinite},
		{"inf", []float32{0, 0, inf}, ErrNonFinite},
		{"-inf", []float32{0, -inf, 0}, ErrNonFinite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := NewFlat(3)
			err := x.Add(1, tc.vec, Meta{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Add err = %v, want %v", err, tc.want)
			}
			wantLen := 0
			if tc.want == nil {
				wantLen = 1
			}
			if x.Len() != wantLen {
				t.Fatalf("Len = %d, want %d", x.Len(), wantLen)
			}
		})
	}
}

func TestFlatSearchMatchesBruteForce(t *testing.T) {
	const n, dim = 2000, 32
	all := clustered(7, n+20, dim, 20)
	vecs, queries := all[:n], all[n:]
	x := NewFlat(dim)
	ref := map[uint64][]float32{}
	metas := map[uint64]Meta{}
	for i, v := range vecs {
		id := uint64(i*3 + 1)
		m := Meta{Kind: Kind(i%3 + 1), Namespace: uint32(i%4 + 1), Type: uint8(i % 10), Time: int64(i), End: int64(i)}
		if err := x.Add(id, v, m); err != nil {
			t.Fatal(err)
		}
		ref[id], metas[id] = v, m
	}
	filters := []struct {
		name string
		f    *Filter
	}{
		{"nil", nil},
		{"zero", &Filter{}},
		{"namespace", &Filter{Namespace: 2}},
		{"kinds", &Filter{Kinds: []Kind{KindEdge, KindEpisode}}},
		{"types", &Filter{Types: []uint8{3}}},
		{"time", &Filter{From: 100, To: 600}},
		{"allow", &Filter{Allow: func(id uint64) bool { return id%7 == 0 }}},
		{"none", &Filter{Namespace: 99}},
		{"combined", &Filter{Namespace: 1, Types: []uint8{0, 4, 8}, From: 10}},
	}
	for _, tc := range filters {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []int{1, 10, 100} {
				for _, q := range queries {
					got := x.Search(q, k, tc.f)
					want := bruteTop(ref, q, k, func(id uint64) bool { return tc.f.Admits(id, metas[id]) })
					if len(got) != len(want) {
						t.Fatalf("k=%d: %d hits, want %d", k, len(got), len(want))
					}
					for i := range got {
						if got[i].ID != want[i].ID || math.Abs(float64(got[i].Score-want[i].Score)) > 1e-5 {
							t.Fatalf("k=%d hit %d: got %+v, want %+v", k, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

func TestFlatRemoveAndReplace(t *testing.T) {
	x := NewFlat(2)
	mustAdd := func(id uint64, v []float32, m Meta) {
		t.Helper()
		if err := x.Add(id, v, m); err != nil {
			t.Fatal(err)
		}
	}
	mustAdd(1, []float32{1, 0}, Meta{Type: 1})
	mustAdd(2, []float32{0, 1}, Meta{Type: 2})
	mustAdd(3, []float32{1, 1}, Meta{Type: 3})
	if x.Len() != 3 {
		t.Fatalf("Len = %d, want 3", x.Len())
	}
	// Vectors are stored normalised.
	if h := x.Search([]float32{1, 1}, 1, nil); len(h) != 1 || h[0].ID != 3 || math.Abs(float64(h[0].Score)-math.Sqrt2) > 1e-5 {
		t.Fatalf("Search = %+v", h)
	}
	if !x.Remove(1) || x.Remove(1) || x.Remove(42) {
		t.Fatal("Remove reported wrong presence")
	}
	if h := x.Search([]float32{1, 0}, 10, nil); len(h) != 2 || slices.ContainsFunc(h, func(h Hit) bool { return h.ID == 1 }) {
		t.Fatalf("removed id returned: %+v", h)
	}
	// Swap-delete moved id 3 into slot 0; its meta must have moved too.
	if h := x.Search([]float32{1, 0}, 10, &Filter{Types: []uint8{3}}); len(h) != 1 || h[0].ID != 3 {
		t.Fatalf("filter after swap-delete: %+v", h)
	}
	// Re-adding replaces vector and meta, without growing.
	mustAdd(2, []float32{1, 0}, Meta{Type: 9})
	if x.Len() != 2 {
		t.Fatalf("Len after replace = %d, want 2", x.Len())
	}
	h := x.Search([]float32{1, 0}, 1, &Filter{Types: []uint8{9}})
	if len(h) != 1 || h[0].ID != 2 || math.Abs(float64(h[0].Score)-1) > 1e-6 {
		t.Fatalf("after replace: %+v", h)
	}
	if h := x.Search([]float32{1, 0}, 0, nil); h != nil {
		t.Fatalf("k=0 returned %+v", h)
	}
	if h := x.Search([]float32{1, 0, 0}, 3, nil); h != nil {
		t.Fatalf("wrong-dim query returned %+v", h)
	}
}

// TestFlatGrowAddsWithoutCopying: after Grow(n), n adds keep the
// vectors where Grow put them, and the index answers as one grown by
// appends.
func TestFlatGrowAddsWithoutCopying(t *testing.T) {
	const dim, n = 8, 300
	vecs := clustered(5, n, dim, 6)
	grown, appended := NewFlat(dim), NewFlat(dim)
	grown.Grow(0) // nothing
	if cap(grown.vecs) != 0 {
		t.Fatalf("Grow(0) made room for %d floats", cap(grown.vecs))
	}
	grown.Grow(n)
	if cap(grown.vecs) < n*dim || cap(grown.ids) < n || cap(grown.metas) < n {
		t.Fatalf("Grow(%d): room for %d floats, %d ids, %d metas", n, cap(grown.vecs), cap(grown.ids), cap(grown.metas))
	}
	var first *float32
	for i, v := range vecs {
		for _, x := range []*Flat{grown, appended} {
			if err := x.Add(uint64(i+1), v, Meta{Type: uint8(i % 3)}); err != nil {
				t.Fatal(err)
			}
		}
		if i == 0 {
			first = &grown.vecs[0]
		}
	}
	if &grown.vecs[0] != first {
		t.Fatal("adding the vectors Grow made room for moved the array")
	}
	for i, q := range vecs[:20] {
		f := &Filter{Types: []uint8{uint8(i % 3)}}
		if a, b := grown.Search(q, 10, f), appended.Search(q, 10, f); !slices.Equal(a, b) {
			t.Fatalf("query %d: grown index answers %v, appended one %v", i, a, b)
		}
	}
}

func TestFlatConcurrent(t *testing.T) {
	const dim = 16
	vecs := clustered(3, 400, dim, 8)
	x := NewFlat(dim)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := w; i < len(vecs); i += 2 {
				if err := x.Add(uint64(i), vecs[i], Meta{Type: uint8(i % 5)}); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					x.Remove(uint64(i))
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for i := range 200 {
				for _, h := range x.Search(vecs[i], 5, &Filter{Types: []uint8{1, 2}}) {
					if h.ID%5 != 1 && h.ID%5 != 2 {
						t.Errorf("filter violated: %d", h.ID)
					}
				}
			}
		})
	}
	wg.Wait()
	if x.Len() != 360 {
		t.Fatalf("Len = %d, want 360", x.Len())
	}
}

func BenchmarkDot(b *testing.B) {
	for _, d := range []int{64, 384} {
		v := clustered(1, 2, d, 2)
		for _, k := range []struct {
			name string
			fn   func(a, b []float32) float32
		}{{"Dot", Dot}, {"blas32", dotBLAS}, {"generic", dotGeneric}} {
			b.Run(fmt.Sprintf("%s/dim=%d", k.name, d), func(b *testing.B) {
				var s float32
				for b.Loop() {
					s += k.fn(v[0], v[1])
				}
				b.ReportMetric(2*float64(d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gflop/s")
				_ = s
			})
		}
	}
}

func BenchmarkDotI8(b *testing.B) {
	for _, d := range []int{64, 384} {
		v := clustered(1, 2, d, 2)
		c := make([]int8, d)
		quantize(v[1], c)
		for _, k := range []struct {
			name string
			fn   func([]float32, []int8) float32
		}{{"dotI8", dotI8}, {"generic", dotI8Generic}} {
			b.Run(fmt.Sprintf("%s/dim=%d", k.name, d), func(b *testing.B) {
				var s float32
				for b.Loop() {
					s += k.fn(v[0], c)
				}
				_ = s
			})
		}
	}
}

func BenchmarkFlatSearchSmall(b *testing.B) {
	const n, dim = 20_000, 128
	all := clustered(1, n+100, dim, 100)
	vecs, qs := all[:n], all[n:]
	x := NewFlat(dim)
	for i, v := range vecs {
		if err := x.Add(uint64(i), v, Meta{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		x.Search(qs[i%len(qs)], 10, nil)
		i++
	}
	b.ReportMetric(float64(x.Bytes())/n, "B/vec")
}
