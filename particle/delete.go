package particle

import "slices"

// DeleteEdge removes edge id with its identity and adjacency entries.
// Deleting an edge that does not exist is not an error.
func (b *Batch) DeleteEdge(id string) error {
	e := b.Edge(id)
	if e == nil {
		return nil
	}
	delete(b.edges, id)
	if ik, ok := b.newEdges[id]; ok {
		// Created in this batch: it never reached Badger or the view.
		delete(b.newEdges, id)
		delete(b.identity, ik)
		return nil
	}
	b.deletedEdges[id] = e
	return nil
}

// DeleteNode removes node id, its alias entries and every edge touching
// it. Deleting a node that does not exist is not an error.
func (b *Batch) DeleteNode(id string) error {
	n := b.Node(id)
	if n == nil {
		return nil
	}
	for _, eid := range b.touching(id) {
		if err := b.DeleteEdge(eid); err != nil {
			return err
		}
	}
	delete(b.nodes, id)
	for ak, nid := range b.aliases {
		if nid == id {
			delete(b.aliases, ak)
		}
	}
	if b.newNodes[id] {
		delete(b.newNodes, id)
		return nil
	}
	b.deletedNodes[id] = n
	return nil
}

// touching lists the ids of the edges that leave or enter node id, in
// the view and among this batch's new edges.
func (b *Batch) touching(id string) []string {
	b.s.mu.RLock()
	v := b.s.v
	ids := v.edgeIDs(v.in[id], v.edgeIDs(v.out[id], nil))
	b.s.mu.RUnlock()
	for eid := range b.newEdges {
		if e := b.edges[eid]; e != nil && (e.Source == id || e.Target == id) {
			ids = append(ids, eid)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// flushDeletes writes the batch's deletions into the transaction.
func (b *Batch) flushDeletes() {
	del := b.deleteKey
	for _, e := range b.deletedEdges {
		k := edgeKey(e.Namespace, e.ID)
		del(k)
		del(vectorKey(k)) // its embedding, if stored apart
		b.markGone(k, e.Seq)
		// The legacy entries an earlier version may have written.
		del(adjKey(prefixOut, e.Namespace, e.Source, e.Type, e.ID))
		del(adjKey(prefixIn, e.Namespace, e.Target, e.Type, e.ID))
		del(identityDBKey(identityOf(e)))
	}
	for _, n := range b.deletedNodes {
		k := nodeKey(n.Namespace, n.ID)
		del(k)
		del(vectorKey(k))
		b.markGone(k, n.Seq)
		del(aliasDBKey(aliasKey(n.Namespace, n.Type, n.Name)))
		for _, a := range n.Aliases {
			del(aliasDBKey(aliasKey(n.Namespace, n.Type, a)))
		}
	}
}

// publishDeletes removes the batch's deletions from the view. Called with
// Store.mu held.
func (b *Batch) publishDeletes(ch *Changes) {
	v := b.s.v
	for _, e := range b.deletedEdges {
		if v.removeEdge(e.ID) {
			b.counts.Edges[e.Type]--
		}
		ch.RemovedEdges = append(ch.RemovedEdges, e)
	}
	for _, n := range b.deletedNodes {
		if v.removeNode(n.ID) {
			b.counts.Nodes[n.Type]--
		}
		ch.RemovedNodes = append(ch.RemovedNodes, n)
	}
}

func (v *view) removeEdge(id string) bool {
	e := v.edges.get(v, id)
	if e == nil {
		return false
	}
	v.edges.remove(id)
	if e.Seq == 0 {
		v.unseq--
	}
	v.apart.set(e.Seq, false)
	v.edgeSeq = unsetSeq(v.edgeSeq, e.Seq, e)
	v.unsetFacts(e.Seq)
	v.identity.remove(identityOf(e), e)
	v.unlink(e)
	return true
}

func (v *view) removeNode(id string) bool {
	n, ok := v.nodes[id]
	if !ok {
		return false
	}
	delete(v.nodes, id)
	v.nodeSeq = unsetSeq(v.nodeSeq, n.Seq, n)
	v.codes.unset(n.Seq)
	v.apart.set(n.Seq, false)
	for ak, nid := range v.aliases {
		if nid == id {
			delete(v.aliases, ak)
		}
	}
	delete(v.out, id)
	delete(v.in, id)
	return true
}
