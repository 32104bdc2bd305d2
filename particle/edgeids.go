package particle

// edgeIDs finds the view's edges by id. It maps an id to the edge's seq
// and the edge is read from the view's slice by seq (view.edgeSeq), so
// the map's values hold no pointers: keyed by id to the edge itself, it
// gave the collector a second pointer to every edge beside the slice's,
// each one a mark bit to look up at a random address in every mark
// phase: the map reached the edges in hash order, the slice reaches them
// in the order a load allocated them, and a full collection of a loaded
// 1M-edge view took 91–116 ms against 207–381 (BenchmarkReopen;
// BENCHMARKS.md, seventy-eighth round). A new version of an edge
// keeps its seq, so publishing it changes the slice alone, where the map
// by id was read and written for every edge a batch reinforced.
//
// An edge without a seq (an earlier format's) is kept in unseq, by id.
// Like the rest of the view, it is written under Store.mu and read under
// its read lock.
type edgeIDs struct {
	bySeq map[string]uint64 // edge id -> seq
	unseq map[string]*Edge  // edge id -> edge, for those without a seq
}

func newEdgeIDs(n int) edgeIDs {
	return edgeIDs{bySeq: make(map[string]uint64, n), unseq: map[string]*Edge{}}
}

// len is the number of edges held.
func (x *edgeIDs) len() int { return len(x.bySeq) + len(x.unseq) }

// get returns edge id as v holds it, or nil.
func (x *edgeIDs) get(v *view, id string) *Edge {
	if seq, ok := x.bySeq[id]; ok {
		return atSeq(v.edgeSeq, seq)
	}
	if len(x.unseq) > 0 {
		return x.unseq[id]
	}
	return nil
}

// put records e, which v holds at its seq (if it has one) once put
// returns, and returns the version it replaces, if any. An edge whose
// seq holds an edge of its id already is the same edge: the map stays as
// it is. (A loaded view's edges are at their seqs before the map holds
// them: indexLoaded puts them with putLoaded, before any put.)
func (x *edgeIDs) put(v *view, e *Edge) (old *Edge) {
	if e.Seq != 0 {
		if old = atSeq(v.edgeSeq, e.Seq); old != nil && old.ID == e.ID {
			return old
		}
	}
	if old = x.get(v, e.ID); old != nil && old.Seq == 0 {
		delete(x.unseq, e.ID)
	}
	if e.Seq == 0 {
		delete(x.bySeq, e.ID)
		x.unseq[e.ID] = e
	} else {
		x.bySeq[e.ID] = e.Seq
	}
	return old
}

// putLoaded records e, a loaded edge (indexLoaded), which v holds at its
// seq already: put would take it for one the map holds.
func (x *edgeIDs) putLoaded(e *Edge) {
	if e.Seq == 0 {
		x.unseq[e.ID] = e
	} else {
		x.bySeq[e.ID] = e.Seq
	}
}

// remove drops edge id.
func (x *edgeIDs) remove(id string) {
	delete(x.bySeq, id)
	delete(x.unseq, id)
}

// each calls fn with every edge v holds by id until fn returns false. An
// id whose seq holds no edge of that id (which a consistent view never
// has) is passed with a nil edge.
func (x *edgeIDs) each(v *view, fn func(id string, e *Edge) bool) {
	for id, seq := range x.bySeq {
		e := atSeq(v.edgeSeq, seq)
		if e != nil && e.ID != id {
			e = nil
		}
		if !fn(id, e) {
			return
		}
	}
	for id, e := range x.unseq {
		if !fn(id, e) {
			return
		}
	}
}
