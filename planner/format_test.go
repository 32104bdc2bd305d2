package planner

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner/plannertest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var formatNames = []string{"triples", "cypher", "turtle", "text"}

// labAnswers are answers over the lab fixture that between them hold
// every part a format renders: superseded and contradicted facts,
// values, CMS-span provenance, unknowns, hypotheses, truncation.
func labAnswers(t *testing.T) []*Answer {
	f := lab(t, true)
	var out []*Answer
	for _, req := range []Request{
		{Query: "where is the red block", Hops: 2},
		{Entities: []string{"red block", "green cube"}, Tools: []string{"laser"}, Strategy: StrategyTemporal, Hops: 2},
		{Query: "SN-4471-XQ", Hops: 2},
		{Query: "conveyor speed", Strategy: StrategyHybrid},
		{Query: "red block", Budget: 3},
	} {
		out = append(out, f.plan(req))
	}
	var contra, unknown, values, spans bool
	for _, a := range out {
		contra = contra || len(a.Contradictions) > 0
		unknown = unknown || len(a.Unknowns) > 0
		for _, e := range a.Edges {
			values = values || e.Value != ""
			for _, p := range e.Provenance {
				spans = spans || p.CMSSpanID != ""
			}
		}
	}
	if !contra || !unknown || !values || !spans {
		t.Fatalf("lab answers lack a part: contradictions %v unknowns %v values %v span provenance %v", contra, unknown, values, spans)
	}
	return out
}

func render(t *testing.T, a *Answer, format string) string {
	t.Helper()
	b, ctype, err := Render(a, format)
	if err != nil {
		t.Fatalf("render %s: %v", format, err)
	}
	if ctype == "" || !utf8.Valid(b) {
		t.Fatalf("render %s: content type %q, valid UTF-8 %v", format, ctype, utf8.Valid(b))
	}
	return string(b)
}

func TestEveryFormatIsRegistered(t *testing.T) {
	if got := Formats(); !slices.Equal(got, []string{"cypher", "json", "msgpack", "text", "triples", "turtle"}) {
		t.Errorf("Formats() = %v", got)
	}
	for _, f := range formatNames {
		r := Request{Format: f}
		if err := r.normalize(4); err != nil {
			t.Errorf("format %s refused: %v", f, err)
		}
	}
	r := Request{Format: "rdf/xml"}
	if err := r.normalize(4); err == nil {
		t.Error("unknown format accepted")
	}
}

// iriOf is what a Turtle parser makes of qname(prefix, base, local).
func iriOf(base, local string) string { return base + pctEncode(local) }

// expectedFacts are the facts of an answer as IRIs, sorted and unique.
func expectedFacts(a *Answer) [][3]string {
	g := newGraphView(a)
	var out [][3]string
	for _, n := range g.nodes {
		if typed(n) {
			out = append(out, [3]string{iriOf(nsNode, n.ID), "type", iriOf(nsCtx, pascal(n.Type))})
		}
	}
	for _, e := range a.Edges {
		p := e.Predicate
		if p == "" {
			p = "related_to"
		}
		out = append(out, [3]string{iriOf(nsNode, e.Source), iriOf(nsRel, p), iriOf(nsNode, e.Target)})
	}
	for _, c := range a.Contradictions {
		out = append(out, [3]string{iriOf(nsEdge, c.EdgeA), "contradicts", iriOf(nsEdge, c.EdgeB)})
	}
	return sortedUnique(out)
}

func sortedUnique(fs [][3]string) [][3]string {
	slices.SortFunc(fs, func(a, b [3]string) int {
		return strings.Compare(strings.Join(a[:], "\x00"), strings.Join(b[:], "\x00"))
	})
	return slices.Compact(fs)
}

// readTok reads one token of a triples line: a Go-quoted string, or a
// bare run up to a space; "edge:" may prefix either.
func readTok(t *testing.T, s string) (string, string) {
	t.Helper()
	prefix := ""
	if strings.HasPrefix(s, "edge:") {
		prefix, s = "edge:", s[len("edge:"):]
	}
	if strings.HasPrefix(s, `"`) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			t.Fatalf("triples token %q: %v", s, err)
		}
		u, _ := strconv.Unquote(q)
		return prefix + u, strings.TrimPrefix(s[len(q):], " ")
	}
	tok, rest, _ := strings.Cut(s, " ")
	return prefix + tok, rest
}

// triplesFacts parses the triples format back into facts as IRIs, and
// counts its fact lines.
func triplesFacts(t *testing.T, a *Answer, text string) ([][3]string, int) {
	t.Helper()
	g := newGraphView(a)
	byLabel := map[string]string{}
	for id, l := range g.label {
		byLabel[l] = id
	}
	var out [][3]string
	lines := 0
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		lines++
		s, rest := readTok(t, line)
		p, rest := readTok(t, rest)
		o, rest := readTok(t, rest)
		if !strings.HasPrefix(rest, "|") {
			t.Fatalf("triples line %q: no annotations after the object (rest %q)", line, rest)
		}
		switch p {
		case "type":
			id, ok := byLabel[s]
			if !ok {
				t.Fatalf("triples line %q: unknown subject %q", line, s)
			}
			out = append(out, [3]string{iriOf(nsNode, id), "type", iriOf(nsCtx, pascal(o))})
		case "contradicts":
			out = append(out, [3]string{iriOf(nsEdge, strings.TrimPrefix(s, "edge:")), "contradicts", iriOf(nsEdge, strings.TrimPrefix(o, "edge:"))})
		default:
			if p == `` {
				p = "related_to"
			}
			out = append(out, [3]string{iriOf(nsNode, byLabel[s]), iriOf(nsRel, p), iriOf(nsNode, byLabel[o])})
		}
	}
	return sortedUnique(out), lines
}

// checkTurtle parses every answer's Turtle with rdflib and checks it
// against the answer and against the triples format: the same facts,
// as many as the triples format has lines, and the edges' metadata.
func checkTurtle(t *testing.T, answers []*Answer) {
	t.Helper()
	docs := make([]string, len(answers))
	for i, a := range answers {
		docs[i] = render(t, a, "turtle")
	}
	for i, res := range plannertest.ParseTurtle(t, docs...) {
		a := answers[i]
		if res.Error != "" {
			t.Errorf("answer %d: rdflib: %s\n%s", i, res.Error, docs[i])
			continue
		}
		want := expectedFacts(a)
		tf, lines := triplesFacts(t, a, render(t, a, "triples"))
		if !slices.Equal(res.Facts, want) || !slices.Equal(tf, want) {
			t.Errorf("answer %d facts:\nturtle  %v\ntriples %v\nwant    %v", i, res.Facts, tf, want)
		}
		if len(res.Facts) != lines {
			t.Errorf("answer %d: %d facts in the Turtle, %d lines in the triples format", i, len(res.Facts), lines)
		}
		for _, n := range newGraphView(a).nodes {
			if got := res.Names[iriOf(nsNode, n.ID)]; n.Name != "" && !slices.Equal(got, []string{validUTF8(n.Name)}) {
				t.Errorf("answer %d node %q: rdflib name %q", i, n.ID, got)
			}
		}
		for _, e := range a.Edges {
			checkEdgeMeta(t, e, res.Edges[iriOf(nsEdge, e.ID)])
		}
	}
}

func checkEdgeMeta(t *testing.T, e EdgeOut, got map[string][]string) {
	t.Helper()
	one := func(k string) string {
		if len(got[k]) != 1 {
			t.Errorf("edge %q: %s = %q, want one value", e.ID, k, got[k])
			return ""
		}
		return got[k][0]
	}
	if s, ok := num(e.Confidence); ok {
		if v, err := strconv.ParseFloat(one("confidence"), 64); err != nil || math.Abs(v-mustFloat(s)) > 1e-12 {
			t.Errorf("edge %q: confidence %q, want %s", e.ID, got["confidence"], s)
		}
	}
	if e.Status != "" && one("status") != validUTF8(e.Status) {
		t.Errorf("edge %q: status %q", e.ID, got["status"])
	}
	if e.Value != "" && one("value") != validUTF8(e.Value) {
		t.Errorf("edge %q: value %q, want %q", e.ID, got["value"], e.Value)
	}
	if !e.ValidFrom.IsZero() {
		// rdflib reads times into Python datetimes: microseconds.
		v, err := time.Parse(time.RFC3339Nano, strings.Replace(one("validFrom"), "+00:00", "Z", 1))
		if d := v.Sub(e.ValidFrom); err != nil || d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("edge %q: validFrom %q, want %v", e.ID, got["validFrom"], e.ValidFrom)
		}
	}
	if one("evidence") != strconv.Itoa(e.Evidence) {
		t.Errorf("edge %q: evidence %q, want %d", e.ID, got["evidence"], e.Evidence)
	}
	if len(got["provenance"]) != len(e.Provenance) {
		t.Errorf("edge %q: %d provenance records, want %d", e.ID, len(got["provenance"]), len(e.Provenance))
	}
}

func mustFloat(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	return v
}

func TestTurtleParsesAndMatchesTriples(t *testing.T) {
	checkTurtle(t, labAnswers(t))
}

// checkCypher parses the Cypher of an answer with the checker and
// compares what it declares with the answer.
func checkCypher(t *testing.T, a *Answer) {
	t.Helper()
	src := render(t, a, "cypher")
	st, err := plannertest.ParseCypher(src)
	if err != nil {
		t.Fatalf("cypher: %v\n%s", err, src)
	}
	g := newGraphView(a)
	if len(st.Nodes) != len(g.nodes) || len(st.Rels) != len(a.Edges) || st.Return != [2]int{len(g.nodes), len(a.Edges)} {
		t.Fatalf("cypher: %d nodes %d rels return %v, want %d and %d", len(st.Nodes), len(st.Rels), st.Return, len(g.nodes), len(a.Edges))
	}
	vars := map[string]string{}
	for i, n := range g.nodes {
		c := st.Nodes[i]
		vars[c.Var] = c.ID
		if c.ID != validUTF8(n.ID) || c.Props["name"] != nonEmpty(validUTF8(n.Name)) {
			t.Errorf("node %d: id %q name %v, want %q %q", i, c.ID, c.Props["name"], n.ID, n.Name)
		}
		want := []string{"CtxNode"}
		if typed(n) {
			want = append(want, cypherNameText(pascal(n.Type), "Node"))
			if c.Props["type"] != validUTF8(n.Type) || !slices.Equal(strList(c.Props["aliases"]), validAll(n.Aliases)) {
				t.Errorf("node %d: type %v aliases %v, want %q %q", i, c.Props["type"], c.Props["aliases"], n.Type, n.Aliases)
			}
		}
		if !slices.Equal(c.Labels, want) {
			t.Errorf("node %d labels %q, want %q", i, c.Labels, want)
		}
	}
	for i, e := range a.Edges {
		r := st.Rels[i]
		if r.ID != validUTF8(e.ID) || vars[r.From] != validUTF8(e.Source) || vars[r.To] != validUTF8(e.Target) {
			t.Errorf("rel %d: %s (%s)->(%s), want %q %q->%q", i, r.ID, vars[r.From], vars[r.To], e.ID, e.Source, e.Target)
		}
		if r.Type != cypherNameText(relType(e.Predicate), "RELATED_TO") || r.Props["predicate"] != nonEmpty(validUTF8(e.Predicate)) {
			t.Errorf("rel %d: type %q predicate %v, from %q", i, r.Type, r.Props["predicate"], e.Predicate)
		}
		if r.Props["value"] != nonEmpty(validUTF8(e.Value)) {
			t.Errorf("rel %d: value %v, want %q", i, r.Props["value"], e.Value)
		}
		if s, ok := num(e.Confidence); ok && r.Props["confidence"] != mustFloat(s) {
			t.Errorf("rel %d: confidence %v, want %s", i, r.Props["confidence"], s)
		}
		if !e.ValidFrom.IsZero() && r.Props["valid_from"] != plannertest.CypherDateTime(stamp(e.ValidFrom)) {
			t.Errorf("rel %d: valid_from %v", i, r.Props["valid_from"])
		}
		if !e.ValidTo.IsZero() && r.Props["valid_to"] != plannertest.CypherDateTime(stamp(e.ValidTo)) {
			t.Errorf("rel %d: valid_to %v", i, r.Props["valid_to"])
		}
		if len(e.Provenance) > 0 {
			eps, _ := r.Props["provenance_episode_ids"].([]any)
			steps, _ := r.Props["provenance_steps"].([]any)
			if len(eps) != len(e.Provenance) || len(steps) != len(e.Provenance) {
				t.Errorf("rel %d: provenance lists %v %v, want %d records", i, eps, steps, len(e.Provenance))
			}
		}
	}
}

// nonEmpty is what a map literal holds for a string property: nothing
// when it is empty.
func nonEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func strList(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func validAll(ss []string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, validUTF8(s))
	}
	return out
}

func TestCypherParsesAndMatchesTheAnswer(t *testing.T) {
	for _, a := range labAnswers(t) {
		checkCypher(t, a)
	}
}

// hostile pieces: quotes, backslashes and escape look-alikes,
// newlines, controls, backquotes, Unicode (separators, astral, BOM),
// invalid UTF-8, and the syntax of every format.
var hostile = []string{
	"'", `"`, `\`, "\n", "\r", "\t", "\b", "\f", "`", "``", "|", "=", ",", "#", "<", ">", "{", "}", "(", ")",
	"é", "日本", "🤖", "\u2028", "\u2029", "\ufeff", "\x00", "\x1b", "\x7f", "\u0085", " ", "  ", "//", "/*", "*/",
	"MERGE", "RETURN", "a", "Z", "0", "9", ";", ":", "%", "%41", "\uFFFD", "@prefix", "^^", "_:", "[]", "\xff", "\xc3",
	`\u0041`, `\'`, `\n`, "-", ".", "~", "node:", "<https://x>", "\"\"\"", "'''", "-->", "rdf:type",
}

func hostileString(r *rand.Rand, minParts int) string {
	var b strings.Builder
	for range minParts + r.IntN(6) {
		b.WriteString(hostile[r.IntN(len(hostile))])
	}
	return b.String()
}

func hostileList(r *rand.Rand) []string {
	var out []string
	for range r.IntN(3) {
		out = append(out, hostileString(r, 1))
	}
	return out
}

func hostileFloat(r *rand.Rand) float64 {
	switch r.IntN(10) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1 - 2*r.IntN(2))
	case 2:
		return -r.Float64()
	case 3:
		return 1e-9
	}
	return r.Float64()
}

func hostileTime(r *rand.Rand) time.Time {
	if r.IntN(3) == 0 {
		return time.Time{}
	}
	return time.Date(2000+r.IntN(100), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e9), time.FixedZone("x", 3600*(r.IntN(25)-12)))
}

// randomAnswer builds an answer from hostile strings: ids, names,
// types, predicates, values, lists and provenance.
func randomAnswer(r *rand.Rand) *Answer {
	a := &Answer{Strategy: hostileString(r, 0), StrategyReason: hostileString(r, 0), Truncated: r.IntN(2) == 0}
	var ids []string
	for i := range 1 + r.IntN(5) {
		id := hostileString(r, 1) + strconv.Itoa(i)
		ids = append(ids, id)
		typ := string(particle.NodeTypes[r.IntN(len(particle.NodeTypes))])
		if r.IntN(2) == 0 {
			typ = hostileString(r, 1)
		}
		a.Nodes = append(a.Nodes, NodeOut{ID: id, Type: typ, Name: hostileString(r, 1), Aliases: hostileList(r), Tags: hostileList(r),
			Score: hostileFloat(r), Belief: hostileFloat(r), Seed: r.IntN(2) == 0, Hop: r.IntN(3),
			Episodes: hostileList(r), Spans: hostileList(r)})
	}
	if r.IntN(3) == 0 { // an endpoint the answer does not list
		ids = append(ids, "stub"+hostileString(r, 1))
	}
	seen := map[[3]string]bool{}
	for i := range r.IntN(7) {
		src, dst, pred := ids[r.IntN(len(ids))], ids[r.IntN(len(ids))], hostileString(r, 0)
		if k := [3]string{src, pred, dst}; seen[k] {
			continue
		} else {
			seen[k] = true
		}
		e := EdgeOut{ID: hostileString(r, 1) + "e" + strconv.Itoa(i), Source: src, Target: dst, SourceName: hostileString(r, 1), TargetName: hostileString(r, 1),
			Type: hostileString(r, 1), Predicate: pred, Value: hostileString(r, 0), Confidence: hostileFloat(r), Salience: hostileFloat(r),
			Score: hostileFloat(r), Status: hostileString(r, 0), Hypothesis: r.IntN(2) == 0, Evidence: r.IntN(5),
			ValidFrom: hostileTime(r), ValidTo: hostileTime(r),
			Scope: particle.Scope{TimeRange: particle.TimeRange{From: hostileTime(r), To: hostileTime(r)}, Location: hostileString(r, 0), Audience: hostileList(r)}}
		for range r.IntN(3) {
			p := particle.Provenance{EpisodeID: hostileString(r, 0), Agent: hostileString(r, 0), CMSSpanID: hostileString(r, 0), ObservedAt: hostileTime(r)}
			if r.IntN(2) == 0 {
				s := r.IntN(100)
				p.StepIndex = &s
			}
			e.Provenance = append(e.Provenance, p)
		}
		// Names come from the nodes when the answer lists them.
		for _, n := range a.Nodes {
			if n.ID == e.Source {
				e.SourceName = n.Name
			}
			if n.ID == e.Target {
				e.TargetName = n.Name
			}
		}
		a.Edges = append(a.Edges, e)
	}
	if len(a.Edges) >= 2 {
		a.Contradictions = append(a.Contradictions, Contradiction{Subject: hostileString(r, 1), Predicate: hostileString(r, 0),
			EdgeA: a.Edges[0].ID, EdgeB: a.Edges[1].ID, ConfidenceA: hostileFloat(r), ConfidenceB: hostileFloat(r)})
	}
	for range r.IntN(3) {
		a.Unknowns = append(a.Unknowns, Unknown{Kind: hostileString(r, 1), Name: hostileString(r, 0)})
	}
	return a
}

// Property: over answers made of hostile strings, the Cypher lexes and
// parses as openCypher and declares exactly the answer's nodes,
// labels, relationship types and properties.
func TestCypherQuotingAndEscapingOverHostileNames(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		a := randomAnswer(r)
		t.Run(strconv.Itoa(i), func(t *testing.T) { checkCypher(t, a) })
		if t.Failed() {
			return
		}
	}
}

// Property: the Turtle of hostile answers parses with rdflib, and its
// facts, node names and edge metadata match the answer and the
// triples format.
func TestTurtleOverHostileNames(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var answers []*Answer
	for range 100 {
		answers = append(answers, randomAnswer(r))
	}
	checkTurtle(t, answers)
}

// Property: every record of the line formats stays on its line, however
// hostile its strings.
func TestLineFormatsKeepOneRecordPerLine(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		a := randomAnswer(r)
		g := newGraphView(a)
		typedNodes := 0
		for _, n := range g.nodes {
			if typed(n) {
				typedNodes++
			}
		}
		facts := typedNodes + len(a.Edges) + len(a.Contradictions)
		text := render(t, a, "text")
		if got, want := strings.Count(text, "\n"), 1+facts+len(a.Unknowns); got != want {
			t.Fatalf("text: %d lines, want %d:\n%s", got, want, text)
		}
		tri := render(t, a, "triples")
		comments := 1 + len(a.Unknowns)
		if a.StrategyReason != "" {
			comments++
		}
		if got := strings.Count(tri, "\n"); got != comments+facts {
			t.Fatalf("triples: %d lines, want %d:\n%s", got, comments+facts, tri)
		}
		if _, lines := triplesFacts(t, a, tri); lines != facts {
			t.Fatalf("triples: %d fact lines, want %d", lines, facts)
		}
	}
}

// goldenAnswer is a small answer with every part, for reading.
func goldenAnswer() *Answer {
	step := 4
	at := time.Date(2026, 1, 1, 10, 0, 2, 0, time.UTC)
	return &Answer{
		Strategy: "hybrid", StrategyReason: `auto: exact tokens "SN-4471-XQ" and free text`,
		Nodes: []NodeOut{
			{ID: "n-red", Type: "entity", Name: "red block", Aliases: []string{"crimson cube"}, Score: 0.91, Belief: 0.83, Seed: true, Episodes: []string{"ep-alpha-0001"}, Spans: []string{"span-0001"}},
			{ID: "n-bowl", Type: "entity", Name: "blue bowl", Score: 0.5, Belief: 0.7, Hop: 1},
			{ID: "n-tray", Type: "location", Name: `tray "B"`, Score: 0.4, Belief: 0.6, Hop: 1},
		},
		Edges: []EdgeOut{
			{ID: "e-1", Source: "n-red", Target: "n-bowl", SourceName: "red block", TargetName: "blue bowl", Type: "assertion", Predicate: "located_in",
				Confidence: 0.85, Salience: 0.41, Score: 0.3, Status: "superseded", Evidence: 1, ValidFrom: at, ValidTo: at.Add(time.Hour),
				Scope:      particle.Scope{TimeRange: particle.TimeRange{From: at, To: at}, Location: "kitchen lab"},
				Provenance: []particle.Provenance{{EpisodeID: "ep-alpha-0001", StepIndex: &step, Agent: "ur5-alpha", ObservedAt: at}}},
			{ID: "e-2", Source: "n-red", Target: "n-tray", SourceName: "red block", TargetName: `tray "B"`, Type: "assertion", Predicate: "located_in",
				Value: "slot 3", Confidence: 0.6, Salience: 0.2, Score: 0.2, Status: "contradicted", Hypothesis: true, Evidence: 2, ValidFrom: at.Add(time.Hour),
				Provenance: []particle.Provenance{{CMSSpanID: "span-0100", EpisodeID: "ep-alpha-0001", ObservedAt: at.Add(time.Hour)}}},
		},
		Contradictions: []Contradiction{{Subject: "red block", Predicate: "located_in", EdgeA: "e-2", EdgeB: "e-1", ConfidenceA: 0.6, ConfidenceB: 0.85}},
		Unknowns:       []Unknown{{Kind: "entity", Name: "green cube"}},
	}
}

func TestFormatsGolden(t *testing.T) {
	a := goldenAnswer()
	for _, f := range formatNames {
		t.Run(f, func(t *testing.T) {
			got := []byte(render(t, a, f))
			golden := filepath.Join("testdata", "answer."+f+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s changed (go test ./planner -run Golden -update):\n%s", f, got)
			}
		})
	}
	checkTurtle(t, []*Answer{a})
	checkCypher(t, a)
	// JSON stays the default.
	b, ctype, err := Render(a, "")
	if err != nil || ctype != "application/json" || !json.Valid(b) {
		t.Errorf("default render: %v %q", err, ctype)
	}
}
