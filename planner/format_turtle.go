package planner

import (
	"fmt"
	"strconv"
	"strings"
)

func init() { formatters["turtle"] = rendered(renderTurtle) }

// IRI bases of the Turtle format.
const (
	nsCtx  = "https://ctxgraph.dev/ns#"
	nsRel  = "https://ctxgraph.dev/rel/"
	nsNode = "https://ctxgraph.dev/node/"
	nsEdge = "https://ctxgraph.dev/edge/"
	nsXSD  = "http://www.w3.org/2001/XMLSchema#"
	nsRDF  = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
)

// renderTurtle writes the answer as RDF 1.1 Turtle. Every fact is an
// asserted triple — node rdf:type ctx:<Type>, source rel:<predicate>
// target, edge ctx:contradicts edge — and every edge is also a resource
// (edge:<id>, an rdf:Statement reifying its fact) carrying its metadata:
// confidence, salience and score as xsd:double, evidence and steps as
// xsd:integer, times as xsd:dateTime, provenance records as blank nodes.
// The answer itself is a blank node with the strategy and the unknowns.
func renderTurtle(a *Answer) ([]byte, string, error) {
	g := newGraphView(a)
	w := &turtle{}
	w.line("@prefix rdf: <" + nsRDF + "> .")
	w.line("@prefix xsd: <" + nsXSD + "> .")
	w.line("@prefix ctx: <" + nsCtx + "> .")
	w.line("@prefix rel: <" + nsRel + "> .")
	w.line("@prefix node: <" + nsNode + "> .")
	w.line("@prefix edge: <" + nsEdge + "> .")
	w.line("")

	w.subject("[]", "a ctx:Answer")
	w.lit("ctx:strategy", a.Strategy)
	w.lit("ctx:strategyReason", a.StrategyReason)
	w.prop("ctx:truncated", strconv.FormatBool(a.Truncated))
	w.integer("ctx:nodeCount", len(a.Nodes))
	w.integer("ctx:edgeCount", len(a.Edges))
	for _, u := range a.Unknowns {
		w.prop("ctx:unknown", "[ ctx:kind "+turtleString(u.Kind)+" ; ctx:name "+turtleString(u.Name)+" ]")
	}
	w.end()

	for _, n := range g.nodes {
		w.line("")
		if typed(n) {
			w.subject(nodeIRI(n.ID), "a "+qname("ctx", nsCtx, pascal(n.Type)))
		} else {
			w.subject(nodeIRI(n.ID), "")
		}
		w.lit("ctx:id", n.ID)
		w.lit("ctx:name", n.Name)
		if typed(n) {
			w.lit("ctx:type", n.Type)
			w.fields(nodeFields(n))
		}
		w.end()
	}

	for _, e := range a.Edges {
		s, p, o := nodeIRI(e.Source), relIRI(e.Predicate), nodeIRI(e.Target)
		w.line("")
		w.line(s + " " + p + " " + o + " .")
		w.subject(qname("edge", nsEdge, e.ID), "a ctx:Edge, rdf:Statement")
		w.prop("rdf:subject", s)
		w.prop("rdf:predicate", p)
		w.prop("rdf:object", o)
		w.lit("ctx:id", e.ID)
		w.lit("ctx:predicate", e.Predicate)
		w.fields(edgeFields(e))
		for _, pv := range e.Provenance {
			var b strings.Builder
			b.WriteString("[ a ctx:Provenance")
			field := func(p, v string) { b.WriteString(" ; " + p + " " + v) }
			if pv.EpisodeID != "" {
				field("ctx:episode", turtleString(pv.EpisodeID))
			}
			if pv.StepIndex != nil {
				field("ctx:step", typedLit(strconv.Itoa(*pv.StepIndex), "xsd:integer"))
			}
			if pv.Agent != "" {
				field("ctx:agent", turtleString(pv.Agent))
			}
			if pv.CMSSpanID != "" {
				field("ctx:cmsSpan", turtleString(pv.CMSSpanID))
			}
			if !pv.ObservedAt.IsZero() {
				field("ctx:observedAt", typedLit(stamp(pv.ObservedAt), "xsd:dateTime"))
			}
			b.WriteString(" ]")
			w.prop("ctx:provenance", b.String())
		}
		w.end()
	}

	if len(a.Contradictions) > 0 {
		w.line("")
	}
	for _, c := range a.Contradictions {
		w.line(qname("edge", nsEdge, c.EdgeA) + " ctx:contradicts " + qname("edge", nsEdge, c.EdgeB) + " .")
	}
	return []byte(w.b.String()), "text/turtle; charset=utf-8", nil
}

// turtle writes subject blocks: "S a C ;\n    p o ;\n    p o .".
type turtle struct {
	b     strings.Builder
	props int
}

func (w *turtle) line(s string) { w.b.WriteString(s + "\n") }

// subject starts a block; first, when not empty, is its first
// predicate-object pair.
func (w *turtle) subject(s, first string) {
	w.b.WriteString(s)
	w.props = 0
	if first != "" {
		w.b.WriteString(" " + first)
		w.props = 1
	}
}

func (w *turtle) prop(p, o string) {
	if w.props > 0 {
		w.b.WriteString(" ;")
	}
	w.b.WriteString("\n    " + p + " " + o)
	w.props++
}

func (w *turtle) end() {
	if w.props == 0 {
		// A subject needs a predicate: an untyped stub says what it is.
		w.b.WriteString(" a ctx:Node")
	}
	w.b.WriteString(" .\n")
}

func (w *turtle) lit(p, v string) {
	if v != "" {
		w.prop(p, turtleString(v))
	}
}

func (w *turtle) integer(p string, v int) { w.prop(p, typedLit(strconv.Itoa(v), "xsd:integer")) }

// fields writes each field as ctx:<rdf> with a typed literal, one
// triple per value of a list.
func (w *turtle) fields(fs []field) {
	for _, f := range fs {
		if f.empty() {
			continue
		}
		p := "ctx:" + f.rdf
		switch f.kind {
		case fieldString:
			w.lit(p, f.s)
		case fieldStrings:
			for _, v := range f.ss {
				w.prop(p, turtleString(v))
			}
		case fieldNumber:
			s, _ := num(f.f)
			w.prop(p, typedLit(s, "xsd:double"))
		case fieldInt:
			w.integer(p, f.i)
		case fieldBool:
			w.prop(p, strconv.FormatBool(f.b))
		case fieldTime:
			w.prop(p, typedLit(stamp(f.t), "xsd:dateTime"))
		}
	}
}

func typedLit(lexical, datatype string) string { return turtleString(lexical) + "^^" + datatype }

// turtleString is a Turtle STRING_LITERAL_QUOTE.
func turtleString(s string) string { return escapeLiteral(s, '"') }

// qname is prefix:local when local is a safe Turtle local name (ASCII
// letters, digits, '_' and inner '-'), else the full IRI with local
// percent-encoded.
func qname(prefix, base, local string) string {
	if safeLocal(local) {
		return prefix + ":" + local
	}
	return "<" + base + pctEncode(local) + ">"
}

func nodeIRI(id string) string { return qname("node", nsNode, id) }

func relIRI(pred string) string {
	if pred == "" {
		pred = "related_to"
	}
	return qname("rel", nsRel, pred)
}

func safeLocal(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		switch {
		case r == '_' || r == '-', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

// pctEncode percent-encodes every byte outside RFC 3986's unreserved
// set, so the result is valid inside an IRIREF.
func pctEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
