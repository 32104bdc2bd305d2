package wave

// Kind says what a vector belongs to.
type Kind uint8

// Kinds of vectors the index holds.
const (
	KindNode Kind = iota + 1
	KindEdge
	KindEpisode
)

// Meta is the compact, filterable description of an indexed vector.
type Meta struct {
	Kind Kind
	// Namespace is the store's compact id of the tenant/project.
	Namespace uint32
	// Type is the node or edge type code (particle's numbering).
	Type uint8
	// Time is the start of the item's time scope in Unix nanoseconds
	// (0 = open: the item holds since always).
	Time int64
	// End is the end of the item's time scope in Unix nanoseconds
	// (0 = open: the item still holds).
	End int64
	// Agent is [AgentKey] of the one agent the item comes from, 0 when
	// no agent is known, [AgentSetKey] of its agents when it comes from
	// several ([MultiAgent] when they are not known one by one).
	Agent uint32
	// Site is [SiteKey] of the item's location (0 = none; 24 bits).
	Site uint32
	// Confidence is [ConfidenceLevel] of the item's confidence (0 = the
	// item has none, which every minimum admits).
	Confidence uint8
}

// Filter restricts a search. The zero Filter admits everything.
type Filter struct {
	Namespace uint32  // 0 = any
	Kinds     []Kind  // empty = any
	Types     []uint8 // empty = any
	// From and To are a closed time window in Unix nanoseconds (0 = open
	// bound). An item is admitted when its scope [Meta.Time, Meta.End]
	// overlaps the window, as particle.TimeRange.Overlaps: it is dropped
	// only if it starts after To or ends before From.
	From, To int64
	// Agent, when not 0, admits the items of that agent key ([AgentKey]),
	// of no known agent, and of sets of agents that may hold it.
	Agent uint32
	// Site, when not 0, admits the items at that site key ([SiteKey]) and
	// those without one.
	Site uint32
	// MinConfidence, when not 0, admits the items whose Confidence level
	// is at least it ([ConfidenceLevel] of the minimum) and those without
	// one.
	MinConfidence uint8
	// Allow, when set, is asked about every candidate id; false drops it.
	Allow func(id uint64) bool
	// Hint, when set beside Allow, is told of candidate ids a few at a
	// time before Allow is asked about them, so that the reads Allow
	// makes (records at random addresses) can be started together: a
	// cache hint, which must not change what Allow answers. A search
	// asks Allow the same questions, in the same order, with or without
	// it. The IVF uses it; the other indexes ignore it.
	Hint func(id uint64)
	// Stats, when set, has the IVF add what the search did to it (see
	// [SearchStats]); it changes nothing about the search. The other
	// indexes leave it as it was.
	Stats *SearchStats
}

// SearchStats is the work of IVF searches, to explain their time: a
// search whose filter has Stats set adds its own to it.
type SearchStats struct {
	// Lists is how many inverted lists the searches scanned (an agent's
	// own list, in an index split by agent, counts as one).
	Lists int
	// Scored is how many items' codes they scored: the items of those
	// lists that the filter's Meta fields let through (not counting
	// the few it rules out that an IVF search scores for its bound).
	Scored int
	// Asked is how many times they asked Filter.Allow, and Allowed how
	// many of those it answered true: with Scored, how selective Allow
	// is among what the Meta fields let through.
	Asked, Allowed int
	// Rescored is how many candidates' float32 vectors they read to
	// rescore the best by their codes (IVF).
	Rescored int
}

// Admits reports whether an item passes the filter.
func (f *Filter) Admits(id uint64, m Meta) bool {
	if f == nil {
		return true
	}
	return f.admitsMeta(m) && (f.Allow == nil || f.Allow(id))
}

// admitsMeta reports whether m passes the filter's Meta fields (all of
// it but Allow).
func (f *Filter) admitsMeta(m Meta) bool {
	if f.Namespace != 0 && m.Namespace != f.Namespace {
		return false
	}
	if len(f.Kinds) > 0 && !containsKind(f.Kinds, m.Kind) {
		return false
	}
	if len(f.Types) > 0 && !containsType(f.Types, m.Type) {
		return false
	}
	if !AgentFilterAdmits(f.Agent, m.Agent) || !admitsSite(f.Site&siteMask, m.Site&siteMask) {
		return false
	}
	if f.MinConfidence != 0 && m.Confidence != 0 && m.Confidence < f.MinConfidence {
		return false
	}
	return f.overlaps(m.Time, m.End)
}

// admitsSite reports whether an item's site key passes a filter's (0 on
// either side passes).
func admitsSite(want, have uint32) bool {
	return want == 0 || have == 0 || have == want
}

// metaFree reports whether f's Meta fields admit everything.
func (f *Filter) metaFree() bool {
	return f == nil || (f.Namespace == 0 && len(f.Kinds) == 0 && len(f.Types) == 0 && f.From == 0 && f.To == 0 &&
		f.Agent == 0 && f.Site == 0 && f.MinConfidence == 0)
}

// overlaps reports whether the scope [start, end] (0 = open bound) shares
// an instant with f's window.
func (f *Filter) overlaps(start, end int64) bool {
	if f.To != 0 && start != 0 && start > f.To {
		return false
	}
	if f.From != 0 && end != 0 && end < f.From {
		return false
	}
	return true
}

func containsKind(ks []Kind, k Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func containsType(ts []uint8, t uint8) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// Hit is one search result: the item's id and its cosine similarity to
// the query (higher is closer).
type Hit struct {
	ID    uint64
	Score float32
}

// Index is a vector index over L2-normalised float32 vectors with cosine
// similarity. Implementations are safe for concurrent use: many readers
// and one or more writers.
type Index interface {
	// Add inserts or replaces the vector of id.
	Add(id uint64, vec []float32, m Meta) error
	// Remove deletes id; it reports whether id was present.
	Remove(id uint64) bool
	// Search returns up to k hits that pass f, best first.
	Search(q []float32, k int, f *Filter) []Hit
	// Len is the number of vectors held.
	Len() int
	// Dim is the vector dimension (fixed at construction).
	Dim() int
}
