package planner

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

func init() { formatters["triples"] = rendered(renderTriples) }

// renderTriples writes one line per fact:
//
//	"red block" type entity | id=… belief=0.83 score=0.71 seed hop=0 episodes=ep-alpha-0001
//	"red block" located_in "blue bowl" | id=… edge_type=assertion confidence=0.85 … provenance=episode:ep-alpha-0001#4@ur5-alpha
//	edge:<id> contradicts edge:<id> | subject="red block" predicate=color confidence_a=0.6 confidence_b=0.7
//
// Node labels are always quoted (Go/JSON escapes); other tokens are bare
// unless they hold spaces, quotes, '|', '=', ',' or control characters.
// Lines starting with '#' are comments: the summary and the unknowns.
func renderTriples(a *Answer) ([]byte, string, error) {
	g := newGraphView(a)
	var b strings.Builder
	fmt.Fprintf(&b, "# ctxgraph answer: %d nodes, %d edges, %d contradictions; strategy %s; truncated %t\n",
		len(a.Nodes), len(a.Edges), len(a.Contradictions), tok(a.Strategy), a.Truncated)
	if a.StrategyReason != "" {
		fmt.Fprintf(&b, "# strategy reason: %s\n", tok(a.StrategyReason))
	}
	for _, u := range a.Unknowns {
		fmt.Fprintf(&b, "# unknown %s %s\n", tok(u.Kind), strconv.Quote(u.Name))
	}
	for _, n := range g.nodes {
		if !typed(n) {
			continue
		}
		fmt.Fprintf(&b, "%s type %s |", strconv.Quote(g.label[n.ID]), tok(n.Type))
		w := annot{b: &b}
		w.kv("id", n.ID)
		w.fields(nodeFields(n))
		b.WriteByte('\n')
	}
	for _, e := range a.Edges {
		fmt.Fprintf(&b, "%s %s %s |", strconv.Quote(g.label[e.Source]), tok(e.Predicate), strconv.Quote(g.label[e.Target]))
		w := annot{b: &b}
		w.kv("id", e.ID)
		w.fields(edgeFields(e))
		w.list("contradicts", g.contra[e.ID])
		var prov []string
		for _, p := range e.Provenance {
			prov = append(prov, provenanceToken(p.EpisodeID, p.StepIndex, p.Agent, p.CMSSpanID, p.ObservedAt))
		}
		w.list("provenance", prov)
		b.WriteByte('\n')
	}
	for _, c := range a.Contradictions {
		fmt.Fprintf(&b, "edge:%s contradicts edge:%s |", tok(c.EdgeA), tok(c.EdgeB))
		annot{b: &b}.fields([]field{
			{key: "subject", kind: fieldString, s: c.Subject},
			{key: "predicate", kind: fieldString, s: c.Predicate},
			{key: "confidence_a", kind: fieldNumber, f: c.ConfidenceA},
			{key: "confidence_b", kind: fieldNumber, f: c.ConfidenceB},
		})
		b.WriteByte('\n')
	}
	return []byte(b.String()), "text/plain; charset=utf-8", nil
}

// annot writes " key=value" annotations, leaving out empty values; a
// true boolean is its bare key, a false one is left out.
type annot struct{ b *strings.Builder }

func (w annot) kv(k, v string) {
	if v != "" {
		fmt.Fprintf(w.b, " %s=%s", k, tok(v))
	}
}

func (w annot) list(k string, vs []string) {
	if len(vs) == 0 {
		return
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = tok(v)
	}
	fmt.Fprintf(w.b, " %s=%s", k, strings.Join(parts, ","))
}

func (w annot) fields(fs []field) {
	for _, f := range fs {
		if f.empty() {
			continue
		}
		switch f.kind {
		case fieldString:
			w.kv(f.key, f.s)
		case fieldStrings:
			w.list(f.key, f.ss)
		case fieldNumber:
			s, _ := num(f.f)
			fmt.Fprintf(w.b, " %s=%s", f.key, s)
		case fieldInt:
			fmt.Fprintf(w.b, " %s=%d", f.key, f.i)
		case fieldBool:
			if f.b {
				fmt.Fprintf(w.b, " %s", f.key)
			}
		case fieldTime:
			fmt.Fprintf(w.b, " %s=%s", f.key, stamp(f.t))
		}
	}
}

// provenanceToken is one provenance record: "episode:<id>#<step>@<agent>"
// for an RLDS step, "span:<id>" for a CMS span (both when a span names
// its episode), then "~<observed_at>".
func provenanceToken(episode string, step *int, agent, span string, at time.Time) string {
	var b strings.Builder
	if span != "" {
		b.WriteString("span:" + span)
	}
	if episode != "" {
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString("episode:" + episode)
		if step != nil {
			b.WriteString("#" + strconv.Itoa(*step))
		}
	}
	if agent != "" {
		b.WriteString("@" + agent)
	}
	if !at.IsZero() {
		b.WriteString("~" + stamp(at))
	}
	return b.String()
}

// tok is s bare when it is a plain token, quoted (Go/JSON escapes)
// otherwise.
func tok(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) || strings.ContainsRune(`"'|=,\`, r) || r == '\uFFFD' {
			return strconv.Quote(s)
		}
	}
	return s
}
