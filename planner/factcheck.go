package planner

import (
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// factCheck is a request's edge constraints compiled for
// particle.EdgeFacts, so that the expansion rejects most edges it scans
// from a 64-byte record, without reading the edge. decide gives admits'
// answer exactly, or says the facts cannot tell (the edge carries a
// policy of its own, a key matches and the strings must be compared, a
// time is out of the facts' range).
type factCheck struct {
	usable    bool // false: every edge goes to admits
	minConf   float64
	asOf      bool
	at        int64
	history   bool
	window    bool
	from, to  int64
	located   bool
	site      uint32
	sameAgent bool
	agent     uint32
	// siteIs and agentIs are set when the view's records say site and
	// agent stand for the request's location and agent alone
	// (particle.Reader.SiteKeyIs, AgentKeyIs): a match on the key is
	// then a match on the strings.
	siteIs, agentIs bool
	// agentNum is the view's number for the request's agent, which
	// tells an edge of several agents by its agent set where agentSets
	// is set (particle.Reader.AgentNumber, EdgeHasAgent).
	agentNum  uint16
	agentSets bool
	r         particle.Reader
	plainOK   bool
	// ns is the request's namespace as edge facts number it
	// (particle.Reader.NamespaceKey; 0: no edge is of it).
	ns uint32
}

// factCheck compiles the run's request.
func (run *run) factCheck() factCheck {
	req := run.req
	c := factCheck{usable: true, minConf: req.MinConfidence, history: run.history,
		plainOK: run.policy().PlainEdgesVisible(run.ns), ns: run.r.NamespaceKey(run.ns)}
	exact := func(ns int64, ok bool) int64 {
		c.usable = c.usable && ok
		return ns
	}
	if req.AsOf != nil {
		c.asOf, c.at = true, exact(particle.FactTime(*req.AsOf))
	}
	if tw := req.TimeWindow; tw != nil {
		c.window = true
		c.from, c.to = exact(particle.FactTime(tw.From)), exact(particle.FactTime(tw.To))
	}
	if req.Location != "" {
		c.located, c.site = true, wave.SiteKey(run.location())
		c.usable = c.usable && c.site != 0
		c.siteIs = run.r.SiteKeyIs(c.site, run.location())
	}
	if req.SameAgent {
		c.sameAgent, c.agent = true, wave.AgentKey(req.Agent)
		c.usable = c.usable && c.agent != 0
		c.agentIs = run.r.AgentKeyIs(c.agent, req.Agent)
		c.agentNum, c.agentSets = run.r.AgentNumber(req.Agent)
		c.r = run.r
	}
	return c
}

// decide returns admits' answer for the edge at seq whose facts are f,
// and whether the facts decided it (false: ask admits).
func (c *factCheck) decide(seq uint64, f *particle.EdgeFacts) (admit, decided bool) {
	if !c.usable || f.Flags&particle.FactExact == 0 {
		return false, false
	}
	if f.Confidence < c.minConf {
		return false, true
	}
	if c.asOf {
		// As admits: first observed after at, or ended by then (an end
		// observed later did not end it yet).
		if f.ValidFrom != 0 && f.ValidFrom > c.at {
			return false, true
		}
		if f.ValidTo != 0 && f.ValidTo <= c.at && (f.EndedAt == 0 || f.EndedAt <= c.at) {
			return false, true
		}
	} else if f.Flags&particle.FactSuperseded != 0 && !c.history {
		return false, true
	}
	if c.window {
		// particle.TimeRange.Overlaps, on nanoseconds (0: open).
		if c.to != 0 && f.ScopeFrom != 0 && f.ScopeFrom > c.to {
			return false, true
		}
		if c.from != 0 && f.ScopeTo != 0 && f.ScopeTo < c.from {
			return false, true
		}
	}
	if c.located && f.Flags&particle.FactLocated != 0 {
		switch {
		case f.Site == c.site && c.siteIs: // the request's location
		case f.Site == 0 || f.Site == c.site:
			return false, false // the same key: compare the strings
		default:
			return false, true // another canonical location
		}
	}
	if c.sameAgent && f.Agent != 0 { // no agent: admitted
		switch {
		case f.Agent == c.agent && c.agentIs: // the request's agent alone
		case !wave.AgentFilterAdmits(c.agent, f.Agent):
			return false, true // another agent's, or a set without it
		case wave.IsAgentSet(f.Agent) && c.agentSets:
			has, known := c.r.EdgeHasAgent(seq, c.agentNum)
			if !known {
				return false, false
			}
			if !has {
				return false, true // a set of other agents
			}
		default:
			return false, false // the same key: compare the strings
		}
	}
	if f.Flags&particle.FactPlain == 0 || !c.plainOK {
		return false, false
	}
	return true, true
}
