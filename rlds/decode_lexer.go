package rlds

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// lexer reads the JSON of one wire message for the fast decoder
// (decode_fast.go). It accepts only the plain form senders write: strings
// without escapes, no nulls, no repeated keys. Anything else makes a
// method return false and the caller falls back to encoding/json, which
// either decodes it the same way or names the error; so the lexer never
// has to explain a failure, and never accepts what encoding/json would
// refuse.
type lexer struct {
	b []byte
	i int
}

func (l *lexer) ws() {
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\t', '\n', '\r':
			l.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space, 0 at the end.
func (l *lexer) peek() byte {
	l.ws()
	if l.i < len(l.b) {
		return l.b[l.i]
	}
	return 0
}

func (l *lexer) eat(c byte) bool {
	if l.peek() != c {
		return false
	}
	l.i++
	return true
}

// strBytes reads a string without escapes, returning its bytes (valid
// UTF-8) without copying them.
func (l *lexer) strBytes() ([]byte, bool) {
	if !l.eat('"') {
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

func (l *lexer) str() (string, bool) {
	s, ok := l.strBytes()
	return string(s), ok
}

func (l *lexer) boolean() (bool, bool) {
	switch l.peek() {
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

// number reads a number literal as JSON's grammar has it, reporting
// whether it is a plain integer (no fraction, no exponent).
func (l *lexer) number() (lit []byte, integer, ok bool) {
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

func (l *lexer) int() (int, bool) {
	lit, integer, ok := l.number()
	if !ok || !integer {
		return 0, false
	}
	if n, ok := smallInt(lit, 18); ok {
		return int(n), true
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	return int(n), err == nil
}

// float reads a number as encoding/json does into a float of bits 32
// or 64: integers that the type holds exactly directly, the rest by
// strconv.
func (l *lexer) float(bits int) (float64, bool) {
	if f, ok := l.shortInt(bits); ok {
		return f, true
	}
	lit, _, ok := l.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(lit), bits)
	return f, err == nil
}

// shortInt reads an integer literal that a float of bits holds exactly
// (at most 7 digits for float32, 15 for float64), the common case of
// vectors; otherwise it reads nothing and reports false.
func (l *lexer) shortInt(bits int) (float64, bool) {
	l.ws()
	i, neg := l.i, false
	if i < len(l.b) && l.b[i] == '-' {
		neg = true
		i++
	}
	max := i + 15
	if bits == 32 {
		max = i + 7
	}
	start := i
	var n int64
	for ; i < len(l.b) && l.b[i] >= '0' && l.b[i] <= '9'; i++ {
		n = n*10 + int64(l.b[i]-'0')
	}
	switch {
	case i == start || i > max || i-start > 1 && l.b[start] == '0' || neg && n == 0:
		return 0, false
	case i < len(l.b) && (l.b[i] == '.' || l.b[i] == 'e' || l.b[i] == 'E'):
		return 0, false
	}
	l.i = i
	if neg {
		n = -n
	}
	return float64(n), true
}

// object reads an object, calling field for each key with the lexer at
// its value; field returns false to give up.
func (l *lexer) object(field func(key []byte) bool) bool {
	if !l.eat('{') {
		return false
	}
	if l.eat('}') {
		return true
	}
	for {
		key, ok := l.strBytes()
		if !ok || !l.eat(':') || !field(key) {
			return false
		}
		switch l.peek() {
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

// array reads an array, calling elem for each element.
func (l *lexer) array(elem func() bool) bool {
	if !l.eat('[') {
		return false
	}
	if l.eat(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch l.peek() {
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
func (l *lexer) length() int {
	rest := l.b[l.i:]
	end := bytes.IndexByte(rest, ']')
	if end < 0 {
		return 0
	}
	return bytes.Count(rest[:end], []byte{','}) + 1
}

// list reads an array whose elements read reads; never nil, as
// encoding/json gives an empty array.
func list[T any](l *lexer, read func() (T, bool)) ([]T, bool) {
	out := make([]T, 0, l.length())
	ok := l.array(func() bool {
		v, ok := read()
		out = append(out, v)
		return ok
	})
	return out, ok
}

func (l *lexer) strings() ([]string, bool) { return list(l, l.str) }
func (l *lexer) ints() ([]int, bool)       { return list(l, l.int) }

func (l *lexer) float64s() ([]float64, bool) {
	return list(l, func() (float64, bool) { return l.float(64) })
}

func (l *lexer) float32s() ([]float32, bool) {
	return list(l, func() (float32, bool) {
		f, ok := l.float(32)
		return float32(f), ok
	})
}

// raw skips one value and returns its bytes (for encoding/json to
// decode and check: metadata). It only has to find the end of a valid
// value; encoding/json refuses an invalid one.
func (l *lexer) raw() ([]byte, bool) {
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

// time reads an RFC 3339 timestamp as time.Time's UnmarshalJSON does.
func (l *lexer) time(t *time.Time) bool {
	l.ws()
	start := l.i
	_, ok := l.strBytes()
	return ok && t.UnmarshalJSON(l.b[start:l.i]) == nil
}

// unmarshal decodes the next value into v with encoding/json.
func (l *lexer) unmarshal(v any) bool {
	raw, ok := l.raw()
	return ok && json.Unmarshal(raw, v) == nil
}

// seen marks field bit of an object as read; false if it was already
// (a repeated key, which encoding/json resolves its own way).
func seen(mask *uint32, bit uint) bool {
	if *mask&(1<<bit) != 0 {
		return false
	}
	*mask |= 1 << bit
	return true
}
