package wave

// Has reports whether id is in the index.
func (h *HNSW) Has(id uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.ids[id]
	return ok
}

// Has reports whether id is in the index.
func (f *Flat) Has(id uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.slot[id]
	return ok
}
