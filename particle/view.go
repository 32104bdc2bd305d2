package particle

// view is the memory-resident copy of the graph. Published values are
// immutable: a writer clones a node or edge, changes the clone and swaps
// the pointer under Store.mu, so a reader may keep a pointer it got.
type view struct {
	nodes       map[string]*Node
	edges       map[string]*Edge
	episodes    map[string]*Episode // ns \0 id
	nodeSeq     map[uint64]*Node
	edgeSeq     map[uint64]*Edge
	episodeSeq  map[uint64]*Episode
	aliases     map[string]string     // aliasKey -> node id
	identity    map[string]string     // edgeIdentity -> edge id
	out         map[string][]string   // node id -> edge ids
	in          map[string][]string   // node id -> edge ids
	preds       map[string]*Predicate // scope \0 name
	predAliases map[string]string     // scope \0 alias -> name
	redirects   map[string]string     // merged node id -> survivor id
}

func newView() *view {
	return &view{
		nodes: map[string]*Node{}, edges: map[string]*Edge{}, episodes: map[string]*Episode{},
		nodeSeq: map[uint64]*Node{}, edgeSeq: map[uint64]*Edge{}, episodeSeq: map[uint64]*Episode{},
		aliases: map[string]string{}, identity: map[string]string{},
		out: map[string][]string{}, in: map[string][]string{},
		preds: map[string]*Predicate{}, predAliases: map[string]string{}, redirects: map[string]string{},
	}
}

func (v *view) putNode(n *Node) (created bool) {
	_, had := v.nodes[n.ID]
	v.nodes[n.ID] = n
	v.nodeSeq[n.Seq] = n
	v.aliases[aliasKey(n.Namespace, n.Type, n.Name)] = n.ID
	for _, a := range n.Aliases {
		v.aliases[aliasKey(n.Namespace, n.Type, a)] = n.ID
	}
	return !had
}

func (v *view) putEdge(e *Edge) (created bool) {
	_, had := v.edges[e.ID]
	v.edges[e.ID] = e
	v.edgeSeq[e.Seq] = e
	if !had {
		v.identity[edgeIdentity(e.Namespace, e.Source, e.Type, identityPredicate(e), e.Target)] = e.ID
		v.out[e.Source] = append(v.out[e.Source], e.ID)
		v.in[e.Target] = append(v.in[e.Target], e.ID)
	}
	return !had
}

func (v *view) putEpisode(e *Episode) (created bool) {
	k := e.Namespace + "\x00" + e.ID
	_, had := v.episodes[k]
	v.episodes[k] = e
	v.episodeSeq[e.Seq] = e
	return !had
}

// identityPredicate is the predicate part of an edge's identity: the
// assertion predicate for assertion edges; nothing for the other types,
// whose label is descriptive and not part of what makes them unique.
//
// A fact (assertion) is unique per (namespace, scope location, subject,
// predicate, object): the location is part of its predicate key.
func identityPredicate(e *Edge) string {
	if e.Type == EdgeAssertion && e.Assertion != nil {
		return factKey(e.Assertion.Predicate, e.Scope.Location)
	}
	return ""
}

func factKey(pred, location string) string {
	if location == "" {
		return Canonical(pred)
	}
	return Canonical(pred) + "@" + Canonical(location)
}

func (v *view) countNodes() map[NodeType]int64 {
	m := map[NodeType]int64{}
	for _, n := range v.nodes {
		m[n.Type]++
	}
	return m
}

func (v *view) countEdges() map[EdgeType]int64 {
	m := map[EdgeType]int64{}
	for _, e := range v.edges {
		m[e.Type]++
	}
	return m
}
