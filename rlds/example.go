package rlds

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// FeatureKind says which list a tf.train.Feature holds.
type FeatureKind uint8

// The kinds of a tf.train.Feature's oneof. FeatureEmpty is a Feature with
// none set, which TensorFlow writes for an empty list of unknown type.
const (
	FeatureEmpty FeatureKind = iota
	FeatureBytes
	FeatureFloat
	FeatureInt64
)

func (k FeatureKind) String() string {
	switch k {
	case FeatureBytes:
		return "bytes_list"
	case FeatureFloat:
		return "float_list"
	case FeatureInt64:
		return "int64_list"
	default:
		return "empty"
	}
}

// Feature is one decoded tf.train.Feature: exactly the list its Kind
// names is set.
type Feature struct {
	Kind   FeatureKind
	Bytes  [][]byte
	Floats []float32
	Ints   []int64
}

// Len is the number of values in the feature's list.
func (f Feature) Len() int {
	switch f.Kind {
	case FeatureBytes:
		return len(f.Bytes)
	case FeatureFloat:
		return len(f.Floats)
	case FeatureInt64:
		return len(f.Ints)
	}
	return 0
}

// Example is a decoded tf.train.Example: its features by key. Keys of
// nested TFDS features are joined with "/" ("steps/observation/image").
type Example map[string]Feature

// Field numbers of tf.train.Example and friends (example.proto,
// feature.proto).
const (
	exampleFeatures    protowire.Number = 1 // Example.features: Features
	featuresFeature    protowire.Number = 1 // Features.feature: map<string, Feature>
	mapKey             protowire.Number = 1
	mapValue           protowire.Number = 2
	featureBytesList   protowire.Number = 1 // Feature.bytes_list: BytesList
	featureFloatList   protowire.Number = 2 // Feature.float_list: FloatList
	featureInt64List   protowire.Number = 3 // Feature.int64_list: Int64List
	listValue          protowire.Number = 1 // {Bytes,Float,Int64}List.value: repeated
	maxExampleFeatures                  = 1 << 20
)

// ParseExample decodes a serialized tf.train.Example. Bytes values alias
// b: copy them if b is reused (a TFRecordReader's buffer is). Repeated
// floats and int64s may be packed or not. Unknown fields are skipped, as
// protobuf requires; malformed input is an error wrapping ErrCorrupt.
func ParseExample(b []byte) (Example, error) {
	ex := make(Example)
	if err := parseExampleInto(ex, b); err != nil {
		return nil, err
	}
	return ex, nil
}

func parseExampleInto(ex Example, b []byte) error {
	return eachMessage(message{b: b, what: "example"}, exampleFeatures, "example: field features", "example: features", ex, parseFeatures)
}

func parseFeatures(ex Example, b []byte) error {
	return eachMessage(message{b: b, what: "example features"}, featuresFeature, "example features: map entry", "example features: map entry", ex, parseMapEntry)
}

// eachMessage calls parse with ex for each value of m's field num, a
// message (length-delimited), passing over the other fields. field and
// value name the field in errors (message.bytes).
func eachMessage(m message, num protowire.Number, field, value string, ex Example, parse func(Example, []byte) error) error {
	for m.more() {
		n, typ, err := m.tag()
		if err != nil {
			return err
		}
		if n != num {
			if err := m.skip(n, typ); err != nil {
				return err
			}
			continue
		}
		v, err := m.bytes(typ, field, value)
		if err != nil {
			return err
		}
		if err := parse(ex, v); err != nil {
			return err
		}
	}
	return nil
}

func parseMapEntry(ex Example, b []byte) error {
	var key string
	var val []byte
	var haveVal bool
	m := message{b: b, what: "example feature entry"}
	for m.more() {
		num, typ, err := m.tag()
		if err != nil {
			return err
		}
		switch {
		case num == mapKey && typ == protowire.BytesType:
			v, err := m.bytes(typ, "", "example feature key")
			if err != nil {
				return err
			}
			key = string(v)
		case num == mapValue && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(m.b)
			if n < 0 {
				return corruptf("example feature %q: %v", key, protowire.ParseError(n))
			}
			m.b = m.b[n:]
			// A map entry's value message may in principle come in parts;
			// they merge, so keep the last and fold earlier ones below.
			if haveVal {
				val = append(append([]byte(nil), val...), v...)
			} else {
				val = v
			}
			haveVal = true
		case num == mapKey || num == mapValue:
			return corruptf("example feature entry: field %d has wire type %d, want %d", num, typ, protowire.BytesType)
		default:
			if err := m.skip(num, typ); err != nil {
				return err
			}
		}
	}
	if _, dup := ex[key]; !dup && len(ex) >= maxExampleFeatures {
		return corruptf("example holds more than %d features", maxExampleFeatures)
	}
	// A repeated key replaces the earlier value (protobuf map semantics).
	var f Feature
	if err := parseFeature(&f, val); err != nil {
		return errorForKey(key, err)
	}
	ex[key] = f
	return nil
}

func errorForKey(key string, err error) error {
	return corruptf("example feature %q: %v", key, unwrapCorrupt(err))
}

// unwrapCorrupt strips the ErrCorrupt prefix so that wrapping it again
// does not repeat it.
func unwrapCorrupt(err error) string {
	s := err.Error()
	p := ErrCorrupt.Error() + ": "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

func parseFeature(f *Feature, b []byte) error {
	m := message{b: b}
	for m.more() {
		num, typ, err := m.tag()
		if err != nil {
			return err
		}
		var kind FeatureKind
		switch num {
		case featureBytesList:
			kind = FeatureBytes
		case featureFloatList:
			kind = FeatureFloat
		case featureInt64List:
			kind = FeatureInt64
		default:
			if err := m.skip(num, typ); err != nil {
				return err
			}
			continue
		}
		v, err := m.bytes(typ, kind.String(), kind.String())
		if err != nil {
			return err
		}
		if f.Kind != kind {
			// A oneof keeps the member set last.
			*f = Feature{Kind: kind}
		}
		switch kind {
		case FeatureBytes:
			f.Bytes, err = parseBytesList(f.Bytes, v)
		case FeatureFloat:
			f.Floats, err = parseFloatList(f.Floats, v)
		case FeatureInt64:
			f.Ints, err = parseInt64List(f.Ints, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func parseBytesList(out [][]byte, b []byte) ([][]byte, error) {
	m := message{b: b, what: "bytes_list"}
	for m.more() {
		num, typ, err := m.tag()
		if err != nil {
			return nil, err
		}
		if num != listValue {
			if err := m.skip(num, typ); err != nil {
				return nil, err
			}
			continue
		}
		v, err := m.bytes(typ, "bytes_list value", "bytes_list value")
		if err != nil {
			return nil, err
		}
		out = append(out, v[:len(v):len(v)])
	}
	return out, nil
}

func parseFloatList(out []float32, b []byte) ([]float32, error) {
	return parseNumbers(out, b, "float_list", protowire.Fixed32Type, appendPackedFloats, consumeFloat)
}

func parseInt64List(out []int64, b []byte) ([]int64, error) {
	return parseNumbers(out, b, "int64_list", protowire.VarintType, appendPackedInts, consumeInt)
}

// parseNumbers reads a FloatList or an Int64List (what) into out: its
// values packed (a length-delimited run, appendPacked) or one at a time
// (of wire type scalar, consume), in any mix.
func parseNumbers[T any](out []T, b []byte, what string, scalar protowire.Type,
	appendPacked func([]T, []byte) ([]T, error), consume func([]byte) (T, int)) ([]T, error) {
	m := message{b: b, what: what}
	for m.more() {
		num, typ, err := m.tag()
		if err != nil {
			return nil, err
		}
		if num != listValue {
			if err := m.skip(num, typ); err != nil {
				return nil, err
			}
			continue
		}
		switch typ {
		case protowire.BytesType: // packed
			v, n := protowire.ConsumeBytes(m.b)
			if n < 0 {
				return nil, corruptf("%s packed value: %v", what, protowire.ParseError(n))
			}
			m.b = m.b[n:]
			if out, err = appendPacked(out, v); err != nil {
				return nil, err
			}
		case scalar: // unpacked
			x, n := consume(m.b)
			if n < 0 {
				return nil, corruptf("%s value: %v", what, protowire.ParseError(n))
			}
			m.b = m.b[n:]
			out = append(out, x)
		default:
			return nil, corruptf("%s value has wire type %d, want %d or %d", what, typ, scalar, protowire.BytesType)
		}
	}
	return out, nil
}

func appendPackedFloats(out []float32, v []byte) ([]float32, error) {
	if len(v)%4 != 0 {
		return nil, corruptf("float_list packed value is %d bytes, not a multiple of 4", len(v))
	}
	out = growFloats(out, len(v)/4)
	for i := 0; i < len(v); i += 4 {
		u := uint32(v[i]) | uint32(v[i+1])<<8 | uint32(v[i+2])<<16 | uint32(v[i+3])<<24
		out = append(out, math.Float32frombits(u))
	}
	return out, nil
}

func consumeFloat(b []byte) (float32, int) {
	u, n := protowire.ConsumeFixed32(b)
	return math.Float32frombits(u), n
}

func appendPackedInts(out []int64, v []byte) ([]int64, error) {
	// Each varint ends in exactly one byte below 0x80.
	count := 0
	for _, c := range v {
		if c < 0x80 {
			count++
		}
	}
	out = growInts(out, count)
	for len(v) > 0 {
		x, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return nil, corruptf("int64_list packed value: %v", protowire.ParseError(n))
		}
		v = v[n:]
		out = append(out, int64(x))
	}
	return out, nil
}

func consumeInt(b []byte) (int64, int) {
	x, n := protowire.ConsumeVarint(b)
	return int64(x), n
}

// message reads the fields of a protobuf message in order: more, then
// tag, then the field's value (bytes) or past it (skip). what names the
// message in errors ("" for none).
type message struct {
	b    []byte
	what string
}

func (m *message) more() bool { return len(m.b) > 0 }

// tag reads the next field's number and wire type.
func (m *message) tag() (protowire.Number, protowire.Type, error) {
	num, typ, n := protowire.ConsumeTag(m.b)
	if n < 0 {
		return 0, 0, corruptf("%s%v", m.prefix(), protowire.ParseError(n))
	}
	m.b = m.b[n:]
	return num, typ, nil
}

// skip passes over the value of a field the reader does not read, as
// protobuf requires of unknown fields.
func (m *message) skip(num protowire.Number, typ protowire.Type) error {
	n := protowire.ConsumeFieldValue(num, typ, m.b)
	if n < 0 {
		return corruptf("%sfield %d: %v", m.prefix(), num, protowire.ParseError(n))
	}
	m.b = m.b[n:]
	return nil
}

// bytes reads a length-delimited value, that of a field of wire type
// typ: another wire type is an error naming the field (field), a value
// cut short one naming it too (value).
func (m *message) bytes(typ protowire.Type, field, value string) ([]byte, error) {
	if typ != protowire.BytesType {
		return nil, corruptf("%s has wire type %d, want %d", field, typ, protowire.BytesType)
	}
	v, n := protowire.ConsumeBytes(m.b)
	if n < 0 {
		return nil, corruptf("%s: %v", value, protowire.ParseError(n))
	}
	m.b = m.b[n:]
	return v, nil
}

func (m *message) prefix() string {
	if m.what == "" {
		return ""
	}
	return m.what + ": "
}

func growFloats(s []float32, n int) []float32 {
	if cap(s)-len(s) >= n {
		return s
	}
	t := make([]float32, len(s), len(s)+n)
	copy(t, s)
	return t
}

func growInts(s []int64, n int) []int64 {
	if cap(s)-len(s) >= n {
		return s
	}
	t := make([]int64, len(s), len(s)+n)
	copy(t, s)
	return t
}
