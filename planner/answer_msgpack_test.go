package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tinylib/msgp/msgp"

	"github.com/ctxgraph/ctxgraph/particle"
)

// jsonValue is a's JSON read back as generic values: two answers with
// equal jsonValues say the same thing (escaping and time zones aside).
func jsonValue(t *testing.T, a *Answer) any {
	t.Helper()
	raw, err := a.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// inUTC returns a with every time in UTC (the msgpack format carries
// instants, not zones).
func inUTC(a *Answer) *Answer {
	c := *a
	c.Edges = slices.Clone(a.Edges)
	utc := func(t *time.Time) {
		if !t.IsZero() {
			*t = t.UTC()
		}
	}
	for i := range c.Edges {
		e := &c.Edges[i]
		utc(&e.ValidFrom)
		utc(&e.ValidTo)
		utc(&e.Scope.TimeRange.From)
		utc(&e.Scope.TimeRange.To)
		if e.Provenance != nil {
			e.Provenance = slices.Clone(e.Provenance)
			for j := range e.Provenance {
				utc(&e.Provenance[j].ObservedAt)
			}
		}
	}
	return &c
}

// finite replaces NaN and the infinities, which JSON cannot hold, in
// the fields randomAnswer fills with them.
func finite(a *Answer) *Answer {
	c := *a
	f := func(x *float64) {
		if math.IsNaN(*x) || math.IsInf(*x, 0) {
			*x = -1.5
		}
	}
	c.Nodes = slices.Clone(a.Nodes)
	for i := range c.Nodes {
		f(&c.Nodes[i].Score)
		f(&c.Nodes[i].Belief)
	}
	c.Edges = slices.Clone(a.Edges)
	for i := range c.Edges {
		f(&c.Edges[i].Confidence)
		f(&c.Edges[i].Salience)
		f(&c.Edges[i].Score)
	}
	c.Contradictions = slices.Clone(a.Contradictions)
	for i := range c.Contradictions {
		f(&c.Contradictions[i].ConfidenceA)
		f(&c.Contradictions[i].ConfidenceB)
	}
	return &c
}

func roundTripMsgpack(t *testing.T, a *Answer) *Answer {
	t.Helper()
	b, ctype, err := Render(a, "msgpack")
	if err != nil {
		t.Fatal(err)
	}
	if ctype != MsgpackMediaType {
		t.Fatalf("media type %q", ctype)
	}
	got, err := DecodeMsgpackAnswer(b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestAnswerMsgpackRoundTrips(t *testing.T) {
	answers := append(labAnswers(t), oddAnswer(), &Answer{}, &Answer{Nodes: []NodeOut{}, Edges: []EdgeOut{}, Hypotheses: []string{}})
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		answers = append(answers, finite(randomAnswer(r)))
	}
	for i, a := range answers {
		got := roundTripMsgpack(t, a)
		if want, have := jsonValue(t, inUTC(a)), jsonValue(t, got); !reflect.DeepEqual(want, have) {
			w, _ := json.Marshal(want)
			h, _ := json.Marshal(have)
			t.Fatalf("answer %d changed on the way:\nwant %s\n got %s", i, w, h)
		}
	}
}

// NaN and the infinities, which the JSON refuses, cross as floats.
func TestAnswerMsgpackCarriesNonFiniteFloats(t *testing.T) {
	a := &Answer{Nodes: []NodeOut{{ID: "n", Score: math.NaN(), Belief: math.Inf(-1)}}}
	got := roundTripMsgpack(t, a)
	if n := got.Nodes[0]; !math.IsNaN(n.Score) || !math.IsInf(n.Belief, -1) {
		t.Errorf("node came back as %+v", n)
	}
}

// A generic MessagePack reader (one that knows nothing of the layout)
// reads the answer whole, and finds what the layout says where it says.
func TestAnswerMsgpackIsStandardMessagePack(t *testing.T) {
	for _, a := range labAnswers(t) {
		b, err := a.AppendMsgpack(nil)
		if err != nil {
			t.Fatal(err)
		}
		v, rest, err := msgp.ReadIntfBytes(b)
		if err != nil || len(rest) != 0 {
			t.Fatalf("generic read: %v, %d bytes left", err, len(rest))
		}
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("answer is a %T", v)
		}
		if m["v"] != int64(MsgpackLayoutVersion) {
			t.Errorf("v = %#v", m["v"])
		}
		table := m["strings"].([]any)
		str := func(x any) string {
			i, ok := x.(uint64)
			if !ok {
				j := x.(int64)
				i = uint64(j)
			}
			return table[i].(string)
		}
		nodes := m["nodes"].([]any)
		if len(nodes) != len(a.Nodes) {
			t.Fatalf("%d nodes, want %d", len(nodes), len(a.Nodes))
		}
		for i, n := range nodes {
			f := n.([]any)
			if len(f) != 11 || str(f[0]) != a.Nodes[i].ID || str(f[2]) != a.Nodes[i].Name || f[5] != a.Nodes[i].Score {
				t.Errorf("node %d = %v; want id %q name %q score %v", i, f, a.Nodes[i].ID, a.Nodes[i].Name, a.Nodes[i].Score)
			}
		}
		for i, e := range m["edges"].([]any) {
			f := e.([]any)
			if len(f) != 18 || str(f[0]) != a.Edges[i].ID || str(f[1]) != a.Edges[i].Source || f[8] != a.Edges[i].Confidence {
				t.Errorf("edge %d = %v", i, f)
			}
			if vf, ok := f[16].(time.Time); !ok || !vf.Equal(a.Edges[i].ValidFrom) {
				t.Errorf("edge %d valid_from = %#v, want %v", i, f[16], a.Edges[i].ValidFrom)
			}
		}
		if m["strategy"] != a.Strategy || m["truncated"] != a.Truncated {
			t.Errorf("strategy %v truncated %v", m["strategy"], m["truncated"])
		}
	}
}

// A string held many times (the same bytes, as an answer's ids are) is
// sent once; an equal string elsewhere in memory may be sent again.
// msgpackTable is the string table of a's msgpack encoding.
func msgpackTable(t *testing.T, a *Answer) []any {
	t.Helper()
	b, err := a.AppendMsgpack(nil)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := msgp.ReadIntfBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)["strings"].([]any)
}

func TestAnswerMsgpackSendsAStringOnce(t *testing.T) {
	id := strings.Repeat("n", 36)
	a := &Answer{}
	for range 100 {
		a.Nodes = append(a.Nodes, NodeOut{ID: id, Type: "entity", Name: id})
	}
	a.Nodes = append(a.Nodes, NodeOut{ID: strings.Clone(id)}) // equal bytes at another place
	if table := msgpackTable(t, a); len(table) != 3 {
		t.Errorf("a table of %d strings for \"\" and 2 distinct ones: %v", len(table), table)
	}
	if got := roundTripMsgpack(t, a); !reflect.DeepEqual(jsonValue(t, got), jsonValue(t, a)) {
		t.Error("the answer changed on the way")
	}
}

// The table's dedup depends on which strings share bytes and on what
// short ones say, not on where they are: two strings whose probes
// start at the same slot are each sent once however they alternate,
// and past the remembered limits a new string is sent per use.
func TestAnswerMsgpackTableDoesNotDependOnAddresses(t *testing.T) {
	// Two long strings of one backing array whose slots collide.
	backing := strings.Repeat("abcdefghijklmnopqrstuvwxyz", 4096)
	at := func(i int) string { return backing[i : i+maxContentKey+1] }
	first := seenSlot(unsafe.StringData(at(0)))
	other := 1
	for seenSlot(unsafe.StringData(at(other))) != first || at(other) == at(0) {
		other++
	}
	// Two short strings whose hashes start at the same slot.
	slot := func(s string) uint64 { return shortHash(s) >> (64 - contentBits) }
	short := "robot-0"
	shortOther := 1
	for slot("robot-"+strconv.Itoa(shortOther)) != slot(short) {
		shortOther++
	}
	// Two short strings of one hash (shortHash reads the length and
	// both ends only): told apart by their contents.
	sameHash := [2]string{"robot-0001/arm/gripper-0001", "robot-0001/leg/gripper-0001"}
	if shortHash(sameHash[0]) != shortHash(sameHash[1]) {
		t.Fatalf("%q and %q were to hash alike", sameHash[0], sameHash[1])
	}
	for _, pair := range [][2]string{{at(0), at(other)}, {short, "robot-" + strconv.Itoa(shortOther)}, sameHash} {
		a := &Answer{Hypotheses: []string{pair[0], pair[1], pair[0], strings.Clone(pair[1])}}
		if len(pair[0]) > maxContentKey {
			a.Hypotheses[3] = pair[1] // long strings repeat at one place
		}
		if got := msgpackTable(t, a); len(got) != 3 {
			t.Errorf("two colliding strings, each held twice: a table of %d (%v), want 3", len(got), got)
		}
	}
	// "" and each string once, up to limit remembered; the rest twice.
	sentOnce := func(distinct, limit int) int { return 1 + min(distinct, limit) + 2*max(0, distinct-limit) }
	for _, c := range []struct {
		name  string
		pad   int  // the strings' length past their number
		clone bool // the second use is a copy at another place
		limit int  // how many strings the table remembers
	}{
		{"a long string at one place", maxContentKey, false, seenSlots / 2},
		{"a short string at one place", 30, false, contentSlots / 2},
		{"a short string at two places", 30, true, contentSlots / 2},
		{"a long string at two places", maxContentKey, true, 0},
	} {
		for _, distinct := range []int{1500, 3000} {
			a := &Answer{}
			for i := range distinct {
				id := strconv.Itoa(i) + strings.Repeat("x", c.pad)
				second := id
				if c.clone {
					second = strings.Clone(id)
				}
				a.Hypotheses = append(a.Hypotheses, id, second)
			}
			if got, want := len(msgpackTable(t, a)), sentOnce(distinct, c.limit); got != want {
				t.Errorf("%s, %d of them used twice: a table of %d, want %d", c.name, distinct, got, want)
			}
			if got := roundTripMsgpack(t, a); !reflect.DeepEqual(got.Hypotheses, a.Hypotheses) {
				t.Errorf("%s, %d of them: the hypotheses changed on the way", c.name, distinct)
			}
		}
	}
}

// shortHash tells apart the strings an answer repeats; a collision
// would only cost a comparison, but a hash that ignored a part of its
// string would collide on every id of a fleet.
func TestShortHashReadsBothEndsAndTheLength(t *testing.T) {
	seen := map[uint64]string{}
	for _, s := range []string{"", "a", "b", "ab", "ba", "abcdefg", "abcdefgh", "abcdefgi", "bbcdefgh",
		"robot-0001", "robot-0002", "robot-1001", "ep-2026-01-01-robot-0001-0001", "ep-2026-01-01-robot-0001-0002",
		"ep-2026-01-01-robot-0002-0001", "ep-2026-01-01-robot-0001-00001"} {
		h := shortHash(s)
		if other, ok := seen[h]; ok {
			t.Errorf("%q and %q hash alike", s, other)
		}
		seen[h] = s
	}
}

// The string table is what makes the format small: even on the lab
// answers, whose strings repeat less than a fleet's, it is under three
// quarters of the JSON's size (a third on BenchmarkAnswerJSONFleet's).
func TestAnswerMsgpackIsSmallerThanJSON(t *testing.T) {
	var js, mp int
	for _, a := range labAnswers(t) {
		j, err := a.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := a.AppendMsgpack(nil)
		if err != nil {
			t.Fatal(err)
		}
		js += len(j)
		mp += len(m)
	}
	if mp*4 > js*3 {
		t.Errorf("msgpack %d bytes against JSON %d", mp, js)
	}
}

func TestDecodeMsgpackAnswerRefusesBadInput(t *testing.T) {
	good, err := oddAnswer().AppendMsgpack(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Every truncation fails, none panics.
	for n := range len(good) {
		if _, err := DecodeMsgpackAnswer(good[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: decoded", n, len(good))
		}
	}
	header := func(fields uint32, version int) []byte {
		b := msgp.AppendMapHeader(nil, fields)
		b = msgp.AppendString(b, "v")
		return msgp.AppendInt(b, version)
	}
	withTable := func(b []byte, ss ...string) []byte {
		b = msgp.AppendString(b, "strings")
		b = msgp.AppendArrayHeader(b, uint32(len(ss)))
		for _, s := range ss {
			b = msgp.AppendString(b, s)
		}
		return b
	}
	node := func(b []byte, id uint32) []byte {
		b = msgp.AppendArrayHeader(b, 11)
		b = msgp.AppendUint32(b, id)
		for range 2 {
			b = msgp.AppendUint32(b, 0)
		}
		for range 2 {
			b = msgp.AppendArrayHeader(b, 0)
		}
		b = msgp.AppendFloat64(b, 1)
		b = msgp.AppendFloat64(b, 1)
		b = msgp.AppendBool(b, true)
		b = msgp.AppendInt(b, 0)
		for range 2 {
			b = msgp.AppendArrayHeader(b, 0)
		}
		return b
	}
	nodes := func(b []byte, n uint32) []byte {
		b = msgp.AppendString(b, "nodes")
		return msgp.AppendArrayHeader(b, n)
	}
	valid := node(nodes(withTable(header(3, 1), "n1"), 1), 0)
	if a, err := DecodeMsgpackAnswer(valid); err != nil || len(a.Nodes) != 1 || a.Nodes[0].ID != "n1" {
		t.Fatalf("the hand-made answer: %+v, %v", a, err)
	}
	for _, c := range []struct {
		name, want string
		b          []byte
	}{
		{"not a map", "answer", msgp.AppendArrayHeader(nil, 0)},
		{"another version", "layout version 2", withTable(header(2, 2))},
		{"strings not first", `"v" and "strings" come first`, nodes(header(2, 1), 0)},
		{"index outside the table", "string index 1 outside a table of 1", node(nodes(withTable(header(3, 1), "n1"), 1), 1)},
		{"a node of 10 fields", "a record of 10 fields, want 11", append(nodes(withTable(header(3, 1), "n1"), 1), 0x9a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"a huge count", "length 4294967295 exceeds", msgp.AppendArrayHeader(nodes(withTable(header(3, 1), "n1"), 1), math.MaxUint32)},
		{"a huge table", "length 4294967295 exceeds", msgp.AppendArrayHeader(msgp.AppendString(header(2, 1), "strings"), math.MaxUint32)},
		{"a string for an index", "nodes", msgp.AppendString(msgp.AppendArrayHeader(nodes(withTable(header(3, 1), "n1"), 1), 11), "n1")},
		{"bytes after the answer", "1 bytes after the answer", append(valid[:len(valid):len(valid)], 0xc0)},
	} {
		_, err := DecodeMsgpackAnswer(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one that says %q", c.name, err, c.want)
		}
	}
}

// Keys a reader does not know are skipped, so a newer writer can add
// sections.
func TestDecodeMsgpackAnswerSkipsUnknownKeys(t *testing.T) {
	a := oddAnswer()
	b, err := a.AppendMsgpack(nil)
	if err != nil {
		t.Fatal(err)
	}
	n, rest, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	more := msgp.AppendMapHeader(nil, n+1)
	more = append(more, rest...)
	more = msgp.AppendString(more, "future")
	more = msgp.AppendArrayHeader(more, 2)
	more = msgp.AppendString(more, "x")
	more = msgp.AppendFloat64(more, 1)
	got, err := DecodeMsgpackAnswer(more)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(jsonValue(t, got), jsonValue(t, inUTC(a))) {
		t.Error("the answer changed with an unknown key beside it")
	}
}

func FuzzDecodeMsgpackAnswer(f *testing.F) {
	for _, a := range []*Answer{oddAnswer(), {}} {
		b, err := a.AppendMsgpack(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		b, _ := randomAnswer(r).AppendMsgpack(nil)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeMsgpackAnswer(b)
		if err != nil {
			if a != nil {
				t.Fatal("an answer with an error")
			}
			return
		}
		// What decodes re-encodes to an answer that decodes the same.
		again, err := a.AppendMsgpack(nil)
		if err != nil {
			t.Fatal(err)
		}
		b2, err := DecodeMsgpackAnswer(again)
		if err != nil {
			t.Fatalf("re-encoded answer: %v", err)
		}
		x, _ := b2.AppendMsgpack(nil)
		if !bytes.Equal(x, again) {
			t.Fatal("the second round trip changed the bytes")
		}
	})
}

func TestMsgpackErrorsSayWhere(t *testing.T) {
	b, _ := (&Answer{Edges: []EdgeOut{{ID: "e"}}}).AppendMsgpack(nil)
	at := bytes.Index(b, []byte("edges"))
	_, err := DecodeMsgpackAnswer(b[:at+8])
	if err == nil || !strings.HasPrefix(err.Error(), "decode msgpack answer: edges: ") || !errors.Is(err, msgp.ErrShortBytes) {
		t.Errorf("error %v", err)
	}
}

// TestAppendTimeExtMatchesMsgp: the answer's time encoding writes the
// bytes msgp.AppendTimeExt writes, for times in all three of the
// extension's forms (whole seconds in 32 bits, 34-bit seconds with
// nanoseconds, the 12-byte form before 1970 and after 2514), and a
// reader decodes them to the same instant.
func TestAppendTimeExtMatchesMsgp(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	times := []time.Time{time.Unix(0, 0), time.Unix(1, 0), time.Unix(math.MaxUint32, 0), time.Unix(math.MaxUint32+1, 0),
		time.Unix(1<<34-1, 999999999), time.Unix(1<<34, 0), time.Unix(-1, 0), time.Unix(-1, 1), time.Unix(0, 1),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}
	for range 20000 {
		sec := r.Int64N(1<<36) - 1<<35 // 1 000 years either side of 1970
		nsec := int64(0)
		if r.IntN(3) > 0 {
			nsec = r.Int64N(1e9)
		}
		loc := time.UTC
		if r.IntN(4) == 0 {
			loc = time.FixedZone("x", 3600*(r.IntN(25)-12))
		}
		times = append(times, time.Unix(sec, nsec).In(loc))
	}
	for _, tm := range times {
		got, want := appendTimeExt([]byte{1}, tm), msgp.AppendTimeExt([]byte{1}, tm)
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: % x, msgp writes % x", tm, got, want)
		}
		back, _, err := msgp.ReadTimeBytes(got[1:])
		if err != nil || !back.Equal(tm) {
			t.Fatalf("%v: read back as %v, %v", tm, back, err)
		}
	}
}

// BenchmarkAppendTimeExt: the answer's time encoding against msgp's.
func BenchmarkAppendTimeExt(b *testing.B) {
	tm := time.Date(2026, 6, 1, 8, 0, 0, 123456789, time.UTC)
	buf := make([]byte, 0, 64)
	b.Run("answer", func(b *testing.B) {
		for b.Loop() {
			buf = appendTimeExt(buf[:0], tm)
		}
	})
	b.Run("msgp", func(b *testing.B) {
		for b.Loop() {
			buf = msgp.AppendTimeExt(buf[:0], tm)
		}
	})
}

// bigAnswer is an answer of the fleet's size: nodes with lists of
// strings, edges with provenance (most with a step index).
func bigAnswer() *Answer {
	a := &Answer{Strategy: "semantic"}
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for i := range 100 {
		a.Nodes = append(a.Nodes, NodeOut{ID: fmt.Sprintf("node-%d", i), Type: "entity", Name: fmt.Sprintf("thing %d", i),
			Aliases: []string{fmt.Sprintf("alias-%d", i), "shared"}, Tags: []string{"t"}, Episodes: []string{fmt.Sprintf("ep-%d", i%17)}})
	}
	for i := range 150 {
		e := EdgeOut{ID: fmt.Sprintf("edge-%d", i), Source: a.Nodes[i%100].ID, Target: a.Nodes[(i*7)%100].ID, Type: "fact",
			Predicate: "near", Value: fmt.Sprintf("value %d", i), Confidence: 0.5, Status: "current",
			Scope: particle.Scope{Location: "lab", Audience: []string{"planner", "operator"}}, ValidFrom: at}
		for j := range 4 {
			step := i*4 + j
			p := particle.Provenance{EpisodeID: fmt.Sprintf("ep-%d", i%17), Agent: "robot-1", ObservedAt: at}
			if j != 3 {
				p.StepIndex = &step
			}
			e.Provenance = append(e.Provenance, p)
		}
		a.Edges = append(a.Edges, e)
	}
	return a
}

func TestDecodeMsgpackAnswerAllocatesBySectionNotByString(t *testing.T) {
	a := bigAnswer()
	b, err := a.AppendMsgpack(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMsgpackAnswer(b)
	if err != nil {
		t.Fatal(err)
	}
	if want, have := jsonValue(t, a), jsonValue(t, got); !reflect.DeepEqual(want, have) {
		t.Fatal("the answer changed on the way")
	}
	// About 2,400 string references, 600 provenance entries and 450
	// step indices: a few dozen allocations, not one for each.
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := DecodeMsgpackAnswer(b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 40 {
		t.Fatalf("decoding allocated %.0f times", allocs)
	}
}

func TestDecodeMsgpackAnswerSlicesStandAlone(t *testing.T) {
	got, err := DecodeMsgpackAnswer(must(bigAnswer().AppendMsgpack(nil)))
	if err != nil {
		t.Fatal(err)
	}
	// Lists carved from one chunk: an append to one must not write
	// over the next, nor a step index written through one edge's
	// provenance show in another's.
	n0, n1 := &got.Nodes[0], &got.Nodes[1]
	n0.Aliases = append(n0.Aliases, "extra")
	n0.Tags = append(n0.Tags, "extra")
	if n1.Aliases[0] != "alias-1" || n0.Tags[0] != "t" || got.Nodes[0].Episodes[0] != "ep-0" {
		t.Fatalf("an append wrote over a neighbour: %q %q %q", n1.Aliases, n0.Tags, got.Nodes[0].Episodes)
	}
	e0, e1 := &got.Edges[0], &got.Edges[1]
	e0.Provenance = append(e0.Provenance, particle.Provenance{EpisodeID: "new"})
	*e0.Provenance[0].StepIndex = -1
	if e1.Provenance[0].EpisodeID != "ep-1" || *e1.Provenance[0].StepIndex != 4 || *e0.Provenance[1].StepIndex != 1 {
		t.Fatalf("writing one edge's provenance changed another's: %+v", e1.Provenance[0])
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The reader's in-line forms read what msgp reads, and leave the rest
// to it.
func TestMsgpackReaderInLineFormsAgreeWithMsgp(t *testing.T) {
	times := []time.Time{time.Unix(1, 0), time.Unix(math.MaxUint32, 0), time.Unix(1<<33, 999_999_999),
		time.Unix(1_800_000_000, 5), time.Unix(-5, 7), time.Unix(1<<35, 1)}
	for _, tm := range times {
		b := appendTimeExt(nil, tm)
		r := msgpackReader{b: b}
		want, _, err := msgp.ReadTimeUTCBytes(b)
		if got := r.time(); err != nil || r.err != nil || !got.Equal(want) || got.Location() != time.UTC || len(r.b) != 0 {
			t.Errorf("time %v: got %v (%v), msgp %v (%v), %d bytes left", tm, got, r.err, want, err, len(r.b))
		}
	}
	for _, n := range []int64{0, 1, 127, 128, 255, 70_000, -1, -33, -200, math.MaxInt64, math.MinInt64} {
		r := msgpackReader{b: msgp.AppendInt64(nil, n)}
		if got := r.int(); r.err != nil || int64(got) != n || len(r.b) != 0 {
			t.Errorf("int %d: got %d (%v)", n, got, r.err)
		}
	}
	for _, f := range []float64{0, -1.5, math.Inf(1), math.MaxFloat64, 1e-300} {
		r := msgpackReader{b: msgp.AppendFloat64(nil, f)}
		if got := r.float64(); r.err != nil || got != f || len(r.b) != 0 {
			t.Errorf("float64 %v: got %v (%v)", f, got, r.err)
		}
	}
	for _, v := range []bool{false, true} {
		r := msgpackReader{b: msgp.AppendBool(nil, v)}
		if got := r.bool(); r.err != nil || got != v || len(r.b) != 0 {
			t.Errorf("bool %v: got %v (%v)", v, got, r.err)
		}
	}
	for _, n := range []uint32{0, 15, 16, 70_000} {
		b := msgp.AppendArrayHeader(nil, n)
		r := msgpackReader{b: append(b, make([]byte, n)...)}
		if got := r.arrayHeader(); r.err != nil || got != n || len(r.b) != int(n) {
			t.Errorf("array of %d: got %d (%v)", n, got, r.err)
		}
	}
	// A wrong type is an error, in line or not.
	for _, b := range [][]byte{msgp.AppendString(nil, "x"), {0xcb, 1}} {
		r := msgpackReader{b: b}
		if r.float64(); r.err == nil {
			t.Errorf("float64 from % x: no error", b)
		}
	}
}
