package planner

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The non-JSON formats (triples, cypher, turtle, text) render the same
// information, read from one graphView of the answer:
//
//   - every node: id, type, name, aliases, tags, belief, score, seed,
//     hop, RLDS episodes and CMS spans;
//   - every edge: id, source, predicate, target, edge type, value,
//     confidence, salience, score, status, hypothesis, evidence,
//     validity (valid_from, valid_to), scope (time range, location,
//     audience) and every provenance record;
//   - contradictions (pairs of edges), unknowns, the strategy and
//     whether the budget truncated the answer.
//
// The facts of an answer — one per typed node ("type"), one per edge
// (its predicate) and one per contradiction ("contradicts") — are the
// lines of the triples format, the asserted triples of the Turtle
// (node rdf:type class, source rel:predicate target, edge
// ctx:contradicts edge; the rest of Turtle describes those) and the
// nodes, relationships and contradicts lists of the Cypher. Timings and
// the context state vector are JSON only: they describe the request,
// not the graph.
type graphView struct {
	a     *Answer
	nodes []NodeOut // the answer's nodes, then stubs for edge endpoints not among them
	index map[string]int
	label map[string]string // node id -> readable label, unique within the answer
	// contra maps an edge id to the edges it contradicts in this answer.
	contra map[string][]string
}

func newGraphView(a *Answer) *graphView {
	g := &graphView{a: a, index: map[string]int{}, label: map[string]string{}, contra: map[string][]string{}}
	add := func(n NodeOut) {
		if _, ok := g.index[n.ID]; !ok {
			g.index[n.ID] = len(g.nodes)
			g.nodes = append(g.nodes, n)
		}
	}
	for _, n := range a.Nodes {
		add(n)
	}
	for _, e := range a.Edges {
		add(NodeOut{ID: e.Source, Name: e.SourceName})
		add(NodeOut{ID: e.Target, Name: e.TargetName})
	}
	// Labels are names; a name shared by two nodes is qualified by type,
	// and then by id.
	count := map[string]int{}
	for _, n := range g.nodes {
		count[n.Name]++
	}
	for _, n := range g.nodes {
		l := n.Name
		if count[n.Name] > 1 {
			l = n.Name + " (" + n.Type + " " + n.ID + ")"
		}
		g.label[n.ID] = l
	}
	for _, c := range a.Contradictions {
		g.contra[c.EdgeA] = append(g.contra[c.EdgeA], c.EdgeB)
	}
	return g
}

// typed reports whether n is a node of the answer with a type (stubs,
// edge endpoints the answer does not list, have none).
func typed(n NodeOut) bool { return n.Type != "" }

// num formats a float with at most 6 decimals and no exponent; ok is
// false for NaN and infinities, which every format leaves out.
func num(v float64) (string, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "", false
	}
	r := math.Round(v*1e6) / 1e6
	if r == 0 {
		r = 0 // no "-0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64), true
}

// stamp formats a time as RFC 3339 in UTC.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// pascal turns a snake_case type name into a PascalCase class or label
// name ("context_session" -> "ContextSession"); other characters are
// kept for the caller to escape.
func pascal(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '_' || r == ' ' {
			up = true
			continue
		}
		if up {
			b.WriteRune(unicode.ToUpper(r))
			up = false
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// asciiIdent reports whether s is [A-Za-z_][A-Za-z0-9_]*.
func asciiIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// validUTF8 replaces invalid bytes, which no format can carry.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// fieldKind is how a field's value is typed in the formats that type
// values (Turtle literals, Cypher values).
type fieldKind uint8

const (
	fieldString fieldKind = iota
	fieldStrings
	fieldNumber // float; NaN and infinities are left out
	fieldInt
	fieldBool
	fieldTime // the zero time is left out
)

// field is one property of a node or an edge, named once for every
// format: key (snake_case: triples, Cypher) and rdf (the Turtle ctx:
// property, singular for lists: one triple per value).
type field struct {
	key, rdf string
	kind     fieldKind
	s        string
	ss       []string
	f        float64
	i        int
	b        bool
	t        time.Time
}

// empty reports whether the field has no value to write.
func (f field) empty() bool {
	switch f.kind {
	case fieldString:
		return f.s == ""
	case fieldStrings:
		return len(f.ss) == 0
	case fieldNumber:
		_, ok := num(f.f)
		return !ok
	case fieldTime:
		return f.t.IsZero()
	}
	return false
}

// nodeFields are a typed node's properties beyond its id, name and type.
func nodeFields(n NodeOut) []field {
	return []field{
		{key: "aliases", rdf: "alias", kind: fieldStrings, ss: n.Aliases},
		{key: "tags", rdf: "tag", kind: fieldStrings, ss: n.Tags},
		{key: "belief", rdf: "belief", kind: fieldNumber, f: n.Belief},
		{key: "score", rdf: "score", kind: fieldNumber, f: n.Score},
		{key: "seed", rdf: "seed", kind: fieldBool, b: n.Seed},
		{key: "hop", rdf: "hop", kind: fieldInt, i: n.Hop},
		{key: "rlds_episode_ids", rdf: "episode", kind: fieldStrings, ss: n.Episodes},
		{key: "cms_span_ids", rdf: "cmsSpan", kind: fieldStrings, ss: n.Spans},
	}
}

// edgeFields are an edge's properties beyond its id, endpoints,
// predicate, provenance and contradictions.
func edgeFields(e EdgeOut) []field {
	return []field{
		{key: "edge_type", rdf: "edgeType", kind: fieldString, s: e.Type},
		{key: "value", rdf: "value", kind: fieldString, s: e.Value},
		{key: "confidence", rdf: "confidence", kind: fieldNumber, f: e.Confidence},
		{key: "salience", rdf: "salience", kind: fieldNumber, f: e.Salience},
		{key: "score", rdf: "score", kind: fieldNumber, f: e.Score},
		{key: "status", rdf: "status", kind: fieldString, s: e.Status},
		{key: "hypothesis", rdf: "hypothesis", kind: fieldBool, b: e.Hypothesis},
		{key: "evidence", rdf: "evidence", kind: fieldInt, i: e.Evidence},
		{key: "valid_from", rdf: "validFrom", kind: fieldTime, t: e.ValidFrom},
		{key: "valid_to", rdf: "validTo", kind: fieldTime, t: e.ValidTo},
		{key: "scope_from", rdf: "scopeFrom", kind: fieldTime, t: e.Scope.TimeRange.From},
		{key: "scope_to", rdf: "scopeTo", kind: fieldTime, t: e.Scope.TimeRange.To},
		{key: "location", rdf: "location", kind: fieldString, s: e.Scope.Location},
		{key: "audience", rdf: "audience", kind: fieldStrings, ss: e.Scope.Audience},
	}
}

// escapeLiteral writes s between quote characters q with the escapes
// Turtle and openCypher share: \\, \q, \n \r \t \b \f, and \uXXXX for
// the other controls (needsUnicodeEscape); invalid UTF-8 becomes U+FFFD.
func escapeLiteral(s string, q rune) string {
	var b strings.Builder
	b.WriteRune(q)
	for _, r := range validUTF8(s) {
		switch r {
		case q, '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if needsUnicodeEscape(r) {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteRune(q)
	return b.String()
}

// needsUnicodeEscape: C0 and C1 controls, DEL, line and paragraph
// separators and the BOM are written as \uXXXX in every format.
func needsUnicodeEscape(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r < 0xa0) || r == 0x2028 || r == 0x2029 || r == 0xfeff
}
