package planner

import (
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// Index keeps a vector index in step with the store: BuildIndex fills it
// from the view at start, and the subscription adds every committed node,
// edge and episode vector. The index is derived state: it can always be
// rebuilt from the store.
func Index(store *particle.Store, idx wave.Index) error {
	var err error
	store.Read(func(r particle.Reader) {
		r.Nodes(func(n *particle.Node) bool {
			err = addNode(idx, n)
			return err == nil
		})
		if err != nil {
			return
		}
		r.Edges(func(e *particle.Edge) bool {
			err = addEdge(idx, e)
			return err == nil
		})
		if err != nil {
			return
		}
		r.Episodes(func(e *particle.Episode) bool {
			err = addEpisode(idx, e)
			return err == nil
		})
	})
	if err != nil {
		return err
	}
	store.Subscribe(func(ch particle.Changes) {
		for _, n := range ch.Nodes {
			_ = addNode(idx, n) // vectors were validated before the commit
		}
		for _, e := range ch.Edges {
			_ = addEdge(idx, e)
		}
		for _, e := range ch.Episodes {
			_ = addEpisode(idx, e)
		}
		for _, n := range ch.RemovedNodes {
			idx.Remove(n.Seq)
		}
		for _, e := range ch.RemovedEdges {
			idx.Remove(e.Seq)
		}
	})
	return nil
}

func addNode(idx wave.Index, n *particle.Node) error {
	if len(n.Embedding) != idx.Dim() {
		return nil
	}
	return idx.Add(n.Seq, n.Embedding, wave.Meta{Kind: wave.KindNode, Type: n.Type.Code(), Time: n.UpdatedAt.UnixNano()})
}

func addEdge(idx wave.Index, e *particle.Edge) error {
	if len(e.Embedding) != idx.Dim() {
		return nil
	}
	return idx.Add(e.Seq, e.Embedding, wave.Meta{Kind: wave.KindEdge, Type: e.Type.Code(), Time: e.ValidFrom.UnixNano()})
}

func addEpisode(idx wave.Index, e *particle.Episode) error {
	if len(e.Embedding) != idx.Dim() {
		return nil
	}
	return idx.Add(e.Seq, e.Embedding, wave.Meta{Kind: wave.KindEpisode, Time: e.StartTime.UnixNano()})
}
