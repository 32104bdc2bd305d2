package planner

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/ctxgraph/ctxgraph/particle"
)

// The answer's JSON is written by hand: it is on every planner call over
// NATS and HTTP, and reflection-driven encoding/json spends most of its
// time walking the same few types. The bytes are those encoding/json
// writes for the same values (the tests compare them on real answers,
// and pin the field lists of the types written here).

// sizeHint guesses the encoded size, to allocate a buffer once.
func (a *Answer) sizeHint() int {
	n := 512 + 320*len(a.Nodes) + 640*len(a.Edges)
	if a.ContextState != nil {
		n += 16 * len(a.ContextState.Vector)
	}
	return n
}

// AppendJSON appends the JSON encoding of a to b: the bytes
// json.Marshal gives, written without reflection (about 3× faster on a
// fleet answer, with no allocation into a buffer that fits; see
// BenchmarkAnswerJSONFleet). It is not a MarshalJSON method on purpose:
// encoding/json re-scans a marshaler's output, which costs more than the
// reflection it saves.
func (a *Answer) AppendJSON(b []byte) ([]byte, error) {
	if b == nil {
		b = make([]byte, 0, a.sizeHint())
	}
	warmAnswer(a)
	w := jsonWriter{b: b}
	w.raw(`{"nodes":`)
	w.list(len(a.Nodes), a.Nodes == nil, func(i int) { w.node(&a.Nodes[i]) })
	w.raw(`,"edges":`)
	w.list(len(a.Edges), a.Edges == nil, func(i int) { w.edge(&a.Edges[i]) })
	w.raw(`,"unknowns":`)
	w.list(len(a.Unknowns), a.Unknowns == nil, func(i int) {
		u := &a.Unknowns[i]
		w.raw(`{"kind":`)
		w.str(u.Kind)
		w.raw(`,"name":`)
		w.str(u.Name)
		w.byte('}')
	})
	w.raw(`,"hypotheses":`)
	w.strs(a.Hypotheses)
	w.raw(`,"contradictions":`)
	w.list(len(a.Contradictions), a.Contradictions == nil, func(i int) { w.contradiction(&a.Contradictions[i]) })
	if a.ContextState != nil {
		w.raw(`,"context_state":`)
		w.contextState(a.ContextState)
	}
	w.raw(`,"timings_us":`)
	w.timings(&a.Timings)
	w.raw(`,"strategy":`)
	w.str(a.Strategy)
	if a.StrategyReason != "" {
		w.raw(`,"strategy_reason":`)
		w.str(a.StrategyReason)
	}
	w.raw(`,"truncated":`)
	w.bool(a.Truncated)
	w.byte('}')
	return w.b, w.err
}

// JSONAnswerTimings reads the per-stage timings of a JSON answer
// without decoding the rest of it: for a client that times its
// requests and wants the daemon's own share. It takes the answer's last
// "timings_us" followed by a colon: a string value cannot hold those
// quotes unescaped, a whole string value "timings_us" is followed by a
// comma or a brace, and the fields after the timings (strategy,
// strategy_reason, truncated) hold no objects.
func JSONAnswerTimings(b []byte) (Timings, error) {
	key := []byte(`"timings_us"`)
	for i := bytes.LastIndex(b, key); i >= 0; i = bytes.LastIndex(b[:i], key) {
		rest := bytes.TrimLeft(b[i+len(key):], " \t\r\n")
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		var t Timings
		if err := json.NewDecoder(bytes.NewReader(rest[1:])).Decode(&t); err != nil {
			return Timings{}, fmt.Errorf("decode JSON answer: timings_us: %w", err)
		}
		return t, nil
	}
	return Timings{}, errors.New("decode JSON answer: no timings_us")
}

func (w *jsonWriter) node(n *NodeOut) {
	w.raw(`{"id":`)
	w.str(n.ID)
	w.raw(`,"type":`)
	w.str(n.Type)
	w.raw(`,"name":`)
	w.str(n.Name)
	if len(n.Aliases) > 0 {
		w.raw(`,"aliases":`)
		w.strs(n.Aliases)
	}
	if len(n.Tags) > 0 {
		w.raw(`,"tags":`)
		w.strs(n.Tags)
	}
	w.raw(`,"score":`)
	w.float(n.Score, 64)
	w.raw(`,"belief":`)
	w.float(n.Belief, 64)
	w.raw(`,"seed":`)
	w.bool(n.Seed)
	w.raw(`,"hop":`)
	w.int(int64(n.Hop))
	if len(n.Episodes) > 0 {
		w.raw(`,"rlds_episode_ids":`)
		w.strs(n.Episodes)
	}
	if len(n.Spans) > 0 {
		w.raw(`,"cms_span_ids":`)
		w.strs(n.Spans)
	}
	w.byte('}')
}

func (w *jsonWriter) edge(e *EdgeOut) {
	w.raw(`{"id":`)
	w.str(e.ID)
	w.raw(`,"source":`)
	w.str(e.Source)
	w.raw(`,"target":`)
	w.str(e.Target)
	w.raw(`,"source_name":`)
	w.str(e.SourceName)
	w.raw(`,"target_name":`)
	w.str(e.TargetName)
	w.raw(`,"type":`)
	w.str(e.Type)
	w.raw(`,"predicate":`)
	w.str(e.Predicate)
	if e.Value != "" {
		w.raw(`,"value":`)
		w.str(e.Value)
	}
	w.raw(`,"confidence":`)
	w.float(e.Confidence, 64)
	w.raw(`,"salience":`)
	w.float(e.Salience, 64)
	w.raw(`,"score":`)
	w.float(e.Score, 64)
	w.raw(`,"status":`)
	w.str(e.Status)
	w.raw(`,"hypothesis":`)
	w.bool(e.Hypothesis)
	w.raw(`,"evidence":`)
	w.int(int64(e.Evidence))
	w.raw(`,"provenance":`)
	w.list(len(e.Provenance), e.Provenance == nil, func(i int) { w.provenance(&e.Provenance[i]) })
	w.raw(`,"scope":`)
	w.scope(&e.Scope)
	w.raw(`,"valid_from":`)
	w.time(e.ValidFrom)
	if !e.ValidTo.IsZero() {
		w.raw(`,"valid_to":`)
		w.time(e.ValidTo)
	}
	w.byte('}')
}

func (w *jsonWriter) provenance(p *particle.Provenance) {
	// observed_at is always there and last: the optional fields before
	// it each end with a comma.
	w.byte('{')
	if p.EpisodeID != "" {
		w.raw(`"episode_id":`)
		w.str(p.EpisodeID)
		w.byte(',')
	}
	if p.StepIndex != nil {
		w.raw(`"step_index":`)
		w.int(int64(*p.StepIndex))
		w.byte(',')
	}
	if p.CMSSpanID != "" {
		w.raw(`"cms_span_id":`)
		w.str(p.CMSSpanID)
		w.byte(',')
	}
	if p.Agent != "" {
		w.raw(`"agent":`)
		w.str(p.Agent)
		w.byte(',')
	}
	w.raw(`"observed_at":`)
	w.time(p.ObservedAt)
	w.byte('}')
}

func (w *jsonWriter) scope(s *particle.Scope) {
	w.raw(`{"time_range":{`)
	from, to := &s.TimeRange.From, &s.TimeRange.To
	if !from.IsZero() {
		w.raw(`"from":`)
		w.time(*from)
	}
	if !to.IsZero() {
		if !from.IsZero() {
			w.byte(',')
		}
		w.raw(`"to":`)
		w.time(*to)
	}
	w.byte('}')
	if s.Location != "" {
		w.raw(`,"location":`)
		w.str(s.Location)
	}
	if len(s.Audience) > 0 {
		w.raw(`,"audience":`)
		w.strs(s.Audience)
	}
	w.byte('}')
}

func (w *jsonWriter) contradiction(c *Contradiction) {
	w.raw(`{"subject":`)
	w.str(c.Subject)
	w.raw(`,"predicate":`)
	w.str(c.Predicate)
	w.raw(`,"edge_a":`)
	w.str(c.EdgeA)
	w.raw(`,"edge_b":`)
	w.str(c.EdgeB)
	w.raw(`,"confidence_a":`)
	w.float(c.ConfidenceA, 64)
	w.raw(`,"confidence_b":`)
	w.float(c.ConfidenceB, 64)
	w.byte('}')
}

func (w *jsonWriter) contextState(cs *ContextState) {
	w.raw(`{"dim":`)
	w.int(int64(cs.Dim))
	w.raw(`,"norm":`)
	w.float(cs.Norm, 64)
	w.raw(`,"top":`)
	w.list(len(cs.Top), cs.Top == nil, func(i int) {
		w.raw(`{"dim":`)
		w.int(int64(cs.Top[i].Dim))
		w.raw(`,"value":`)
		w.float(float64(cs.Top[i].Value), 32)
		w.byte('}')
	})
	w.raw(`,"vector":`)
	w.list(len(cs.Vector), cs.Vector == nil, func(i int) { w.float(float64(cs.Vector[i]), 32) })
	w.byte('}')
}

func (w *jsonWriter) timings(t *Timings) {
	w.raw(`{"embed":`)
	w.int(t.EmbedUS)
	if t.WaitUS != 0 {
		w.raw(`,"wait":`)
		w.int(t.WaitUS)
	}
	w.raw(`,"prefilter":`)
	w.int(t.PrefilterUS)
	if t.KeywordUS != 0 {
		w.raw(`,"keyword":`)
		w.int(t.KeywordUS)
	}
	w.raw(`,"expand":`)
	w.int(t.ExpandUS)
	w.raw(`,"rerank":`)
	w.int(t.RerankUS)
	w.raw(`,"stitch":`)
	w.int(t.StitchUS)
	w.raw(`,"total":`)
	w.int(t.TotalUS)
	w.byte('}')
}

// jsonWriter appends JSON values to b; the first error (a value JSON
// cannot hold) sticks.
type jsonWriter struct {
	b   []byte
	err error
	// The last time written and its JSON (time).
	lastTime     time.Time
	lastTimeJSON [48]byte
	lastTimeLen  int
}

func (w *jsonWriter) raw(s string) { w.b = append(w.b, s...) }
func (w *jsonWriter) byte(c byte)  { w.b = append(w.b, c) }

// list writes an array of n elements (null for a nil slice).
func (w *jsonWriter) list(n int, isNil bool, elem func(i int)) {
	if isNil {
		w.raw("null")
		return
	}
	w.byte('[')
	for i := range n {
		if i > 0 {
			w.byte(',')
		}
		elem(i)
	}
	w.byte(']')
}

func (w *jsonWriter) strs(ss []string) {
	w.list(len(ss), ss == nil, func(i int) { w.str(ss[i]) })
}

func (w *jsonWriter) bool(v bool) {
	if v {
		w.raw("true")
	} else {
		w.raw("false")
	}
}

func (w *jsonWriter) int(v int64) { w.b = strconv.AppendInt(w.b, v, 10) }

// float writes f as encoding/json does: shortest representation, with
// an exponent only for very small or large magnitudes.
func (w *jsonWriter) float(f float64, bits int) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		if w.err == nil {
			w.err = &json.UnsupportedValueError{Value: reflect.ValueOf(f), Str: strconv.FormatFloat(f, 'g', -1, bits)}
		}
		w.raw("null")
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	w.b = strconv.AppendFloat(w.b, f, format, -1, bits)
	if format == 'e' {
		// e-09 to e-9
		if n := len(w.b); n >= 4 && w.b[n-4] == 'e' && w.b[n-3] == '-' && w.b[n-2] == '0' {
			w.b[n-2] = w.b[n-1]
			w.b = w.b[:n-1]
		}
	}
}

// time writes t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds); a year it cannot write is its error. The last time
// written is remembered: an edge's scope, validity and provenance
// often hold the same instant, and formatting one costs more than
// copying its bytes.
func (w *jsonWriter) time(t time.Time) {
	if w.lastTimeLen > 0 && t == w.lastTime {
		w.b = append(w.b, w.lastTimeJSON[:w.lastTimeLen]...)
		return
	}
	if y := t.Year(); y < 0 || y > 9999 {
		raw, err := t.MarshalJSON()
		if err != nil && w.err == nil {
			w.err = err
		}
		w.b = append(w.b, raw...)
		return
	}
	start := len(w.b)
	w.byte('"')
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	w.byte('"')
	if n := len(w.b) - start; n <= len(w.lastTimeJSON) {
		w.lastTime, w.lastTimeLen = t, n
		copy(w.lastTimeJSON[:], w.b[start:])
	}
}

const hexDigits = "0123456789abcdef"

// jsonSafe marks the ASCII bytes str copies unescaped: one table load
// per byte instead of six comparisons (the escape loop was the
// hottest flat cost in the daemon's planner replies).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// SWAR constants: a byte of ones, a byte's high bit, in every byte.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// safe8 reports whether all eight bytes of x (eight bytes of a string,
// in any byte order) are jsonSafe: ASCII, at least 0x20, and none of
// " \\ < > &. Each test is the classic has-zero-byte trick, exact as a
// whole: (v - 0x01…) &^ v has a byte's high bit set iff some byte of v
// is 0 (for v - 0x20…, iff some byte is below 0x20).
func safe8(x uint64) bool {
	bad := x | (x-swarOnes*0x20)&^x
	y := x ^ swarOnes*'"'
	bad |= (y - swarOnes) &^ y
	y = x ^ swarOnes*'\\'
	bad |= (y - swarOnes) &^ y
	y = x ^ swarOnes*'<'
	bad |= (y - swarOnes) &^ y
	y = x ^ swarOnes*'>'
	bad |= (y - swarOnes) &^ y
	y = x ^ swarOnes*'&'
	bad |= (y - swarOnes) &^ y
	return bad&swarHigh == 0
}

// str writes s as encoding/json does: HTML-safe (<, > and & escaped),
// invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func (w *jsonWriter) str(s string) {
	b := append(w.b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight safe bytes at a time (most of an answer's text: ids,
		// names, predicates), then byte by byte from the first that
		// needs a look.
		for i+8 <= len(s) && safe8(binary.NativeEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))) {
			i += 8
		}
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	w.b = append(b, '"')
}
