// Package jsonlex reads the plain JSON that senders write, fast, for
// decoders that fall back to encoding/json on anything else.
//
// It accepts only that plain form: strings without escapes, no nulls,
// no repeated keys (the caller tracks keys with [Seen]). Anything else
// makes a method return false and the caller falls back to
// encoding/json, which either decodes it the same way or names the
// error; so the lexer never has to explain a failure, and never accepts
// what encoding/json would refuse. The RLDS wire decoder (rlds) and the
// planner's request decoder use it: encoding/json spends most of their
// time on reflection and on vectors of numbers as text.
package jsonlex

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// Lexer reads one JSON value.
type Lexer struct {
	b []byte
	i int
}

// New returns a lexer at the start of b.
func New(b []byte) Lexer { return Lexer{b: b} }

// AtEnd reports whether only white space is left (a NUL byte is not
// the end: encoding/json calls it trailing data).
func (l *Lexer) AtEnd() bool {
	l.ws()
	return l.i == len(l.b)
}

func (l *Lexer) ws() {
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\t', '\n', '\r':
			l.i++
		default:
			return
		}
	}
}

// Peek is the next byte after white space, 0 at the end.
func (l *Lexer) Peek() byte {
	l.ws()
	if l.i < len(l.b) {
		return l.b[l.i]
	}
	return 0
}

// Eat reads c, the next byte after white space, or reports false.
func (l *Lexer) Eat(c byte) bool {
	if l.Peek() != c {
		return false
	}
	l.i++
	return true
}

// StrBytes reads a string without escapes, returning its bytes (valid
// UTF-8) without copying them.
func (l *Lexer) StrBytes() ([]byte, bool) {
	if !l.Eat('"') {
		return nil, false
	}
	start, ascii := l.i, true
	for ; l.i < len(l.b); l.i++ {
		c := l.b[l.i]
		switch {
		case c == '"':
			s := l.b[start:l.i]
			l.i++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// Str reads a string without escapes.
func (l *Lexer) Str() (string, bool) {
	s, ok := l.StrBytes()
	return string(s), ok
}

// Bool reads true or false.
func (l *Lexer) Bool() (bool, bool) {
	switch l.Peek() {
	case 't':
		if bytes.HasPrefix(l.b[l.i:], []byte("true")) {
			l.i += 4
			return true, true
		}
	case 'f':
		if bytes.HasPrefix(l.b[l.i:], []byte("false")) {
			l.i += 5
			return false, true
		}
	}
	return false, false
}

// Number reads a number literal as JSON's grammar has it, reporting
// whether it is a plain integer (no fraction, no exponent).
func (l *Lexer) Number() (lit []byte, integer, ok bool) {
	l.ws()
	start := l.i
	if l.i < len(l.b) && l.b[l.i] == '-' {
		l.i++
	}
	digits := func() int {
		n := 0
		for l.i < len(l.b) && l.b[l.i] >= '0' && l.b[l.i] <= '9' {
			l.i++
			n++
		}
		return n
	}
	first := l.i
	if n := digits(); n == 0 || n > 1 && l.b[first] == '0' {
		return nil, false, false
	}
	integer = true
	if l.i < len(l.b) && l.b[l.i] == '.' {
		l.i++
		if digits() == 0 {
			return nil, false, false
		}
		integer = false
	}
	if l.i < len(l.b) && (l.b[l.i] == 'e' || l.b[l.i] == 'E') {
		l.i++
		if l.i < len(l.b) && (l.b[l.i] == '+' || l.b[l.i] == '-') {
			l.i++
		}
		if digits() == 0 {
			return nil, false, false
		}
		integer = false
	}
	return l.b[start:l.i], integer, true
}

// smallInt is the value of an integer literal of at most digits digits,
// ok false when it has more (or is -0, which is not an int's zero as a
// float).
func smallInt(lit []byte, digits int) (int64, bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	if len(lit) > digits {
		return 0, false
	}
	var n int64
	for _, c := range lit {
		n = n*10 + int64(c-'0')
	}
	if neg {
		if n == 0 {
			return 0, false
		}
		n = -n
	}
	return n, true
}

// Int reads an integer literal that an int64 holds.
func (l *Lexer) Int() (int, bool) {
	lit, integer, ok := l.Number()
	if !ok || !integer {
		return 0, false
	}
	if n, ok := smallInt(lit, 18); ok {
		return int(n), true
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	return int(n), err == nil
}

// Float reads a number as encoding/json does (strconv.ParseFloat) into
// a float of bits 32 or 64, bit for bit. A number of at most 15
// significant digits and a decimal exponent within ±22 (the numbers of
// vectors) is converted in the pass that reads it: the digits and the
// power of ten are exact float64s, so one division or multiplication
// rounds correctly (Clinger's fast path). For 32 bits that float64 is
// rounded again, which is right unless it lies within its own rounding
// error of the midpoint between two float32s; then, as for every other
// number, strconv converts the literal.
func (l *Lexer) Float(bits int) (float64, bool) {
	l.ws()
	if f, next, ok := fastFloat(l.b, l.i, bits); ok {
		l.i = next
		return f, true
	}
	return l.floatSlow(bits)
}

// fastFloat converts the number at b[i:] by Clinger's fast path (see
// Float) into a float of bits 32 or 64, returning it and the index past
// it. ok is false where the fast path does not apply (or no number is
// there): strconv must convert the literal.
func fastFloat(b []byte, i, bits int) (f float64, next int, ok bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	var mant uint64
	digits, e10, sig := 0, 0, 0
	first := i
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if mant != 0 || b[i] != '0' {
			mant = mant*10 + uint64(b[i]-'0')
			sig++
		}
		digits++
	}
	if digits == 0 || digits > 1 && b[first] == '0' || sig > 15 {
		return 0, 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		frac := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if mant != 0 || b[i] != '0' {
				mant = mant*10 + uint64(b[i]-'0')
				sig++
			}
			e10--
		}
		if i == frac || sig > 15 {
			return 0, 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := i < len(b) && b[i] == '-'
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		exp, e := i, 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9' && i-exp < 4; i++ {
			e = e*10 + int(b[i]-'0')
		}
		if i == exp || i < len(b) && b[i] >= '0' && b[i] <= '9' {
			return 0, 0, false
		}
		if eneg {
			e = -e
		}
		e10 += e
	}
	if e10 < -22 || e10 > 22 {
		return 0, 0, false
	}
	f = float64(mant)
	if e10 < 0 {
		f /= pow10[-e10]
	} else {
		f *= pow10[e10]
	}
	if bits == 32 {
		f32 := float32(f)
		if float64(f32) != f && !clearOfMidpoint(f, f32) {
			return 0, 0, false
		}
		f = float64(f32)
	}
	if neg {
		f = -f
	}
	return f, i, true
}

// floatSlow is Float by strconv.
func (l *Lexer) floatSlow(bits int) (float64, bool) {
	lit, _, ok := l.Number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(lit), bits)
	return f, err == nil
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// clearOfMidpoint reports whether f (positive, finite, correctly rounded
// from a decimal) is farther than its own rounding error from the
// midpoint between the float32s around it, f32 being one of them: then
// the decimal rounds to f32 as f does.
func clearOfMidpoint(f float64, f32 float32) bool {
	lo, hi := f32, f32
	if float64(f32) < f {
		hi = math.Nextafter32(f32, float32(math.Inf(1)))
	} else {
		lo = math.Nextafter32(f32, 0)
	}
	mid := (float64(lo) + float64(hi)) / 2 // exact: 25 significant bits
	ulp := math.Nextafter(f, math.Inf(1)) - f
	return math.Abs(f-mid) > ulp
}

// Object reads an object, calling field for each key with the lexer at
// its value; field returns false to give up.
func (l *Lexer) Object(field func(key []byte) bool) bool {
	if !l.Eat('{') {
		return false
	}
	if l.Eat('}') {
		return true
	}
	for {
		key, ok := l.StrBytes()
		if !ok || !l.Eat(':') || !field(key) {
			return false
		}
		switch l.Peek() {
		case ',':
			l.i++
		case '}':
			l.i++
			return true
		default:
			return false
		}
	}
}

// Array reads an array, calling elem for each element.
func (l *Lexer) Array(elem func() bool) bool {
	if !l.Eat('[') {
		return false
	}
	if l.Eat(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch l.Peek() {
		case ',':
			l.i++
		case ']':
			l.i++
			return true
		default:
			return false
		}
	}
}

// length is how many elements the array of numbers at the lexer holds,
// a capacity hint (exact for a well-formed array of numbers).
func (l *Lexer) length() int {
	rest := l.b[l.i:]
	end := bytes.IndexByte(rest, ']')
	if end < 0 {
		return 0
	}
	return bytes.Count(rest[:end], []byte{','}) + 1
}

// List reads an array whose elements read reads; never nil, as
// encoding/json gives an empty array.
func List[T any](l *Lexer, read func() (T, bool)) ([]T, bool) {
	out := make([]T, 0, l.length())
	ok := l.Array(func() bool {
		v, ok := read()
		out = append(out, v)
		return ok
	})
	return out, ok
}

// Strings reads an array of strings.
func (l *Lexer) Strings() ([]string, bool) {
	return List(l, func() (string, bool) { return l.Str() })
}

// Ints reads an array of integers.
func (l *Lexer) Ints() ([]int, bool) {
	return List(l, func() (int, bool) { return l.Int() })
}

// Float64s reads an array of numbers as float64.
func (l *Lexer) Float64s() ([]float64, bool) { return floats[float64](l, 64) }

// Float32s reads an array of numbers as float32.
func (l *Lexer) Float32s() ([]float32, bool) { return floats[float32](l, 32) }

// floats reads an array of numbers as floats of bits 32 or 64, as List
// of Float would, in one loop: a vector's elements are most of a step
// message's bytes. A number and its comma written without white space
// between them, as encoders write vectors, take neither a call nor a
// look for white space.
func floats[T float32 | float64](l *Lexer, bits int) ([]T, bool) {
	if !l.Eat('[') {
		return nil, false
	}
	out := make([]T, 0, l.length())
	if l.Eat(']') {
		return out, true
	}
	b := l.b
	for {
		f, next, ok := fastFloat(b, l.i, bits)
		if ok {
			l.i = next
		} else if f, ok = l.Float(bits); !ok {
			return out, false
		}
		out = append(out, T(f))
		if l.i < len(b) && b[l.i] == ',' {
			l.i++
			continue
		}
		switch l.Peek() {
		case ',':
			l.i++
		case ']':
			l.i++
			return out, true
		default:
			return out, false
		}
	}
}

// Raw skips one value and returns its bytes (for encoding/json to
// decode and check: metadata). It only has to find the end of a valid
// value; encoding/json refuses an invalid one.
func (l *Lexer) Raw() ([]byte, bool) {
	l.ws()
	start, depth := l.i, 0
	for l.i < len(l.b) {
		c := l.b[l.i]
		switch {
		case c == '"':
			for l.i++; l.i < len(l.b) && l.b[l.i] != '"'; l.i++ {
				if l.b[l.i] == '\\' {
					l.i++
				}
			}
			if l.i >= len(l.b) {
				return nil, false
			}
			l.i++
		case c == '{' || c == '[':
			depth++
			l.i++
		case c == '}' || c == ']':
			if depth == 0 { // the end of the enclosing value
				return l.b[start:l.i], l.i > start
			}
			depth--
			l.i++
		case depth == 0 && (c == ',' || c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return l.b[start:l.i], l.i > start
		default:
			l.i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return l.b[start:l.i], true
		}
	}
	return l.b[start:], depth == 0 && l.i > start
}

// Time reads an RFC 3339 timestamp as time.Time's UnmarshalJSON does.
func (l *Lexer) Time(t *time.Time) bool {
	l.ws()
	start := l.i
	_, ok := l.StrBytes()
	return ok && t.UnmarshalJSON(l.b[start:l.i]) == nil
}

// Unmarshal decodes the next value into v with encoding/json.
func (l *Lexer) Unmarshal(v any) bool {
	raw, ok := l.Raw()
	return ok && json.Unmarshal(raw, v) == nil
}

// Seen marks field bit of an object as read; false if it was already
// (a repeated key, which encoding/json resolves its own way).
func Seen(mask *uint32, bit uint) bool {
	if *mask&(1<<bit) != 0 {
		return false
	}
	*mask |= 1 << bit
	return true
}
