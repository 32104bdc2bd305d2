package planner

import (
	"sync/atomic"
	"unsafe"
)

// warmSink keeps the warm pass's loads (an atomic store: the responders
// encode answers concurrently).
var warmSink atomic.Uint32

// warmAnswer reads a byte of everything an answer's encoders will read
// outside the answer itself, in loops whose loads do not wait on one
// another. An answer's strings, provenance lists and step indices lie
// scattered over the graph's heap, mostly out of cache in the daemon:
// read as the encoder meets them, each miss is waited out alone (a
// dependent chain: edge, its provenance, a provenance's step index).
// Read here, many misses overlap, and the encoder then finds them in
// cache. The first pass reaches what the answer points at; the second,
// what that points at (provenance entries' strings and step indices).
func warmAnswer(a *Answer) {
	var sum byte
	for i := range a.Nodes {
		n := &a.Nodes[i]
		sum += warmStr(n.ID) + warmStr(n.Type) + warmStr(n.Name) +
			warmStrs(n.Aliases) + warmStrs(n.Tags) + warmStrs(n.Episodes) + warmStrs(n.Spans)
	}
	for i := range a.Edges {
		e := &a.Edges[i]
		sum += warmStr(e.ID) + warmStr(e.Source) + warmStr(e.Target) + warmStr(e.SourceName) +
			warmStr(e.TargetName) + warmStr(e.Type) + warmStr(e.Predicate) + warmStr(e.Value) +
			warmStr(e.Status) + warmStr(e.Scope.Location) + warmStrs(e.Scope.Audience)
		// A provenance entry is 88 bytes: one load per cache line.
		if n := len(e.Provenance); n > 0 {
			b := unsafe.Slice((*byte)(unsafe.Pointer(&e.Provenance[0])), n*int(unsafe.Sizeof(e.Provenance[0])))
			for j := 0; j < len(b); j += 64 {
				sum += b[j]
			}
		}
	}
	for i := range a.Edges {
		prov := a.Edges[i].Provenance
		for j := range prov {
			p := &prov[j] // 88 bytes: read where they lie, not copied
			sum += warmStr(p.EpisodeID) + warmStr(p.CMSSpanID) + warmStr(p.Agent)
			if p.StepIndex != nil {
				sum += byte(*p.StepIndex)
			}
		}
	}
	warmSink.Store(uint32(sum))
}

// warmStr reads the first byte of s, if any.
func warmStr(s string) byte {
	if len(s) == 0 {
		return 0
	}
	return *unsafe.StringData(s)
}

// warmStrs reads the first byte of ss's backing array and of each of
// its strings.
func warmStrs(ss []string) byte {
	var sum byte
	for _, s := range ss {
		sum += warmStr(s)
	}
	return sum
}
