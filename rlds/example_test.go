package rlds

import (
	"errors"
	"math"
	"os"
	"sort"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// encodeExample serializes ex as a tf.train.Example (for tests). Lists
// are packed unless unpacked is set; keys are written in sorted order.
func encodeExample(ex Example, unpacked bool) []byte {
	keys := make([]string, 0, len(ex))
	for k := range ex {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var feats []byte
	for _, k := range keys {
		var entry []byte
		entry = protowire.AppendTag(entry, mapKey, protowire.BytesType)
		entry = protowire.AppendString(entry, k)
		entry = protowire.AppendTag(entry, mapValue, protowire.BytesType)
		entry = protowire.AppendBytes(entry, encodeFeature(ex[k], unpacked))
		feats = protowire.AppendTag(feats, featuresFeature, protowire.BytesType)
		feats = protowire.AppendBytes(feats, entry)
	}
	var out []byte
	out = protowire.AppendTag(out, exampleFeatures, protowire.BytesType)
	return protowire.AppendBytes(out, feats)
}

func encodeFeature(f Feature, unpacked bool) []byte {
	var list []byte
	var num protowire.Number
	switch f.Kind {
	case FeatureEmpty:
		return nil
	case FeatureBytes:
		num = featureBytesList
		for _, b := range f.Bytes {
			list = protowire.AppendTag(list, listValue, protowire.BytesType)
			list = protowire.AppendBytes(list, b)
		}
	case FeatureFloat:
		num = featureFloatList
		if unpacked {
			for _, v := range f.Floats {
				list = protowire.AppendTag(list, listValue, protowire.Fixed32Type)
				list = protowire.AppendFixed32(list, math.Float32bits(v))
			}
		} else if len(f.Floats) > 0 {
			var p []byte
			for _, v := range f.Floats {
				p = protowire.AppendFixed32(p, math.Float32bits(v))
			}
			list = protowire.AppendTag(list, listValue, protowire.BytesType)
			list = protowire.AppendBytes(list, p)
		}
	case FeatureInt64:
		num = featureInt64List
		if unpacked {
			for _, v := range f.Ints {
				list = protowire.AppendTag(list, listValue, protowire.VarintType)
				list = protowire.AppendVarint(list, uint64(v))
			}
		} else if len(f.Ints) > 0 {
			var p []byte
			for _, v := range f.Ints {
				p = protowire.AppendVarint(p, uint64(v))
			}
			list = protowire.AppendTag(list, listValue, protowire.BytesType)
			list = protowire.AppendBytes(list, p)
		}
	}
	var out []byte
	out = protowire.AppendTag(out, num, protowire.BytesType)
	return protowire.AppendBytes(out, list)
}

// sameExample compares two Examples, floats by bit pattern (NaN-safe)
// and with nil and empty lists equal.
func sameExample(a, b Example) bool {
	if len(a) != len(b) {
		return false
	}
	for k, fa := range a {
		fb, ok := b[k]
		if !ok || fa.Len() != fb.Len() || (fa.Kind != fb.Kind && fa.Len() > 0) {
			return false
		}
		for i := range fa.Bytes {
			if string(fa.Bytes[i]) != string(fb.Bytes[i]) {
				return false
			}
		}
		for i := range fa.Floats {
			if math.Float32bits(fa.Floats[i]) != math.Float32bits(fb.Floats[i]) {
				return false
			}
		}
		for i := range fa.Ints {
			if fa.Ints[i] != fb.Ints[i] {
				return false
			}
		}
	}
	return true
}

func firstRecord(t testing.TB, rel string) []byte {
	t.Helper()
	f, err := os.Open(samplePath(rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := NewTFRecordReader(f, rel).Next()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), b...)
}

func TestParseExampleSample(t *testing.T) {
	ex, err := ParseExample(firstRecord(t, "bridge_dataset/1.0.0/bridge_dataset-train.tfrecord-00000-of-00001"))
	if err != nil {
		t.Fatal(err)
	}
	// Expected kinds and lengths from an independent Python protobuf
	// parse of record 0 (see dataset_test.go for how).
	want := map[string]struct {
		kind FeatureKind
		n    int
	}{
		"episode_metadata/episode_id":   {FeatureInt64, 1},
		"episode_metadata/file_path":    {FeatureBytes, 1},
		"episode_metadata/has_image_0":  {FeatureInt64, 1},
		"episode_metadata/has_image_1":  {FeatureInt64, 1},
		"episode_metadata/has_image_2":  {FeatureInt64, 1},
		"episode_metadata/has_image_3":  {FeatureInt64, 1},
		"episode_metadata/has_language": {FeatureInt64, 1},
		"steps/action":                  {FeatureFloat, 70},
		"steps/discount":                {FeatureFloat, 10},
		"steps/is_first":                {FeatureInt64, 10},
		"steps/is_last":                 {FeatureInt64, 10},
		"steps/is_terminal":             {FeatureInt64, 10},
		"steps/language_embedding":      {FeatureFloat, 5120},
		"steps/language_instruction":    {FeatureBytes, 10},
		"steps/observation/image_0":     {FeatureBytes, 10},
		"steps/observation/image_1":     {FeatureBytes, 10},
		"steps/observation/image_2":     {FeatureBytes, 10},
		"steps/observation/image_3":     {FeatureBytes, 10},
		"steps/observation/state":       {FeatureFloat, 70},
		"steps/reward":                  {FeatureFloat, 10},
	}
	if len(ex) != len(want) {
		t.Errorf("%d features, want %d", len(ex), len(want))
	}
	for k, w := range want {
		f, ok := ex[k]
		if !ok || f.Kind != w.kind || f.Len() != w.n {
			t.Errorf("%s: %v with %d values, want %v with %d", k, f.Kind, f.Len(), w.kind, w.n)
		}
	}
	if got := ex["episode_metadata/episode_id"].Ints[0]; got != 5 {
		t.Errorf("episode_id = %d, want 5", got)
	}
	if got := len(ex["steps/observation/image_0"].Bytes[0]); got != 3807 {
		t.Errorf("image_0[0] is %d bytes, want 3807", got)
	}
	if got := ex["steps/action"].Floats[6]; got != 1 {
		t.Errorf("action[6] = %v, want 1", got)
	}
}

func TestParseExampleUnpacked(t *testing.T) {
	ex := Example{
		"f":     {Kind: FeatureFloat, Floats: []float32{1.5, -2, float32(math.Inf(1)), 0}},
		"i":     {Kind: FeatureInt64, Ints: []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 300}},
		"b":     {Kind: FeatureBytes, Bytes: [][]byte{[]byte("x"), {}, {0xff, 0xd8, 0xff}}},
		"empty": {Kind: FeatureFloat},
		"":      {Kind: FeatureInt64, Ints: []int64{7}},
	}
	for _, unpacked := range []bool{false, true} {
		got, err := ParseExample(encodeExample(ex, unpacked))
		if err != nil {
			t.Fatalf("unpacked=%v: %v", unpacked, err)
		}
		if !sameExample(got, ex) {
			t.Errorf("unpacked=%v: got %+v, want %+v", unpacked, got, ex)
		}
	}
}

func TestParseExampleMerge(t *testing.T) {
	// A list field given twice concatenates; a different oneof member
	// replaces; unknown fields are skipped; a repeated key replaces.
	var f []byte
	f = protowire.AppendTag(f, featureFloatList, protowire.BytesType)
	f = protowire.AppendBytes(f, encodeFeature(Feature{Kind: FeatureFloat, Floats: []float32{1}}, false)[2:])
	f = protowire.AppendTag(f, 99, protowire.VarintType) // unknown
	f = protowire.AppendVarint(f, 5)
	f = protowire.AppendTag(f, featureFloatList, protowire.BytesType)
	f = protowire.AppendBytes(f, encodeFeature(Feature{Kind: FeatureFloat, Floats: []float32{2}}, true)[2:])

	var g []byte
	g = protowire.AppendTag(g, featureInt64List, protowire.BytesType)
	g = protowire.AppendBytes(g, encodeFeature(Feature{Kind: FeatureInt64, Ints: []int64{9}}, false)[2:])
	g = protowire.AppendTag(g, featureBytesList, protowire.BytesType)
	g = protowire.AppendBytes(g, encodeFeature(Feature{Kind: FeatureBytes, Bytes: [][]byte{[]byte("last")}}, false)[2:])

	entry := func(k string, v []byte) []byte {
		var e []byte
		e = protowire.AppendTag(e, mapKey, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, mapValue, protowire.BytesType)
		return protowire.AppendBytes(e, v)
	}
	var feats []byte
	for _, e := range [][]byte{entry("f", f), entry("g", g), entry("dup", encodeFeature(Feature{Kind: FeatureInt64, Ints: []int64{1}}, false)), entry("dup", encodeFeature(Feature{Kind: FeatureInt64, Ints: []int64{2}}, false))} {
		feats = protowire.AppendTag(feats, featuresFeature, protowire.BytesType)
		feats = protowire.AppendBytes(feats, e)
	}
	var b []byte
	b = protowire.AppendTag(b, 7, protowire.Fixed64Type) // unknown field of Example
	b = protowire.AppendFixed64(b, 1)
	b = protowire.AppendTag(b, exampleFeatures, protowire.BytesType)
	b = protowire.AppendBytes(b, feats)

	got, err := ParseExample(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Example{
		"f":   {Kind: FeatureFloat, Floats: []float32{1, 2}},
		"g":   {Kind: FeatureBytes, Bytes: [][]byte{[]byte("last")}},
		"dup": {Kind: FeatureInt64, Ints: []int64{2}},
	}
	if !sameExample(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseExampleMalformed(t *testing.T) {
	valid := encodeExample(Example{"steps/action": {Kind: FeatureFloat, Floats: []float32{1, 2}}}, false)
	withFeature := func(feature []byte) []byte {
		var e []byte
		e = protowire.AppendTag(e, mapKey, protowire.BytesType)
		e = protowire.AppendString(e, "k")
		e = protowire.AppendTag(e, mapValue, protowire.BytesType)
		e = protowire.AppendBytes(e, feature)
		var fs []byte
		fs = protowire.AppendTag(fs, featuresFeature, protowire.BytesType)
		fs = protowire.AppendBytes(fs, e)
		var b []byte
		b = protowire.AppendTag(b, exampleFeatures, protowire.BytesType)
		return protowire.AppendBytes(b, fs)
	}
	list := func(num protowire.Number, body []byte) []byte {
		var f []byte
		f = protowire.AppendTag(f, num, protowire.BytesType)
		return protowire.AppendBytes(f, body)
	}
	tests := []struct {
		name string
		in   []byte
	}{
		{"truncated", valid[:len(valid)-3]},
		{"bad tag varint", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"field number zero", []byte{0x02, 0x00}},
		{"features as varint", []byte{0x08, 0x01}},
		{"length past end", []byte{0x0a, 0x7f, 0x00}},
		{"unterminated group", []byte{0x1b}},
		{"map entry as varint", []byte{0x0a, 0x02, 0x08, 0x01}},
		{"float list as varint", withFeature([]byte{0x10, 0x01})},
		{"packed floats not a multiple of 4", withFeature(list(featureFloatList, []byte{0x0a, 0x03, 1, 2, 3}))},
		{"float value as varint", withFeature(list(featureFloatList, []byte{0x08, 0x01}))},
		{"int64 value as fixed32", withFeature(list(featureInt64List, []byte{0x0d, 1, 2, 3, 4}))},
		{"packed varint cut", withFeature(list(featureInt64List, []byte{0x0a, 0x01, 0x80}))},
		{"bytes value as varint", withFeature(list(featureBytesList, []byte{0x08, 0x01}))},
		{"bytes value past end", withFeature(list(featureBytesList, []byte{0x0a, 0x09, 'a'}))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseExample(tc.in)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseExample = %v, want an error wrapping ErrCorrupt", err)
			}
		})
	}
}

// BenchmarkParseExample decodes the first episode of the bridge_dataset
// sample (a real TFDS record: images, actions, instructions).
func BenchmarkParseExample(b *testing.B) {
	rec := firstRecord(b, bridgeTrain)
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if _, err := ParseExample(rec); err != nil {
			b.Fatal(err)
		}
	}
}
