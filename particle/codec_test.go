package particle

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// filler sets every field of a value, however deeply nested, to a
// distinct non-zero value, so that a field the codec forgets (or two it
// swaps) changes the decoded value. A field of a kind it does not know
// fails the test: teach it the kind, and the codec the field.
type filler struct {
	t *testing.T
	n int
}

var timeType = reflect.TypeFor[time.Time]()

func (f *filler) fill(v reflect.Value, path string) {
	f.n++
	n := f.n
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(time.Unix(1_700_000_000+int64(n), int64(n)).UTC()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("%s#%d", path, n))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(n))
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		v.SetUint(uint64(n))
	case reflect.Float64, reflect.Float32:
		v.SetFloat(float64(n) + 0.25)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), path)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			f.fill(s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range 2 {
			k := reflect.New(v.Type().Key()).Elem()
			f.fill(k, path+".key")
			e := reflect.New(v.Type().Elem()).Elem()
			if v.Type().Elem().Kind() == reflect.Interface {
				e.Set(reflect.ValueOf(fmt.Sprintf("%s[%d]", path, i))) // JSON keeps strings as they are
			} else {
				f.fill(e, path+".value")
			}
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	default:
		f.t.Fatalf("%s: the every-field test cannot fill a %s: teach it (and the codec) this kind", path, v.Kind())
	}
}

type codecCase struct {
	name   string
	fresh  func() any
	encode func(any) ([]byte, error)
	decode func([]byte) (any, error)
}

var codecCases = []codecCase{
	{"node", func() any { return &Node{} },
		func(v any) ([]byte, error) { return encodeNode(v.(*Node)) },
		func(b []byte) (any, error) { return decodeNode(b, nil) }},
	{"edge", func() any { return &Edge{} },
		func(v any) ([]byte, error) { return encodeEdge(v.(*Edge)) },
		func(b []byte) (any, error) { return decodeEdge(b, nil) }},
	{"episode", func() any { return &Episode{} },
		func(v any) ([]byte, error) { return encodeEpisode(v.(*Episode)) },
		func(b []byte) (any, error) { return decodeEpisode(b) }},
}

// TestCodecEveryField round-trips values with every field set, and with
// every field zero, through format 2.
func TestCodecEveryField(t *testing.T) {
	for _, c := range codecCases {
		t.Run(c.name, func(t *testing.T) {
			full := c.fresh()
			(&filler{t: t}).fill(reflect.ValueOf(full).Elem(), c.name)
			for _, v := range []any{full, c.fresh()} {
				b, err := c.encode(v)
				if err != nil {
					t.Fatal(err)
				}
				if b[0] != formatV2 {
					t.Fatalf("written in format %d, want %d", b[0], formatV2)
				}
				got, err := c.decode(b)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, v) {
					t.Fatalf("round trip changed the value:\n got %+v\nwant %+v", got, v)
				}
			}
		})
	}
}

// TestCodecEveryFieldIndependent sets one leaf field at a time: a field
// the decoder reads into the wrong place shows even when the others are
// zero.
func TestCodecEveryFieldIndependent(t *testing.T) {
	for _, c := range codecCases {
		t.Run(c.name, func(t *testing.T) {
			typ := reflect.TypeOf(c.fresh()).Elem()
			for i := range typ.NumField() {
				if !typ.Field(i).IsExported() {
					continue // the codec's own (Episode.sealed): tested where it is used
				}
				v := c.fresh()
				(&filler{t: t}).fill(reflect.ValueOf(v).Elem().Field(i), typ.Field(i).Name)
				b, err := c.encode(v)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.decode(b)
				if err != nil {
					t.Fatalf("%s: %v", typ.Field(i).Name, err)
				}
				if !reflect.DeepEqual(got, v) {
					t.Fatalf("%s: round trip changed the value:\n got %+v\nwant %+v", typ.Field(i).Name, got, v)
				}
			}
		})
	}
}

// TestCodecReadsFormat1 decodes values as stores written before format 2
// hold them: JSON plus the embedding trailer.
func TestCodecReadsFormat1(t *testing.T) {
	for _, c := range codecCases {
		t.Run(c.name, func(t *testing.T) {
			full := c.fresh()
			(&filler{t: t}).fill(reflect.ValueOf(full).Elem(), c.name)
			emb := reflect.ValueOf(full).Elem().FieldByName("Embedding")
			trailer := emb.Interface().([]float32)
			emb.Set(reflect.Zero(emb.Type()))
			b, err := encodeValue(full, trailer)
			if err != nil {
				t.Fatal(err)
			}
			emb.Set(reflect.ValueOf(trailer))
			got, err := c.decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, full) {
				t.Fatalf("format 1 decoded differently:\n got %+v\nwant %+v", got, full)
			}
			n, err := embeddingLen(b)
			if err != nil || n != len(trailer) {
				t.Fatalf("embeddingLen = %d, %v; want %d", n, err, len(trailer))
			}
		})
	}
}

// TestCodecTimeZones keeps the instant and the offset of times outside
// UTC, and turns the zero time back into the zero time.
func TestCodecTimeZones(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("", 5*3600+30*60))
	n := &Node{ID: "n", CreatedAt: at, UpdatedAt: time.Time{}, Belief: Belief{UpdatedAt: at.UTC()}}
	b, err := encodeNode(n)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeNode(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, off := got.CreatedAt.Zone()
	if !got.CreatedAt.Equal(at) || off != 5*3600+30*60 {
		t.Fatalf("CreatedAt = %v, want %v", got.CreatedAt, at)
	}
	if got.UpdatedAt != (time.Time{}) || got.Belief.UpdatedAt != at.UTC() {
		t.Fatalf("UpdatedAt = %#v, Belief.UpdatedAt = %v", got.UpdatedAt, got.Belief.UpdatedAt)
	}
}

// TestCodecRefusesDamage cuts and flips a valid value: every decoder
// refuses with ErrCorrupt instead of panicking or reading past the end.
func TestCodecRefusesDamage(t *testing.T) {
	for _, c := range codecCases {
		t.Run(c.name, func(t *testing.T) {
			full := c.fresh()
			(&filler{t: t}).fill(reflect.ValueOf(full).Elem(), c.name)
			b, err := c.encode(full)
			if err != nil {
				t.Fatal(err)
			}
			for i := range len(b) {
				if _, err := c.decode(b[:i]); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("cut at %d of %d: err = %v, want ErrCorrupt", i, len(b), err)
				}
			}
			if _, err := c.decode(append(b, 0)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("trailing byte: err = %v, want ErrCorrupt", err)
			}
			for _, other := range codecCases {
				if other.name != c.name {
					if _, err := other.decode(b); !errors.Is(err, ErrCorrupt) {
						t.Fatalf("%s decoded as %s: err = %v, want ErrCorrupt", c.name, other.name, err)
					}
				}
			}
		})
	}
}

// TestCodecMetadataJSON keeps an episode's free-form metadata as JSON
// gives it back.
func TestCodecMetadataJSON(t *testing.T) {
	e := &Episode{ID: "ep", Metadata: map[string]any{"n": 1.5, "tags": []any{"a"}, "m": map[string]any{"x": true}}}
	b, err := encodeEpisode(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeEpisode(b)
	if err != nil {
		t.Fatal(err)
	}
	j1, _ := json.Marshal(e)
	j2, _ := json.Marshal(got)
	if string(j1) != string(j2) {
		t.Fatalf("metadata changed:\n%s\n%s", j1, j2)
	}
}

// TestCodecFloatsPortable encodes and decodes an embedding both by
// copying memory (little-endian machines) and float by float: the bytes
// and the values agree.
func TestCodecFloatsPortable(t *testing.T) {
	e := &Edge{ID: "e", Embedding: []float32{1.5, -2, 3e-7, 127}}
	fast, err := encodeEdge(e)
	if err != nil {
		t.Fatal(err)
	}
	native := littleEndian
	littleEndian = false
	defer func() { littleEndian = native }()
	slow, err := encodeEdge(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(fast) != string(slow) {
		t.Fatalf("float by float encodes %x, memory copy %x", slow, fast)
	}
	got, err := decodeEdge(fast, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Embedding, e.Embedding) {
		t.Fatalf("decoded %v, want %v", got.Embedding, e.Embedding)
	}
}

// TestDecodedEdgeTypesAreInterned: a decoded edge's known type is the
// EdgeTypes entry itself, not a copy in its record (in place or not); an
// unknown one decodes as it was.
func TestDecodedEdgeTypesAreInterned(t *testing.T) {
	for _, typ := range append(slices.Clone(EdgeTypes), "made_up") {
		b, err := encodeEdgeV2(&Edge{ID: "e", Type: typ}, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, inPlace := range []bool{false, true} {
			e, _, err := decodeEdgeV2(b, inPlace)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.Index(EdgeTypes, typ)
			switch {
			case e.Type != typ:
				t.Errorf("%s (in place %v) decoded as %q", typ, inPlace, e.Type)
			case i >= 0 && unsafe.StringData(string(e.Type)) != unsafe.StringData(string(EdgeTypes[i])):
				t.Errorf("%s (in place %v) not interned", typ, inPlace)
			}
		}
	}
}

// TestUvarintMatchesBinary checks the reopen's varint reader against
// encoding/binary on every length, with bytes after the varint and
// without, and on truncated and overlong input.
func TestUvarintMatchesBinary(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	check := func(b []byte) {
		t.Helper()
		v, n := uvarint(b)
		wv, wn := binary.Uvarint(b)
		if v != wv || n != wn {
			t.Fatalf("uvarint(% x) = %d, %d; binary.Uvarint gives %d, %d", b, v, n, wv, wn)
		}
	}
	for bitsLen := range 65 {
		for range 200 {
			x := r.Uint64()
			if bitsLen < 64 {
				x &= 1<<bitsLen - 1
			}
			b := binary.AppendUvarint(nil, x)
			for range 10 {
				check(b)
				check(b[:len(b)-1]) // truncated
				b = append(b, byte(r.Uint32()))
			}
		}
	}
	for range 20000 { // arbitrary bytes: continuation bits anywhere
		b := make([]byte, r.IntN(16))
		for i := range b {
			b[i] = byte(r.Uint32())
			if r.IntN(2) == 0 {
				b[i] |= 0x80
			}
		}
		check(b)
	}
}
