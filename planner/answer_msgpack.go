package planner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tinylib/msgp/msgp"

	"github.com/ctxgraph/ctxgraph/particle"
)

// The msgpack format is the answer for programs in a control loop: the
// same information as the JSON, about a third of its size, and several
// times cheaper to write and to read (BenchmarkAnswerJSONFleet). It is
// standard MessagePack, so any MessagePack library reads it; the layout
// (MsgpackLayoutVersion) is:
//
//   - The answer is a map with string keys: "v" (the layout version),
//     "strings", "nodes", "edges", "unknowns", "hypotheses",
//     "contradictions", "context_state" (when there is one),
//     "timings_us", "strategy", "strategy_reason" (when there is one)
//     and "truncated". "v" and "strings" come first.
//   - "strings" is the answer's string table: the strings of the
//     nodes, edges, unknowns, hypotheses and contradictions. Those
//     sections hold a string as its index in the table (a uint), so an
//     id repeated as a node, an edge end and a provenance entry is
//     mostly sent once (a string may be in the table more than once;
//     index 0 is "").
//   - Nodes, edges and the other records of those sections are arrays
//     whose elements are in the order of the fields below; a list of
//     strings is an array of indices, empty when there are none; a
//     list that is null in the JSON is nil.
//     node: [id, type, name, aliases, tags, score, belief, seed, hop,
//     rlds_episode_ids, cms_span_ids]
//     edge: [id, source, target, source_name, target_name, type,
//     predicate, value, confidence, salience, score, status,
//     hypothesis, evidence, provenance, scope, valid_from, valid_to]
//     provenance: [episode_id, step_index (nil when none),
//     cms_span_id, agent, observed_at]
//     scope: [from, to, location, audience]
//     unknown: [kind, name]
//     contradiction: [subject, predicate, edge_a, edge_b,
//     confidence_a, confidence_b]
//   - Times are MessagePack timestamps (extension -1); the zero time is
//     nil. Scores, beliefs and confidences are float64, the context
//     state's values float32.
//   - "context_state", "timings_us", "strategy", "strategy_reason" and
//     "truncated" are as in the JSON (maps with the JSON's keys, plain
//     strings), "top" entries as [dim, value] arrays.
//
// A reader skips map keys it does not know; a new layout that changes
// the meaning of a known one gets a new version.

// MsgpackLayoutVersion is the layout version the msgpack format writes
// under "v" and the only one DecodeMsgpackAnswer reads.
const MsgpackLayoutVersion = 1

// MsgpackMediaType is the media type of the msgpack format.
const MsgpackMediaType = "application/vnd.msgpack"

func init() {
	formatters["msgpack"] = func(b []byte, a *Answer) ([]byte, string, error) {
		out, err := a.AppendMsgpack(b)
		return out, MsgpackMediaType, err
	}
}

// msgpackWriter writes the sections that refer to the string table into
// body, collecting the table as it goes; AppendMsgpack then writes the
// table and copies body after it.
type msgpackWriter struct {
	body []byte
	// fields counts the answer map's keys written into body.
	fields uint32
	table  []string
	// content finds a short string's index by what it says
	// (byContent): types, statuses, agents, locations, ids and episode
	// ids repeat across an answer's edges and nodes, each holding its
	// own copy. The encoders' warm pass (warmAnswer) has read the
	// strings, so hashing them costs no misses. On the medium fleet's
	// answers the table holds each of about 1,030 distinct strings once
	// (17 KB), where a lookup by place alone held 2,970 (40 KB).
	// seen finds a long string's index by where its bytes are (byPlace):
	// long text rarely repeats but at the same place.
	// Both are open-addressed tables (linear probing) at most half
	// full: past that, new strings are not remembered and a repeat is
	// sent again. So the output depends on the strings' contents and on
	// which long ones share bytes, never on their addresses.
	// A slot is current when its gen is the writer's.
	content  [contentSlots]contentString
	nContent int
	seen     [seenSlots]seenString
	nSeen    int
	gen      uint32
	// The last time written and its encoding: an edge's scope,
	// validity and provenance often hold the same instant.
	lastTime time.Time
	lastEnc  []byte
}

// seenSlots is the size of msgpackWriter.seen.
const (
	seenBits  = 10
	seenSlots = 1 << seenBits
)

// seenSlot is where the probe for the string whose bytes are at p
// starts (Fibonacci hashing of the address).
func seenSlot(p *byte) uintptr {
	return uintptr(unsafe.Pointer(p)) * 0x9E3779B97F4A7C15 >> (64 - seenBits)
}

// contentSlots is the size of msgpackWriter.content; strings longer
// than maxContentKey are looked up by place instead.
const (
	contentBits   = 12
	contentSlots  = 1 << contentBits
	maxContentKey = 48
)

// shortHash hashes a short string from its length and its first and
// last eight bytes: enough to tell apart ids, types and names, cheaper
// than a hash of every byte (a collision costs a comparison).
func shortHash(s string) uint64 {
	var a, z uint64
	if n := len(s); n >= 8 {
		a = binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s), n))
		z = binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[n-8:]), 8))
	} else {
		for i := range n {
			a = a<<8 | uint64(s[i])
		}
	}
	return (a*0x9E3779B97F4A7C15 ^ z*0xC2B2AE3D27D4EB4F ^ uint64(len(s))) * 0x165667B19E3779F9
}

// contentString is a string's hash and its index in the table.
type contentString struct {
	h   uint64
	i   uint32
	gen uint32
}

// seenString is a string's bytes (pointer and length) and its index.
type seenString struct {
	p   *byte
	n   int
	i   uint32
	gen uint32
}

var msgpackWriters = sync.Pool{New: func() any { return new(msgpackWriter) }}

// reset readies w for an answer: the table holds "" at index 0.
func (w *msgpackWriter) reset() {
	clear(w.table)
	w.table = append(w.table[:0], "")
	w.gen++
	if w.gen == 0 { // wrapped: slots of gen 0 must not look current
		clear(w.seen[:])
		clear(w.content[:])
		w.gen = 1
	}
	w.body, w.fields, w.nSeen, w.nContent = w.body[:0], 0, 0, 0
	w.lastTime, w.lastEnc = time.Time{}, w.lastEnc[:0]
}

// AppendMsgpack appends the msgpack encoding of a to b (see the layout
// above). It does not fail on values JSON cannot hold: NaN and the
// infinities are MessagePack floats.
func (a *Answer) AppendMsgpack(b []byte) ([]byte, error) {
	w := msgpackWriters.Get().(*msgpackWriter)
	defer msgpackWriters.Put(w)
	w.reset()
	warmAnswer(a)

	w.field("nodes")
	w.list(len(a.Nodes), a.Nodes == nil, func(i int) { w.node(&a.Nodes[i]) })
	w.field("edges")
	w.list(len(a.Edges), a.Edges == nil, func(i int) { w.edge(&a.Edges[i]) })
	w.field("unknowns")
	w.list(len(a.Unknowns), a.Unknowns == nil, func(i int) {
		w.body = msgp.AppendArrayHeader(w.body, 2)
		w.str(a.Unknowns[i].Kind)
		w.str(a.Unknowns[i].Name)
	})
	w.field("hypotheses")
	w.list(len(a.Hypotheses), a.Hypotheses == nil, func(i int) { w.str(a.Hypotheses[i]) })
	w.field("contradictions")
	w.list(len(a.Contradictions), a.Contradictions == nil, func(i int) {
		c := &a.Contradictions[i]
		w.body = msgp.AppendArrayHeader(w.body, 6)
		w.str(c.Subject)
		w.str(c.Predicate)
		w.str(c.EdgeA)
		w.str(c.EdgeB)
		w.body = msgp.AppendFloat64(w.body, c.ConfidenceA)
		w.body = msgp.AppendFloat64(w.body, c.ConfidenceB)
	})
	if a.ContextState != nil {
		w.field("context_state")
		w.contextState(a.ContextState)
	}
	w.field("timings_us")
	w.timings(&a.Timings)
	w.field("strategy")
	w.body = appendValidUTF8String(w.body, a.Strategy)
	if a.StrategyReason != "" {
		w.field("strategy_reason")
		w.body = appendValidUTF8String(w.body, a.StrategyReason)
	}
	w.field("truncated")
	w.body = msgp.AppendBool(w.body, a.Truncated)

	if b == nil {
		n := len(w.body) + 16
		for _, s := range w.table {
			n += len(s) + 5
		}
		b = make([]byte, 0, n)
	}
	b = msgp.AppendMapHeader(b, 2+w.fields) // v and strings, then body's
	b = msgp.AppendString(b, "v")
	b = msgp.AppendInt(b, MsgpackLayoutVersion)
	b = msgp.AppendString(b, "strings")
	b = msgp.AppendArrayHeader(b, uint32(len(w.table)))
	for _, s := range w.table {
		b = appendValidUTF8String(b, s)
	}
	return append(b, w.body...), nil
}

// appendValidUTF8String appends s as a MessagePack string with each
// byte of invalid UTF-8 replaced by U+FFFD, as the JSON does (the
// conversion to runes does exactly that).
func appendValidUTF8String(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = string([]rune(s))
	}
	return msgp.AppendString(b, s)
}

func (w *msgpackWriter) key(k string) { w.body = msgp.AppendString(w.body, k) }

// field writes a key of the answer map itself.
func (w *msgpackWriter) field(k string) {
	w.key(k)
	w.fields++
}

// str writes s as its index in the string table, adding it when its
// bytes are new.
func (w *msgpackWriter) str(s string) {
	if len(s) == 0 {
		w.body = append(w.body, 0) // "" is index 0, a positive fixint
		return
	}
	i, ok := uint32(0), false
	if len(s) <= maxContentKey {
		i, ok = w.byContent(s)
	} else {
		i, ok = w.byPlace(s)
	}
	if !ok {
		i = uint32(len(w.table))
		w.table = append(w.table, s)
	}
	w.body = msgp.AppendUint32(w.body, i)
}

// byContent finds a short string equal to s already in the table, or
// remembers s (while the table is at most half full) as the one about
// to be added at the next index; ok reports a find.
func (w *msgpackWriter) byContent(s string) (i uint32, ok bool) {
	h := shortHash(s)
	for k := h >> (64 - contentBits); ; k = (k + 1) & (contentSlots - 1) {
		slot := &w.content[k]
		if slot.gen != w.gen {
			if w.nContent < contentSlots/2 {
				*slot = contentString{h: h, i: uint32(len(w.table)), gen: w.gen}
				w.nContent++
			}
			return 0, false
		}
		if slot.h == h && w.table[slot.i] == s {
			return slot.i, true
		}
	}
}

// byPlace finds a long string whose bytes are s's (the same place)
// already in the table, or remembers s (while the table is at most half
// full) as the one about to be added at the next index; ok reports a
// find.
func (w *msgpackWriter) byPlace(s string) (i uint32, ok bool) {
	p := unsafe.StringData(s)
	for h := seenSlot(p); ; h = (h + 1) & (seenSlots - 1) {
		slot := &w.seen[h]
		if slot.gen != w.gen {
			if w.nSeen < seenSlots/2 {
				*slot = seenString{p: p, n: len(s), i: uint32(len(w.table)), gen: w.gen}
				w.nSeen++
			}
			return 0, false
		}
		if slot.p == p && slot.n == len(s) {
			return slot.i, true
		}
	}
}

// strs writes ss as an array of indices (empty for none).
func (w *msgpackWriter) strs(ss []string) {
	w.body = msgp.AppendArrayHeader(w.body, uint32(len(ss)))
	for _, s := range ss {
		w.str(s)
	}
}

// list writes an array of n elements (nil for a nil slice).
func (w *msgpackWriter) list(n int, isNil bool, elem func(i int)) {
	if isNil {
		w.body = msgp.AppendNil(w.body)
		return
	}
	w.body = msgp.AppendArrayHeader(w.body, uint32(n))
	for i := range n {
		elem(i)
	}
}

// time writes t as a MessagePack timestamp, the zero time as nil.
func (w *msgpackWriter) time(t time.Time) {
	if t.IsZero() {
		w.body = msgp.AppendNil(w.body)
		return
	}
	if len(w.lastEnc) > 0 && t.Equal(w.lastTime) {
		w.body = append(w.body, w.lastEnc...)
		return
	}
	start := len(w.body)
	w.body = appendTimeExt(w.body, t)
	w.lastTime, w.lastEnc = t, append(w.lastEnc[:0], w.body[start:]...)
}

// appendTimeExt is msgp.AppendTimeExt, the same bytes (the msgpack
// timestamp extension in its 4-, 8- or 12-byte form), read from
// t.Unix and t.Nanosecond instead of Truncate and Sub: an answer writes
// a thousand times, and those were a quarter of a warm encoding.
func appendTimeExt(b []byte, t time.Time) []byte {
	const fixext4, fixext8, ext8, timestamp = 0xd6, 0xd7, 0xc7, 0xff
	sec, nsec := t.Unix(), uint32(t.Nanosecond())
	switch {
	case nsec == 0 && sec > 0 && sec <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, fixext4, timestamp), uint32(sec))
	case sec < 0 || sec >= 1<<34:
		b = binary.BigEndian.AppendUint32(append(b, ext8, 12, timestamp), nsec)
		return binary.BigEndian.AppendUint64(b, uint64(sec))
	default:
		return binary.BigEndian.AppendUint64(append(b, fixext8, timestamp), uint64(sec)|uint64(nsec)<<34)
	}
}

func (w *msgpackWriter) node(n *NodeOut) {
	w.body = msgp.AppendArrayHeader(w.body, 11)
	w.str(n.ID)
	w.str(n.Type)
	w.str(n.Name)
	w.strs(n.Aliases)
	w.strs(n.Tags)
	w.body = msgp.AppendFloat64(w.body, n.Score)
	w.body = msgp.AppendFloat64(w.body, n.Belief)
	w.body = msgp.AppendBool(w.body, n.Seed)
	w.body = msgp.AppendInt(w.body, n.Hop)
	w.strs(n.Episodes)
	w.strs(n.Spans)
}

func (w *msgpackWriter) edge(e *EdgeOut) {
	w.body = msgp.AppendArrayHeader(w.body, 18)
	w.str(e.ID)
	w.str(e.Source)
	w.str(e.Target)
	w.str(e.SourceName)
	w.str(e.TargetName)
	w.str(e.Type)
	w.str(e.Predicate)
	w.str(e.Value)
	w.body = msgp.AppendFloat64(w.body, e.Confidence)
	w.body = msgp.AppendFloat64(w.body, e.Salience)
	w.body = msgp.AppendFloat64(w.body, e.Score)
	w.str(e.Status)
	w.body = msgp.AppendBool(w.body, e.Hypothesis)
	w.body = msgp.AppendInt(w.body, e.Evidence)
	w.list(len(e.Provenance), e.Provenance == nil, func(i int) {
		p := &e.Provenance[i]
		w.body = msgp.AppendArrayHeader(w.body, 5)
		w.str(p.EpisodeID)
		if p.StepIndex != nil {
			w.body = msgp.AppendInt(w.body, *p.StepIndex)
		} else {
			w.body = msgp.AppendNil(w.body)
		}
		w.str(p.CMSSpanID)
		w.str(p.Agent)
		w.time(p.ObservedAt)
	})
	w.body = msgp.AppendArrayHeader(w.body, 4)
	w.time(e.Scope.TimeRange.From)
	w.time(e.Scope.TimeRange.To)
	w.str(e.Scope.Location)
	w.strs(e.Scope.Audience)
	w.time(e.ValidFrom)
	w.time(e.ValidTo)
}

func (w *msgpackWriter) contextState(cs *ContextState) {
	w.body = msgp.AppendMapHeader(w.body, 4)
	w.key("dim")
	w.body = msgp.AppendInt(w.body, cs.Dim)
	w.key("norm")
	w.body = msgp.AppendFloat64(w.body, cs.Norm)
	w.key("top")
	w.list(len(cs.Top), cs.Top == nil, func(i int) {
		w.body = msgp.AppendArrayHeader(w.body, 2)
		w.body = msgp.AppendInt(w.body, cs.Top[i].Dim)
		w.body = msgp.AppendFloat32(w.body, cs.Top[i].Value)
	})
	w.key("vector")
	w.list(len(cs.Vector), cs.Vector == nil, func(i int) { w.body = msgp.AppendFloat32(w.body, cs.Vector[i]) })
}

func (w *msgpackWriter) timings(t *Timings) {
	n := uint32(6)
	if t.KeywordUS != 0 {
		n++
	}
	if t.WaitUS != 0 {
		n++
	}
	w.body = msgp.AppendMapHeader(w.body, n)
	put := func(k string, v int64) {
		w.key(k)
		w.body = msgp.AppendInt64(w.body, v)
	}
	put("embed", t.EmbedUS)
	if t.WaitUS != 0 {
		put("wait", t.WaitUS)
	}
	put("prefilter", t.PrefilterUS)
	if t.KeywordUS != 0 {
		put("keyword", t.KeywordUS)
	}
	put("expand", t.ExpandUS)
	put("rerank", t.RerankUS)
	put("stitch", t.StitchUS)
	put("total", t.TotalUS)
}

// DecodeMsgpackAnswer reads an answer in the msgpack format (the
// layout above, version MsgpackLayoutVersion). It refuses malformed
// input with an error that says where; it allocates at most in
// proportion to len(b).
func DecodeMsgpackAnswer(b []byte) (*Answer, error) {
	r := msgpackReader{b: b}
	a, err := r.answer()
	if err != nil {
		return nil, fmt.Errorf("decode msgpack answer: %w", err)
	}
	return a, nil
}

// msgpackReader reads the msgpack format from b; the first error
// sticks and every later read returns zero values.
//
// A decoded answer is made of few allocations: the table's strings
// share one buffer, and string lists, provenance lists and step
// indices are carved from chunks (carve), so that a client in a
// control loop gives its collector tens of objects per answer, not
// one per string reference.
type msgpackReader struct {
	b     []byte
	err   error
	where string
	table []string
	lists chunks[string]
	provs chunks[particle.Provenance]
	steps chunks[int]
}

// chunks carves slices of T from shared backing arrays, each a
// chunk twice the last one's size, from chunkMin up to chunkMax
// elements (or one slice's length, if more): n slices cost a few
// allocations, and at most chunkMax elements are left unused.
type chunks[T any] struct{ cur []T }

// The sizes of the chunks chunks allocates, in elements.
const (
	chunkMin = 64
	chunkMax = 512
)

// carve returns a zeroed slice of n elements whose capacity is n: an
// append to it moves it out of the chunk instead of writing over the
// next slice.
func (c *chunks[T]) carve(n int) []T {
	if cap(c.cur)-len(c.cur) < n {
		c.cur = make([]T, 0, max(n, min(2*cap(c.cur), chunkMax), chunkMin))
	}
	at := len(c.cur)
	c.cur = c.cur[:at+n]
	return c.cur[at : at+n : at+n]
}

func (r *msgpackReader) fail(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %w", r.where, err)
	}
}

// MsgpackAnswerTimings reads the per-stage timings of a msgpack answer
// without decoding the rest of it (the other fields are skipped): for
// a client that times its requests and wants the daemon's own share.
func MsgpackAnswerTimings(b []byte) (Timings, error) {
	r := msgpackReader{b: b, where: "answer"}
	var t Timings
	n := r.mapHeader()
	for i := uint32(0); i < n && r.err == nil; i++ {
		switch k := r.key(); {
		case k == "v":
			r.version()
		case k == "timings_us":
			r.where = k
			if r.timings(&t); r.err == nil {
				return t, nil
			}
		default:
			r.skip()
		}
	}
	if r.err != nil {
		return Timings{}, fmt.Errorf("decode msgpack answer: %w", r.err)
	}
	return Timings{}, errors.New("decode msgpack answer: no timings_us")
}

// version reads the layout version and fails on any but
// MsgpackLayoutVersion.
func (r *msgpackReader) version() {
	if v := r.int(); r.err == nil && v != MsgpackLayoutVersion {
		r.fail(fmt.Errorf("layout version %d (this reader knows %d)", v, MsgpackLayoutVersion))
	}
}

func (r *msgpackReader) answer() (*Answer, error) {
	r.where = "answer"
	n := r.mapHeader()
	a := &Answer{}
	for i := uint32(0); i < n && r.err == nil; i++ {
		k := r.key()
		r.where = k
		switch {
		case i == 0 && k != "v", i == 1 && k != "strings":
			r.fail(fmt.Errorf(`map key %d is %q: "v" and "strings" come first`, i, k))
		case k == "v":
			r.version()
		case k == "strings":
			r.readTable()
		case k == "nodes":
			a.Nodes = readList(r, (*msgpackReader).node)
		case k == "edges":
			a.Edges = readList(r, (*msgpackReader).edge)
		case k == "unknowns":
			a.Unknowns = readList(r, func(r *msgpackReader) Unknown {
				r.fields(2)
				return Unknown{Kind: r.str(), Name: r.str()}
			})
		case k == "hypotheses":
			a.Hypotheses = readList(r, (*msgpackReader).str)
		case k == "contradictions":
			a.Contradictions = readList(r, func(r *msgpackReader) Contradiction {
				r.fields(6)
				return Contradiction{Subject: r.str(), Predicate: r.str(), EdgeA: r.str(), EdgeB: r.str(),
					ConfidenceA: r.float64(), ConfidenceB: r.float64()}
			})
		case k == "context_state":
			a.ContextState = r.contextState()
		case k == "timings_us":
			r.timings(&a.Timings)
		case k == "strategy":
			a.Strategy = r.plainStr()
		case k == "strategy_reason":
			a.StrategyReason = r.plainStr()
		case k == "truncated":
			a.Truncated = r.bool()
		default:
			r.skip()
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.where = "answer"
		r.fail(fmt.Errorf("%d bytes after the answer", len(r.b)))
	}
	if r.err != nil {
		return nil, r.err
	}
	return a, nil
}

// readList reads an array (nil for nil) of elements read by elem.
func readList[T any](r *msgpackReader, elem func(*msgpackReader) T) []T {
	return readListIn(r, nil, elem)
}

// readListIn is readList carving the list from c (when not nil).
func readListIn[T any](r *msgpackReader, c *chunks[T], elem func(*msgpackReader) T) []T {
	if r.isNil() {
		return nil
	}
	n := r.arrayHeader()
	var out []T
	if c != nil {
		out = c.carve(int(n))
	} else {
		out = make([]T, n)
	}
	for i := range out {
		out[i] = elem(r)
	}
	return out
}

// read reads one value with a msgp reader; on an error it records it
// and returns the zero value (as it does once an error is recorded).
func read[T any](r *msgpackReader, readFrom func([]byte) (T, []byte, error)) (zero T) {
	if r.err != nil {
		return zero
	}
	v, rest, err := readFrom(r.b)
	if err != nil {
		r.fail(err)
		return zero
	}
	r.b = rest
	return v
}

// count checks an array or map length against the bytes left (every
// element takes at least one), so a damaged length cannot allocate
// beyond the input's size.
func (r *msgpackReader) count(n uint32) uint32 {
	if r.err == nil && int64(n) > int64(len(r.b)) {
		r.fail(fmt.Errorf("length %d exceeds the %d bytes left", n, len(r.b)))
	}
	if r.err != nil {
		return 0
	}
	return n
}

func (r *msgpackReader) arrayHeader() uint32 {
	// The writer's records and lists are fixarrays (up to 15
	// elements): read those in line.
	if b := r.b; r.err == nil && len(b) > 0 && b[0]&0xf0 == 0x90 {
		r.b = b[1:]
		return r.count(uint32(b[0] & 0x0f))
	}
	return r.count(read(r, msgp.ReadArrayHeaderBytes))
}
func (r *msgpackReader) mapHeader() uint32 { return r.count(read(r, msgp.ReadMapHeaderBytes)) }

// fields reads a record's array header and checks its length.
func (r *msgpackReader) fields(want uint32) {
	if n := r.arrayHeader(); r.err == nil && n != want {
		r.fail(fmt.Errorf("a record of %d fields, want %d", n, want))
	}
}

func (r *msgpackReader) isNil() bool {
	if r.err != nil || len(r.b) == 0 || msgp.NextType(r.b) != msgp.NilType {
		return false
	}
	r.b = r.b[1:]
	return true
}

func (r *msgpackReader) skip() {
	if r.err != nil {
		return
	}
	rest, err := msgp.Skip(r.b)
	if err != nil {
		r.fail(err)
		return
	}
	r.b = rest
}

// plainStr reads a string written in place (not a table index).
func (r *msgpackReader) plainStr() string { return read(r, msgp.ReadStringBytes) }

// key reads a map key written in place: one the layout names
// (layoutKeys) without allocating, another as a new string.
func (r *msgpackReader) key() string {
	b := read(r, msgp.ReadStringZC)
	if k, ok := layoutKeys[string(b)]; ok {
		return k
	}
	return string(b)
}

// layoutKeys holds the map keys of the layout, each as itself.
var layoutKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"v", "strings", "nodes", "edges", "unknowns", "hypotheses", "contradictions",
		"context_state", "timings_us", "strategy", "strategy_reason", "truncated",
		"dim", "norm", "top", "vector",
		"embed", "prefilter", "keyword", "expand", "rerank", "stitch", "total"} {
		m[k] = k
	}
	return m
}()

// readTable reads the string table into r.table, every string's bytes
// copied into one buffer: a first pass over the table sizes it.
func (r *msgpackReader) readTable() {
	n := r.arrayHeader()
	start, size := r.b, 0
	for range n {
		size += len(read(r, msgp.ReadStringZC))
	}
	if r.err != nil {
		return
	}
	r.b = start
	r.table = make([]string, n)
	buf := make([]byte, 0, size)
	for j := range r.table {
		v := read(r, msgp.ReadStringZC)
		at := len(buf)
		buf = append(buf, v...)
		if len(v) > 0 {
			// buf never grows (its capacity is the sum) and its
			// bytes before at are never written again.
			r.table[j] = unsafe.String(&buf[at], len(v))
		}
	}
}

// str reads a string table index and returns its string.
func (r *msgpackReader) str() string {
	// The writer's indices are positive fixints, uint8s or uint16s
	// (a table of up to 65,535 strings): read those in line.
	var i uint32
	switch b := r.b; {
	case r.err != nil:
		return ""
	case len(b) > 0 && b[0] < 0x80:
		i, r.b = uint32(b[0]), b[1:]
	case len(b) > 2 && b[0] == 0xcd:
		i, r.b = uint32(b[1])<<8|uint32(b[2]), b[3:]
	case len(b) > 1 && b[0] == 0xcc:
		i, r.b = uint32(b[1]), b[2:]
	default:
		if i = read(r, msgp.ReadUint32Bytes); r.err != nil {
			return ""
		}
	}
	if int(i) >= len(r.table) {
		r.fail(fmt.Errorf("string index %d outside a table of %d", i, len(r.table)))
		return ""
	}
	return r.table[i]
}

// strs reads an array of string indices; none is nil.
func (r *msgpackReader) strs() []string {
	n := r.arrayHeader()
	if n == 0 {
		return nil
	}
	out := r.lists.carve(int(n))
	for i := range out {
		out[i] = r.str()
	}
	return out
}

func (r *msgpackReader) int64() int64     { return read(r, msgp.ReadInt64Bytes) }
func (r *msgpackReader) float32() float32 { return read(r, msgp.ReadFloat32Bytes) }

// int reads an integer; a positive fixint, as the writer's hops,
// evidence counts and step indices mostly are, in line.
func (r *msgpackReader) int() int {
	if b := r.b; r.err == nil && len(b) > 0 && b[0] < 0x80 {
		r.b = b[1:]
		return int(b[0])
	}
	return read(r, msgp.ReadIntBytes)
}

// float64 reads a float64 (the writer's scores and confidences), in
// line.
func (r *msgpackReader) float64() float64 {
	if b := r.b; r.err == nil && len(b) > 8 && b[0] == 0xcb {
		r.b = b[9:]
		return math.Float64frombits(binary.BigEndian.Uint64(b[1:9]))
	}
	return read(r, msgp.ReadFloat64Bytes)
}

// bool reads a boolean, in line.
func (r *msgpackReader) bool() bool {
	if b := r.b; r.err == nil && len(b) > 0 && (b[0] == 0xc2 || b[0] == 0xc3) {
		r.b = b[1:]
		return b[0] == 0xc3
	}
	return read(r, msgp.ReadBoolBytes)
}

// time reads a timestamp (nil is the zero time) as UTC: the 4- and
// 8-byte forms appendTimeExt writes in line, others by msgp.
func (r *msgpackReader) time() time.Time {
	if r.isNil() {
		return time.Time{}
	}
	const fixext4, fixext8, timestamp = 0xd6, 0xd7, 0xff
	b := r.b
	switch {
	case r.err != nil:
		return time.Time{}
	case len(b) >= 6 && b[0] == fixext4 && b[1] == timestamp:
		r.b = b[6:]
		return time.Unix(int64(binary.BigEndian.Uint32(b[2:6])), 0).UTC()
	case len(b) >= 10 && b[0] == fixext8 && b[1] == timestamp:
		if v, nsec := binary.BigEndian.Uint64(b[2:10]), binary.BigEndian.Uint64(b[2:10])>>34; nsec < 1e9 {
			r.b = b[10:]
			return time.Unix(int64(v&(1<<34-1)), int64(nsec)).UTC()
		}
	}
	return read(r, msgp.ReadTimeUTCBytes)
}

func (r *msgpackReader) node() NodeOut {
	r.fields(11)
	return NodeOut{
		ID: r.str(), Type: r.str(), Name: r.str(), Aliases: r.strs(), Tags: r.strs(),
		Score: r.float64(), Belief: r.float64(), Seed: r.bool(), Hop: r.int(),
		Episodes: r.strs(), Spans: r.strs(),
	}
}

func (r *msgpackReader) edge() EdgeOut {
	r.fields(18)
	e := EdgeOut{
		ID: r.str(), Source: r.str(), Target: r.str(), SourceName: r.str(), TargetName: r.str(),
		Type: r.str(), Predicate: r.str(), Value: r.str(),
		Confidence: r.float64(), Salience: r.float64(), Score: r.float64(),
		Status: r.str(), Hypothesis: r.bool(), Evidence: r.int(),
	}
	e.Provenance = readListIn(r, &r.provs, (*msgpackReader).provenance)
	r.fields(4)
	e.Scope.TimeRange.From = r.time()
	e.Scope.TimeRange.To = r.time()
	e.Scope.Location = r.str()
	e.Scope.Audience = r.strs()
	e.ValidFrom = r.time()
	e.ValidTo = r.time()
	return e
}

func (r *msgpackReader) provenance() particle.Provenance {
	r.fields(5)
	p := particle.Provenance{EpisodeID: r.str()}
	if !r.isNil() {
		step := &r.steps.carve(1)[0]
		*step = r.int()
		p.StepIndex = step
	}
	p.CMSSpanID = r.str()
	p.Agent = r.str()
	p.ObservedAt = r.time()
	return p
}

func (r *msgpackReader) contextState() *ContextState {
	if r.isNil() {
		return nil
	}
	cs := &ContextState{}
	n := r.mapHeader()
	for range n {
		switch r.key() {
		case "dim":
			cs.Dim = r.int()
		case "norm":
			cs.Norm = r.float64()
		case "top":
			cs.Top = readList(r, func(r *msgpackReader) DimWeight {
				r.fields(2)
				return DimWeight{Dim: r.int(), Value: r.float32()}
			})
		case "vector":
			cs.Vector = readList(r, (*msgpackReader).float32)
		default:
			r.skip()
		}
	}
	return cs
}

func (r *msgpackReader) timings(t *Timings) {
	n := r.mapHeader()
	for range n {
		k := r.key()
		var dst *int64
		switch k {
		case "embed":
			dst = &t.EmbedUS
		case "wait":
			dst = &t.WaitUS
		case "prefilter":
			dst = &t.PrefilterUS
		case "keyword":
			dst = &t.KeywordUS
		case "expand":
			dst = &t.ExpandUS
		case "rerank":
			dst = &t.RerankUS
		case "stitch":
			dst = &t.StitchUS
		case "total":
			dst = &t.TotalUS
		default:
			r.skip()
			continue
		}
		*dst = r.int64()
	}
}
