package particle

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Diff is what changed about some subjects between two times (valid
// time: when facts started and stopped holding in the world).
type Diff struct {
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	Added      []*Edge   `json:"added"`
	Ended      []*Edge   `json:"ended"`
	Superseded []*Edge   `json:"superseded"`
}

// Diff returns the visible edges of namespace ns touching any of
// subjects (node ids; none means all) that began (valid_from), ended
// (valid_to) or were superseded in (from, to].
func (r Reader) Diff(ns string, subjects []string, from, to time.Time, p Principal) *Diff {
	d := &Diff{From: from, To: to, Added: []*Edge{}, Ended: []*Edge{}, Superseded: []*Edge{}}
	in := func(t time.Time) bool { return !t.IsZero() && t.After(from) && !t.After(to) }
	visit := func(e *Edge) bool {
		if e.Namespace != ns || !r.EdgeVisible(e, p) {
			return true
		}
		if in(e.ValidFrom) {
			d.Added = append(d.Added, e)
		}
		if in(e.ValidTo) {
			d.Ended = append(d.Ended, e)
			if e.SupersededBy != "" {
				d.Superseded = append(d.Superseded, e)
			}
		}
		return true
	}
	if len(subjects) == 0 {
		r.Edges(visit)
	} else {
		seen := map[string]bool{}
		for _, s := range subjects {
			once := func(e *Edge) bool {
				if seen[e.ID] {
					return true
				}
				seen[e.ID] = true
				return visit(e)
			}
			r.Out(s, once)
			r.In(s, once)
		}
	}
	for _, l := range [][]*Edge{d.Added, d.Ended, d.Superseded} {
		sort.Slice(l, func(i, j int) bool { return l[i].ValidFrom.Before(l[j].ValidFrom) })
	}
	return d
}

// Overview is what the graph knows about, counted over what the
// principal may see.
type Overview struct {
	NodeTypes  map[NodeType]int `json:"node_types"`
	EdgeTypes  map[EdgeType]int `json:"edge_types"`
	Predicates []PredicateUsage `json:"predicates"`
	Episodes   int              `json:"episodes"`
	TimeSpan   TimeRange        `json:"time_span"`
	Statuses   map[Status]int   `json:"fact_statuses"`
	Agents     []string         `json:"agents"`
	Extra      map[string]any   `json:"extra,omitempty"`
}

// PredicateUsage is a registry entry with the number of visible facts.
type PredicateUsage struct {
	Predicate
	Facts int `json:"facts"`
}

// Overview counts the visible graph of namespace ns.
func (r Reader) Overview(ns string, p Principal) *Overview {
	o := &Overview{NodeTypes: map[NodeType]int{}, EdgeTypes: map[EdgeType]int{}, Statuses: map[Status]int{}}
	facts := map[string]int{}
	r.Nodes(func(n *Node) bool {
		if n.Namespace == ns && r.NodeVisible(n, p) {
			o.NodeTypes[n.Type]++
			if n.Type == NodeAgent {
				o.Agents = append(o.Agents, n.Name)
			}
		}
		return true
	})
	r.Edges(func(e *Edge) bool {
		if e.Namespace != ns || !r.EdgeVisible(e, p) {
			return true
		}
		o.EdgeTypes[e.Type]++
		widen(&o.TimeSpan, e.Scope.TimeRange.From)
		widen(&o.TimeSpan, e.Scope.TimeRange.To)
		if e.Type == EdgeAssertion && e.Assertion != nil {
			facts[e.Assertion.Predicate]++
			o.Statuses[e.Status]++
		}
		return true
	})
	r.Episodes(func(e *Episode) bool {
		if e.Namespace == ns {
			o.Episodes++
		}
		return true
	})
	for _, pr := range r.Predicates() {
		if slices.Contains(scopesOf(ns), pr.Scope) {
			o.Predicates = append(o.Predicates, PredicateUsage{Predicate: *pr, Facts: facts[pr.Name]})
		}
	}
	slices.Sort(o.Agents)
	return o
}

// Topic is what the graph knows about one entity, counted over what the
// principal may see.
type Topic struct {
	Node             *Node          `json:"node"`
	Coverage         map[Status]int `json:"fact_coverage"`
	Relationships    map[string]int `json:"relationships"`
	Episodes         []string       `json:"episodes"`
	Spans            []string       `json:"cms_spans"`
	Neighbors        int            `json:"neighbors"`
	SuggestedQueries []string       `json:"suggested_queries"`
}

// Topic resolves topic (a node id, a merged id, or a name or alias of any
// type) in namespace ns and describes it from the visible edges only.
func (r Reader) Topic(ns, topic string, p Principal) (*Topic, error) {
	n := r.Node(r.Resolve(topic))
	if n == nil || n.Namespace != ns {
		n = r.LookupAny(ns, topic)
	}
	if n == nil || !r.NodeVisible(n, p) {
		return nil, fmt.Errorf("topic %q: %w", topic, ErrNotFound)
	}
	t := &Topic{Node: n, Coverage: map[Status]int{}, Relationships: map[string]int{}, Episodes: []string{}, Spans: []string{}}
	neighbors := map[string]bool{}
	preds := map[string]int{}
	visit := func(e *Edge) bool {
		if !r.EdgeVisible(e, p) {
			return true
		}
		other := e.Target
		if other == n.ID {
			other = e.Source
		}
		neighbors[other] = true
		t.Relationships[string(e.Type)+":"+e.Predicate()]++
		if e.Type == EdgeAssertion {
			t.Coverage[e.Status]++
			if e.Source == n.ID {
				preds[e.Predicate()]++
			}
		}
		for _, pv := range e.Provenance {
			if pv.EpisodeID != "" && !slices.Contains(t.Episodes, pv.EpisodeID) {
				t.Episodes = append(t.Episodes, pv.EpisodeID)
			}
			if pv.CMSSpanID != "" && !slices.Contains(t.Spans, pv.CMSSpanID) {
				t.Spans = append(t.Spans, pv.CMSSpanID)
			}
		}
		return true
	}
	r.Out(n.ID, visit)
	r.In(n.ID, visit)
	t.Neighbors = len(neighbors)
	slices.Sort(t.Episodes)
	slices.Sort(t.Spans)
	t.SuggestedQueries = suggest(n, preds, t)
	return t, nil
}

// suggest proposes queries that the visible graph can answer about n.
func suggest(n *Node, preds map[string]int, t *Topic) []string {
	var out []string
	names := make([]string, 0, len(preds))
	for p := range preds {
		names = append(names, p)
	}
	sort.Slice(names, func(i, j int) bool {
		if preds[names[i]] != preds[names[j]] {
			return preds[names[i]] > preds[names[j]]
		}
		return names[i] < names[j]
	})
	for _, p := range names[:min(3, len(names))] {
		out = append(out, fmt.Sprintf("what is %s %s now?", n.Name, p))
		out = append(out, fmt.Sprintf("how has %s %s changed?", n.Name, p))
	}
	if t.Relationships["tool_use:acts_on"] > 0 {
		out = append(out, fmt.Sprintf("which tools act on %s?", n.Name))
	}
	if len(t.Episodes) > 0 {
		out = append(out, fmt.Sprintf("which episodes involved %s, and how did they end?", n.Name))
	}
	if t.Coverage[StatusContradicted] > 0 {
		out = append(out, fmt.Sprintf("which facts about %s conflict?", n.Name))
	}
	if out == nil {
		out = []string{}
	}
	return out
}
