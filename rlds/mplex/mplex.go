// Package mplex reads and writes the MessagePack forms of the JSON wire
// messages: maps with string keys for the JSON's objects, refused when
// a key is unknown or given twice; numbers in any MessagePack integer
// or float form; times as MessagePack timestamps or RFC 3339 strings;
// nil for an absent value, as null is in the JSON; strings with invalid
// UTF-8 read as encoding/json reads them. The RLDS wire decoder (rlds),
// the CMS span decoder (cms) and the planner's request decoder use it,
// beside jsonlex (and encoding/json) for their JSON.
//
// A Reader's errors name where they arose (the keys and indices on the
// way, outermost first), for the caller to wrap with its own sentinel.
package mplex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tinylib/msgp/msgp"
)

// IsMap reports whether b starts with a MessagePack map: what a
// msgpack wire message starts with, and no JSON text does.
func IsMap(b []byte) bool {
	return len(b) > 0 && (b[0]&0xf0 == 0x80 || b[0] == 0xde || b[0] == 0xdf)
}

// MaxDepth bounds the nesting of the free-form values a Reader reads
// (Value), as encoding/json's own limit does for the JSON.
const MaxDepth = 64

// ErrUnknownKey is what an Object callback returns for a key the
// message does not have.
var ErrUnknownKey = errors.New("unknown field")

// ErrNonFinite marks a NaN or infinite number where the JSON could not
// carry one (Value).
var ErrNonFinite = errors.New("non-finite number")

// Reader reads MessagePack values from B, advancing it.
type Reader struct{ B []byte }

// Done reports an error if anything follows the value read.
func (r *Reader) Done() error {
	if len(r.B) > 0 {
		return errors.New("trailing data after the message")
	}
	return nil
}

// Type is the type of the next value.
func (r *Reader) Type() msgp.Type { return msgp.NextType(r.B) }

// Object reads a map, calling fn for each key with the reader at its
// value; fn reads the value. A key given twice is an error, and errors
// name the key. nil is an empty object. The key fn gets is the message's
// bytes, not a copy: fn may compare or quote it, and must clone one it
// keeps.
func (r *Reader) Object(fn func(key string) error) error {
	if r.Null() {
		return nil
	}
	n, rest, err := msgp.ReadMapHeaderBytes(r.B)
	if err != nil {
		return err
	}
	r.B = rest
	// The keys so far: a message's objects have a few, so a scan of
	// them serves; past 16 a map does.
	var seen [16]string
	var more map[string]bool
	for i := range int(n) {
		k, rest, err := msgp.ReadStringZC(r.B)
		if err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
		r.B = rest
		key := unsafe.String(unsafe.SliceData(k), len(k))
		twice := more != nil && more[key]
		for _, s := range seen[:min(i, len(seen))] {
			twice = twice || s == key
		}
		if twice {
			return fmt.Errorf("%s: given twice", key)
		}
		switch {
		case i < len(seen):
			seen[i] = key
		case more == nil:
			more = map[string]bool{key: true}
		default:
			more[key] = true
		}
		if err := fn(key); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// Null consumes a nil, reporting whether there was one.
func (r *Reader) Null() bool {
	if len(r.B) > 0 && r.B[0] == 0xc0 {
		r.B = r.B[1:]
		return true
	}
	return false
}

// Opt reads an optional value: nil leaves *p nil, as the JSON's null
// leaves a pointer field; anything else is read by read into a new *p.
func Opt[T any](r *Reader, p **T, read func() (T, error)) error {
	if r.Null() {
		return nil
	}
	v, err := read()
	*p = &v
	return err
}

// OptInto reads an optional object: nil leaves *p nil; anything else is
// read by read into a new *p.
func OptInto[T any](r *Reader, p **T, read func(*T) error) error {
	if r.Null() {
		return nil
	}
	*p = new(T)
	return read(*p)
}

// Str reads a string (nil: ""), each byte of invalid UTF-8 in it
// replaced by U+FFFD, as encoding/json decodes the JSON's.
func (r *Reader) Str() (string, error) {
	if r.Null() {
		return "", nil
	}
	s, rest, err := msgp.ReadStringBytes(r.B)
	if err != nil {
		return "", err
	}
	r.B = rest
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // the conversion replaces byte by byte
	}
	return s, nil
}

// StrTo reads a string into s.
func (r *Reader) StrTo(s *string) (err error) {
	*s, err = r.Str()
	return err
}

// Strs reads an array of strings (nil: none).
func (r *Reader) Strs() ([]string, error) {
	n, err := r.Array()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = r.Str(); err != nil {
			return nil, fmt.Errorf("%d: %w", i, err)
		}
	}
	return out, nil
}

// Array reads an array's header: its length, -1 for nil.
func (r *Reader) Array() (int, error) {
	if r.Null() {
		return -1, nil
	}
	n, rest, err := msgp.ReadArrayHeaderBytes(r.B)
	if err != nil {
		return 0, err
	}
	if int(n) > len(rest) { // every element takes a byte at least
		return 0, msgp.ErrShortBytes
	}
	r.B = rest
	return int(n), nil
}

// Number reads any MessagePack integer or float.
func (r *Reader) Number() (float64, error) {
	v, rest, err := readNumber(r.B)
	if err != nil {
		return 0, err
	}
	r.B = rest
	return v, nil
}

// readNumber reads a MessagePack integer or float from b, inline for
// the common forms.
func readNumber(b []byte) (float64, []byte, error) {
	if len(b) == 0 {
		return 0, b, msgp.ErrShortBytes
	}
	switch c := b[0]; {
	case c <= 0x7f:
		return float64(c), b[1:], nil
	case c >= 0xe0:
		return float64(int8(c)), b[1:], nil
	case c == 0xca && len(b) >= 5:
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b[1:]))), b[5:], nil
	case c == 0xcb && len(b) >= 9:
		return math.Float64frombits(binary.BigEndian.Uint64(b[1:])), b[9:], nil
	case c == 0xd0 && len(b) >= 2:
		return float64(int8(b[1])), b[2:], nil
	case c == 0xcc && len(b) >= 2:
		return float64(b[1]), b[2:], nil
	}
	switch msgp.NextType(b) {
	case msgp.IntType:
		i, rest, err := msgp.ReadInt64Bytes(b)
		return float64(i), rest, err
	case msgp.UintType:
		u, rest, err := msgp.ReadUint64Bytes(b)
		return float64(u), rest, err
	}
	v, rest, err := msgp.ReadFloat64Bytes(b)
	if err != nil {
		return 0, b, fmt.Errorf("want a number: %w", err)
	}
	return v, rest, nil
}

// Numbers reads an array of numbers (nil: none).
func (r *Reader) Numbers() ([]float64, error) {
	n, err := r.Array()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]float64, n)
	for i := range out {
		if out[i], r.B, err = readNumber(r.B); err != nil {
			return nil, fmt.Errorf("%d: %w", i, err)
		}
	}
	return out, nil
}

// Vector reads an array of numbers as float32s (nil: none).
func (r *Reader) Vector() ([]float32, error) {
	n, err := r.Array()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]float32, n)
	b := r.B
	for i := range out {
		if len(b) == 0 {
			return nil, fmt.Errorf("%d: %w", i, msgp.ErrShortBytes)
		}
		// The forms a vector's numbers take, inline.
		switch c := b[0]; {
		case c <= 0x7f:
			out[i], b = float32(c), b[1:]
			continue
		case c >= 0xe0:
			out[i], b = float32(int8(c)), b[1:]
			continue
		case c == 0xca && len(b) >= 5:
			out[i], b = math.Float32frombits(binary.BigEndian.Uint32(b[1:])), b[5:]
			continue
		}
		var v float64
		if v, b, err = readNumber(b); err != nil {
			return nil, fmt.Errorf("%d: %w", i, err)
		}
		out[i] = float32(v)
	}
	r.B = b
	return out, nil
}

// Int reads a MessagePack integer that fits an int.
func (r *Reader) Int() (int, error) {
	if msgp.NextType(r.B) == msgp.UintType {
		u, rest, err := msgp.ReadUint64Bytes(r.B)
		if err != nil {
			return 0, err
		}
		if u > math.MaxInt {
			return 0, fmt.Errorf("%d overflows an int", u)
		}
		r.B = rest
		return int(u), nil
	}
	i, rest, err := msgp.ReadInt64Bytes(r.B)
	if err != nil {
		return 0, err
	}
	if int64(int(i)) != i {
		return 0, fmt.Errorf("%d overflows an int", i)
	}
	r.B = rest
	return int(i), nil
}

// Ints reads an array of integers (nil: none).
func (r *Reader) Ints() ([]int, error) {
	n, err := r.Array()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]int, n)
	for i := range out {
		if out[i], err = r.Int(); err != nil {
			return nil, fmt.Errorf("%d: %w", i, err)
		}
	}
	return out, nil
}

// Bool reads a bool (nil: false).
func (r *Reader) Bool() (bool, error) {
	if r.Null() {
		return false, nil
	}
	v, rest, err := msgp.ReadBoolBytes(r.B)
	if err != nil {
		return false, err
	}
	r.B = rest
	return v, nil
}

// Time reads a MessagePack timestamp (in UTC) or an RFC 3339 string;
// nil is the zero time. A year outside 0-9999, which RFC 3339 cannot
// write, is an error.
func (r *Reader) Time() (time.Time, error) {
	if r.Null() {
		return time.Time{}, nil
	}
	if msgp.NextType(r.B) == msgp.StrType {
		s, err := r.Str()
		if err != nil {
			return time.Time{}, err
		}
		return time.Parse(time.RFC3339Nano, s)
	}
	t, rest, err := msgp.ReadTimeUTCBytes(r.B)
	if err != nil {
		return time.Time{}, fmt.Errorf("want a timestamp or an RFC 3339 string: %w", err)
	}
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, fmt.Errorf("year %d is outside 0-9999", y)
	}
	r.B = rest
	return t, nil
}

// Metadata reads a map of any values (Value; nil: none).
func (r *Reader) Metadata() (map[string]any, error) {
	if r.Null() {
		return nil, nil
	}
	if t := msgp.NextType(r.B); t != msgp.MapType {
		return nil, fmt.Errorf("want a map, got %v", t)
	}
	v, err := r.Value(0)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// Value reads any value as the JSON decoding would hold it: numbers
// float64 (NaN and the infinities refused), maps with string keys
// map[string]any, arrays []any, timestamps RFC 3339 strings; bins are
// []byte. depth is the value's nesting so far.
func (r *Reader) Value(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("nested deeper than %d", MaxDepth)
	}
	switch t := msgp.NextType(r.B); t {
	case msgp.MapType:
		n, rest, err := msgp.ReadMapHeaderBytes(r.B)
		if err != nil {
			return nil, err
		}
		if int(n) > len(rest)/2 {
			return nil, msgp.ErrShortBytes
		}
		r.B = rest
		m := make(map[string]any, n)
		for range n {
			k, err := r.Str()
			if err != nil {
				return nil, err
			}
			if m[k], err = r.Value(depth + 1); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
		}
		return m, nil
	case msgp.ArrayType:
		n, err := r.Array()
		if err != nil {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = r.Value(depth + 1); err != nil {
				return nil, fmt.Errorf("%d: %w", i, err)
			}
		}
		return a, nil
	case msgp.IntType, msgp.UintType, msgp.Float32Type, msgp.Float64Type:
		v, err := r.Number()
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			err = fmt.Errorf("%w: %v", ErrNonFinite, v) // the JSON has no such numbers
		}
		return v, err
	case msgp.StrType:
		return r.Str()
	case msgp.BinType:
		v, rest, err := msgp.ReadBytesBytes(r.B, nil)
		r.B = rest
		return v, err
	case msgp.BoolType:
		return r.Bool()
	case msgp.NilType:
		r.B = r.B[1:]
		return nil, nil
	case msgp.ExtensionType, msgp.TimeType:
		t, err := r.Time()
		return t.Format(time.RFC3339Nano), err
	default:
		return nil, fmt.Errorf("unexpected %v", t)
	}
}

// Bytes reads a bin, or a string's bytes (nil: none).
func (r *Reader) Bytes() (v []byte, err error) {
	switch msgp.NextType(r.B) {
	case msgp.NilType:
		r.B = r.B[1:]
	case msgp.StrType:
		v, r.B, err = msgp.ReadStringAsBytes(r.B, nil)
	default:
		v, r.B, err = msgp.ReadBytesBytes(r.B, nil)
	}
	return v, err
}

// Writer writes MessagePack maps whose header is written once their
// fields are counted (Object), and the wire messages' values.
type Writer struct {
	B      []byte
	fields uint32
}

// Object writes a map whose fields fill writes with Key and a value.
// It reserves the largest header (map32) and fixes it up after.
func (w *Writer) Object(fill func()) {
	at, outer := len(w.B), w.fields
	w.B = append(w.B, 0xdf, 0, 0, 0, 0)
	w.fields = 0
	fill()
	n := w.fields
	w.fields = outer
	if n < 16 { // a fixmap: shift the fields back over the spare bytes
		w.B[at] = 0x80 | byte(n)
		w.B = append(w.B[:at+1], w.B[at+5:]...)
		return
	}
	binary.BigEndian.PutUint32(w.B[at+1:], n)
}

// Key writes a field's key.
func (w *Writer) Key(k string) {
	w.B = msgp.AppendString(w.B, k)
	w.fields++
}

// Field writes a string field.
func (w *Writer) Field(k, v string) {
	w.Key(k)
	w.B = msgp.AppendString(w.B, v)
}

// OptField writes a string field unless v is empty.
func (w *Writer) OptField(k, v string) {
	if v != "" {
		w.Field(k, v)
	}
}

// Strs writes an array of strings field unless ss is empty.
func (w *Writer) Strs(k string, ss []string) {
	if len(ss) == 0 {
		return
	}
	w.Key(k)
	w.B = msgp.AppendArrayHeader(w.B, uint32(len(ss)))
	for _, s := range ss {
		w.B = msgp.AppendString(w.B, s)
	}
}

// Time writes t as a MessagePack timestamp.
func (w *Writer) Time(t time.Time) { w.B = msgp.AppendTimeExt(w.B, t) }

// Number writes v as an integer when it is one, else as a float32 when
// that holds it exactly, else as a float64: the shortest exact form.
func (w *Writer) Number(v float64) {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1<<53:
		w.B = msgp.AppendInt64(w.B, int64(v))
	case float64(float32(v)) == v:
		w.B = msgp.AppendFloat32(w.B, float32(v))
	default:
		w.B = msgp.AppendFloat64(w.B, v)
	}
}

// Vector writes a field holding v's numbers, each in its shortest exact
// form, unless v is empty.
func (w *Writer) Vector(k string, v []float32) {
	if len(v) == 0 {
		return
	}
	w.Key(k)
	w.B = msgp.AppendArrayHeader(w.B, uint32(len(v)))
	for _, x := range v {
		w.Number(float64(x))
	}
}
