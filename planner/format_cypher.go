package planner

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

func init() { formatters["cypher"] = rendered(renderCypher) }

// renderCypher writes the answer as one openCypher statement that
// recreates the subgraph idempotently:
//
//	MERGE (n0:CtxNode {id: '…'}) SET n0:Entity, n0 += {name: 'red block', …}
//	MERGE (n0)-[r0:LOCATED_IN {id: '…'}]->(n1) SET r0 += {predicate: 'located_in', confidence: 0.85,
//	    valid_from: datetime('2026-01-01T10:00:02Z'), provenance_episode_ids: ['ep-alpha-0001'], …}
//	RETURN 2 AS nodes, 1 AS edges;
//
// Nodes merge on their id under the CtxNode label and get their type as
// a second label; relationships take the predicate, upper-cased, as
// their type. Properties are primitives or lists of primitives (what a
// property graph stores): provenance becomes parallel lists, with -1 for
// a missing step and ” for a missing field. Strings are single-quoted
// with backslash escapes; labels and types that are not plain
// identifiers are backquoted with inner backquotes doubled. Unknowns
// and the strategy are comments.
func renderCypher(a *Answer) ([]byte, string, error) {
	g := newGraphView(a)
	var b strings.Builder
	fmt.Fprintf(&b, "// ctxgraph answer: %d nodes, %d edges, %d contradictions; strategy %s; truncated %t\n",
		len(a.Nodes), len(a.Edges), len(a.Contradictions), cypherString(a.Strategy), a.Truncated)
	if a.StrategyReason != "" {
		fmt.Fprintf(&b, "// strategy reason: %s\n", cypherString(a.StrategyReason))
	}
	for _, u := range a.Unknowns {
		fmt.Fprintf(&b, "// unknown %s %s\n", cypherString(u.Kind), cypherString(u.Name))
	}
	vars := map[string]string{}
	for i, n := range g.nodes {
		v := "n" + strconv.Itoa(i)
		vars[n.ID] = v
		m := cypherMap{}
		m.str("name", n.Name)
		fmt.Fprintf(&b, "MERGE (%s:CtxNode {id: %s}) SET ", v, cypherString(n.ID))
		if typed(n) {
			fmt.Fprintf(&b, "%s:%s, ", v, cypherName(pascal(n.Type), "Node"))
			m.str("type", n.Type)
			m.fields(nodeFields(n))
		}
		fmt.Fprintf(&b, "%s += %s\n", v, m)
	}
	for i, e := range a.Edges {
		v := "r" + strconv.Itoa(i)
		m := cypherMap{}
		m.str("predicate", e.Predicate)
		m.fields(edgeFields(e))
		m.strs("contradicts", g.contra[e.ID])
		if len(e.Provenance) > 0 {
			var eps, agents, spans, steps, at []string
			for _, p := range e.Provenance {
				eps = append(eps, cypherString(p.EpisodeID))
				agents = append(agents, cypherString(p.Agent))
				spans = append(spans, cypherString(p.CMSSpanID))
				step := -1
				if p.StepIndex != nil {
					step = *p.StepIndex
				}
				steps = append(steps, strconv.Itoa(step))
				at = append(at, cypherDateTime(p.ObservedAt))
			}
			m.list("provenance_episode_ids", eps)
			m.list("provenance_steps", steps)
			m.list("provenance_agents", agents)
			m.list("provenance_cms_span_ids", spans)
			m.list("provenance_observed_at", at)
		}
		fmt.Fprintf(&b, "MERGE (%s)-[%s:%s {id: %s}]->(%s) SET %s += %s\n",
			vars[e.Source], v, cypherName(relType(e.Predicate), "RELATED_TO"), cypherString(e.ID), vars[e.Target], v, m)
	}
	fmt.Fprintf(&b, "RETURN %d AS nodes, %d AS edges;\n", len(g.nodes), len(a.Edges))
	return []byte(b.String()), "application/x-cypher-query; charset=utf-8", nil
}

// relType is a predicate as a relationship type: upper case, runs of
// spaces as '_'.
func relType(pred string) string {
	return strings.ToUpper(strings.Join(strings.Fields(pred), "_"))
}

// cypherMap builds a map literal {k: v, …} in insertion order.
type cypherMap struct{ parts []string }

func (m *cypherMap) raw(k, v string) { m.parts = append(m.parts, k+": "+v) }

func (m *cypherMap) str(k, v string) {
	if v != "" {
		m.raw(k, cypherString(v))
	}
}

// fields adds each field with a Cypher value: floats always with a
// decimal point, times as datetime(), lists as lists.
func (m *cypherMap) fields(fs []field) {
	for _, f := range fs {
		if f.empty() {
			continue
		}
		switch f.kind {
		case fieldString:
			m.str(f.key, f.s)
		case fieldStrings:
			m.strs(f.key, f.ss)
		case fieldNumber:
			s, _ := num(f.f)
			if !strings.Contains(s, ".") {
				s += ".0" // a float, not an integer
			}
			m.raw(f.key, s)
		case fieldInt:
			m.raw(f.key, strconv.Itoa(f.i))
		case fieldBool:
			m.raw(f.key, strconv.FormatBool(f.b))
		case fieldTime:
			m.raw(f.key, cypherDateTime(f.t))
		}
	}
}

func (m *cypherMap) strs(k string, vs []string) {
	if len(vs) == 0 {
		return
	}
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = cypherString(v)
	}
	m.list(k, q)
}

func (m *cypherMap) list(k string, items []string) { m.raw(k, "["+strings.Join(items, ", ")+"]") }

func (m cypherMap) String() string { return "{" + strings.Join(m.parts, ", ") + "}" }

// cypherDateTime is datetime('…'), or null for the zero time.
func cypherDateTime(t time.Time) string {
	if t.IsZero() {
		return "null"
	}
	return "datetime(" + cypherString(stamp(t)) + ")"
}

// cypherString is an openCypher string literal (single quotes).
func cypherString(s string) string { return escapeLiteral(s, '\'') }

// cypherName is a label or relationship type: bare when it is a plain
// ASCII identifier, else backquoted with backquotes doubled.
func cypherName(s, fallback string) string {
	s = cypherNameText(s, fallback)
	if asciiIdent(s) {
		return s
	}
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// cypherNameText is the name a label or type stands for: valid UTF-8,
// control characters (which backquotes cannot escape) as '_' — the
// name and predicate properties keep the original — and fallback for
// an empty name (an empty backquoted name is not valid).
func cypherNameText(s, fallback string) string {
	s = strings.Map(func(r rune) rune {
		if needsUnicodeEscape(r) {
			return '_'
		}
		return r
	}, validUTF8(s))
	if strings.TrimSpace(s) == "" {
		return fallback
	}
	return s
}
