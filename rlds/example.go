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
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return corruptf("example: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if num == exampleFeatures {
			if typ != protowire.BytesType {
				return corruptf("example: field features has wire type %d, want %d", typ, protowire.BytesType)
			}
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return corruptf("example: features: %v", protowire.ParseError(n))
			}
			b = b[n:]
			if err := parseFeatures(ex, v); err != nil {
				return err
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return corruptf("example: field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

func parseFeatures(ex Example, b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return corruptf("example features: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if num == featuresFeature {
			if typ != protowire.BytesType {
				return corruptf("example features: map entry has wire type %d, want %d", typ, protowire.BytesType)
			}
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return corruptf("example features: map entry: %v", protowire.ParseError(n))
			}
			b = b[n:]
			if err := parseMapEntry(ex, v); err != nil {
				return err
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return corruptf("example features: field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

func parseMapEntry(ex Example, b []byte) error {
	var key string
	var val []byte
	var haveVal bool
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return corruptf("example feature entry: %v", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == mapKey && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return corruptf("example feature key: %v", protowire.ParseError(n))
			}
			key, b = string(v), b[n:]
		case num == mapValue && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return corruptf("example feature %q: %v", key, protowire.ParseError(n))
			}
			// A map entry's value message may in principle come in parts;
			// they merge, so keep the last and fold earlier ones below.
			if haveVal {
				val = append(append([]byte(nil), val...), v...)
			} else {
				val = v
			}
			haveVal, b = true, b[n:]
		case num == mapKey || num == mapValue:
			return corruptf("example feature entry: field %d has wire type %d, want %d", num, typ, protowire.BytesType)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return corruptf("example feature entry: field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
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
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return corruptf("%v", protowire.ParseError(n))
		}
		b = b[n:]
		var kind FeatureKind
		switch num {
		case featureBytesList:
			kind = FeatureBytes
		case featureFloatList:
			kind = FeatureFloat
		case featureInt64List:
			kind = FeatureInt64
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return corruptf("field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		if typ != protowire.BytesType {
			return corruptf("%s has wire type %d, want %d", kind, typ, protowire.BytesType)
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return corruptf("%s: %v", kind, protowire.ParseError(n))
		}
		b = b[n:]
		if f.Kind != kind {
			// A oneof keeps the member set last.
			*f = Feature{Kind: kind}
		}
		var err error
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
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, corruptf("bytes_list: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if num != listValue {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, corruptf("bytes_list: field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		if typ != protowire.BytesType {
			return nil, corruptf("bytes_list value has wire type %d, want %d", typ, protowire.BytesType)
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, corruptf("bytes_list value: %v", protowire.ParseError(n))
		}
		b = b[n:]
		out = append(out, v[:len(v):len(v)])
	}
	return out, nil
}

func parseFloatList(out []float32, b []byte) ([]float32, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, corruptf("float_list: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if num != listValue {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, corruptf("float_list: field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		switch typ {
		case protowire.BytesType: // packed
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, corruptf("float_list packed value: %v", protowire.ParseError(n))
			}
			b = b[n:]
			if len(v)%4 != 0 {
				return nil, corruptf("float_list packed value is %d bytes, not a multiple of 4", len(v))
			}
			out = growFloats(out, len(v)/4)
			for i := 0; i < len(v); i += 4 {
				u := uint32(v[i]) | uint32(v[i+1])<<8 | uint32(v[i+2])<<16 | uint32(v[i+3])<<24
				out = append(out, math.Float32frombits(u))
			}
		case protowire.Fixed32Type: // unpacked
			u, n := protowire.ConsumeFixed32(b)
			if n < 0 {
				return nil, corruptf("float_list value: %v", protowire.ParseError(n))
			}
			b = b[n:]
			out = append(out, math.Float32frombits(u))
		default:
			return nil, corruptf("float_list value has wire type %d, want %d or %d", typ, protowire.Fixed32Type, protowire.BytesType)
		}
	}
	return out, nil
}

func parseInt64List(out []int64, b []byte) ([]int64, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, corruptf("int64_list: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if num != listValue {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, corruptf("int64_list: field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		switch typ {
		case protowire.BytesType: // packed
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, corruptf("int64_list packed value: %v", protowire.ParseError(n))
			}
			b = b[n:]
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
		case protowire.VarintType: // unpacked
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, corruptf("int64_list value: %v", protowire.ParseError(n))
			}
			b = b[n:]
			out = append(out, int64(x))
		default:
			return nil, corruptf("int64_list value has wire type %d, want %d or %d", typ, protowire.VarintType, protowire.BytesType)
		}
	}
	return out, nil
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
