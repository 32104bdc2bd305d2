package wave

// MetaSetter is an index whose items' [Meta] can change without
// re-inserting their vectors (an edge re-observed later widens its time
// scope, its vector stays the same).
type MetaSetter interface {
	// SetMeta replaces the Meta of id, keeping its vector; it reports
	// whether id is present.
	SetMeta(id uint64, m Meta) bool
}

var (
	_ MetaSetter = (*Flat)(nil)
	_ MetaSetter = (*HNSW)(nil)
)

// SetMeta replaces the Meta of id and reports whether id is present.
func (x *Flat) SetMeta(id uint64, m Meta) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.slot[id]
	if ok {
		x.metas[s] = m
	}
	return ok
}

// SetMeta replaces the Meta of id and reports whether id is present. A
// change of time scope is written in place; a change of namespace, kind
// or type (which the postings index) re-inserts the node.
func (h *HNSW) SetMeta(id uint64, m Meta) bool {
	h.wmu.RLock()
	h.mu.Lock() // keeps the slot from being removed and recycled meanwhile
	s, ok := h.ids[id]
	if !ok {
		h.mu.Unlock()
		h.wmu.RUnlock()
		return false
	}
	p, i := h.page(s)
	nm := &p.metas[i]
	if nm.ns == m.Namespace && nm.kind == m.Kind && nm.typ == m.Type {
		nm.setMutable(m)
		h.mu.Unlock()
		h.wmu.RUnlock()
		return true
	}
	vec := append([]float32(nil), h.vec(s)...)
	h.mu.Unlock()
	h.wmu.RUnlock()
	return h.Add(id, vec, m) == nil
}
