package planner

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

func init() { formatters["text"] = rendered(renderText) }

// renderText writes short sentences a person or a language model reads
// directly: one per node, one per edge, one per contradiction, then
// the unknowns.
func renderText(a *Answer) ([]byte, string, error) {
	g := newGraphView(a)
	var b strings.Builder
	fmt.Fprintf(&b, "Context: %s and %s (strategy %s", plural(len(a.Nodes), "node"), plural(len(a.Edges), "relation"), say(a.Strategy))
	if a.StrategyReason != "" {
		fmt.Fprintf(&b, ": %s", say(a.StrategyReason))
	}
	b.WriteString(")")
	if a.Truncated {
		b.WriteString("; the budget cut it short")
	}
	b.WriteString(".\n")

	for _, n := range g.nodes {
		if !typed(n) {
			continue
		}
		fmt.Fprintf(&b, "%s is %s %s", say(g.label[n.ID]), article(n.Type), say(strings.ReplaceAll(n.Type, "_", " ")))
		if len(n.Aliases) > 0 {
			fmt.Fprintf(&b, ", also called %s", sayList(n.Aliases))
		}
		var notes []string
		if s, ok := num(n.Belief); ok {
			notes = append(notes, "belief "+s)
		}
		if s, ok := num(n.Score); ok {
			notes = append(notes, "score "+s)
		}
		if n.Seed {
			notes = append(notes, "a seed")
		} else {
			notes = append(notes, "reached in "+plural(n.Hop, "hop"))
		}
		if len(n.Tags) > 0 {
			notes = append(notes, "tagged "+sayList(n.Tags))
		}
		if len(n.Episodes) > 0 {
			notes = append(notes, "seen in episodes "+sayList(n.Episodes))
		}
		if len(n.Spans) > 0 {
			notes = append(notes, "named by CMS spans "+sayList(n.Spans))
		}
		fmt.Fprintf(&b, " (%s; id %s).\n", strings.Join(notes, ", "), say(n.ID))
	}

	for _, e := range a.Edges {
		if e.Hypothesis {
			b.WriteString("Possibly (hypothesis): ")
		}
		fmt.Fprintf(&b, "%s %s %s", say(g.label[e.Source]), say(strings.ReplaceAll(e.Predicate, "_", " ")), say(g.label[e.Target]))
		if e.Value != "" {
			fmt.Fprintf(&b, ", value %s", strconv.Quote(e.Value))
		}
		notes := []string{say(e.Type) + " edge"}
		if s, ok := num(e.Confidence); ok {
			notes = append(notes, "confidence "+s)
		}
		if s, ok := num(e.Salience); ok {
			notes = append(notes, "salience "+s)
		}
		if s, ok := num(e.Score); ok {
			notes = append(notes, "score "+s)
		}
		notes = append(notes, say(e.Status))
		if !e.ValidFrom.IsZero() {
			notes = append(notes, "valid from "+stamp(e.ValidFrom))
		}
		if !e.ValidTo.IsZero() {
			notes = append(notes, "until "+stamp(e.ValidTo))
		}
		if tr := e.Scope.TimeRange; !tr.From.IsZero() || !tr.To.IsZero() {
			notes = append(notes, "observed "+stampOr(tr.From)+" to "+stampOr(tr.To))
		}
		if e.Scope.Location != "" {
			notes = append(notes, "at "+say(e.Scope.Location))
		}
		if len(e.Scope.Audience) > 0 {
			notes = append(notes, "for "+sayList(e.Scope.Audience))
		}
		if c := g.contra[e.ID]; len(c) > 0 {
			notes = append(notes, "contradicts "+sayList(c))
		}
		fmt.Fprintf(&b, " (%s; id %s).", strings.Join(notes, ", "), say(e.ID))
		fmt.Fprintf(&b, " Evidence %d", e.Evidence)
		for i, p := range e.Provenance {
			if i == 0 {
				b.WriteString(":")
			} else {
				b.WriteString(";")
			}
			b.WriteString(" " + sayProvenance(p.EpisodeID, p.StepIndex, p.Agent, p.CMSSpanID))
			if !p.ObservedAt.IsZero() {
				b.WriteString(" at " + stamp(p.ObservedAt))
			}
		}
		b.WriteString(".\n")
	}

	for _, c := range a.Contradictions {
		fmt.Fprintf(&b, "Conflicting facts about %s %s: %s (confidence %s) and %s (confidence %s).\n",
			say(c.Subject), say(strings.ReplaceAll(c.Predicate, "_", " ")), say(c.EdgeA), numOr(c.ConfidenceA), say(c.EdgeB), numOr(c.ConfidenceB))
	}
	for _, u := range a.Unknowns {
		fmt.Fprintf(&b, "Not found: %s %s.\n", say(u.Kind), strconv.Quote(u.Name))
	}
	return []byte(b.String()), "text/plain; charset=utf-8", nil
}

func sayProvenance(episode string, step *int, agent, span string) string {
	var parts []string
	if span != "" {
		parts = append(parts, "CMS span "+say(span))
	}
	if episode != "" {
		s := "episode " + say(episode)
		if step != nil {
			s += " step " + strconv.Itoa(*step)
		}
		parts = append(parts, s)
	}
	if agent != "" {
		parts = append(parts, "by "+say(agent))
	}
	if len(parts) == 0 {
		return "unattributed"
	}
	return strings.Join(parts, " ")
}

// say is s as it reads, quoted only when it holds control characters or
// surrounding space, so that one record stays on one line.
func say(s string) string {
	s = validUTF8(s)
	if s == "" {
		return `""`
	}
	if strings.TrimSpace(s) != s || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func sayList(vs []string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = say(v)
	}
	return strings.Join(out, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiouAEIOU", rune(word[0])) {
		return "an"
	}
	return "a"
}

func numOr(v float64) string {
	if s, ok := num(v); ok {
		return s
	}
	return "unknown"
}

func stampOr(t time.Time) string {
	if t.IsZero() {
		return "open"
	}
	return stamp(t)
}
