package rlds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// Applier maps wire messages to graph writes. One Applier serves every
// batch; it holds no per-episode state outside the store.
type Applier struct {
	// Embedder gives new nodes, edges and episodes their vectors.
	Embedder embed.Embedder
	// Decay and HalfLife are the salience dynamics of edges RLDS steps
	// create. Defaults: exp, 6h.
	Decay    wave.DecayFn
	HalfLife time.Duration
	// Reinforce is the salience one sighting adds. Default 0.2.
	Reinforce float64
	// Stream names the applied-message table (default "RLDS").
	Stream string
}

func (a *Applier) defaults() {
	if a.Decay == "" {
		a.Decay = wave.DecayExp
	}
	if a.HalfLife == 0 {
		a.HalfLife = 6 * time.Hour
	}
	if a.Reinforce == 0 {
		a.Reinforce = 0.2
	}
	if a.Stream == "" {
		a.Stream = "RLDS"
	}
}

// Apply writes the effects of message m (already validated) into b. A
// message whose msgID was applied before changes nothing. It returns an
// error wrapping ErrInvalid when the message contradicts what the store
// holds (a feature changing shape mid-episode, a step after the end).
//
// A steps message applies as its steps would one by one, each skipped
// if stored; an error names the step and leaves the batch to be
// discarded whole, as any message's error does.
func (a *Applier) Apply(ctx context.Context, b *particle.Batch, msgID string, m *Message) error {
	a.defaults()
	if m.Kind == KindSteps {
		return a.applySteps(ctx, b, m)
	}
	ns := particle.Namespace(m.Tenant, m.Project)
	// A step's message id names its episode and index (Message.MsgID), so
	// the stored step is its applied mark: no record of its own to read
	// and write, and none to read at all for a step past every step the
	// episode has stored, as a streaming controller's steps are.
	stepMark := m.Kind == KindStep && m.Step != nil
	var done bool
	var err error
	if stepMark {
		done, err = b.StepStored(ns, m.EpisodeID, m.Step.Index)
	} else {
		done, err = b.Applied(a.Stream, msgID)
	}
	if err != nil || done {
		return err
	}
	w := &episodeWriter{a: a, ctx: ctx, b: b, ns: ns, m: m}
	switch m.Kind {
	case KindEpisodeStart:
		err = w.start()
	case KindStep:
		err = w.step()
	case KindEpisodeEnd:
		err = w.end()
	default:
		err = fmt.Errorf("%w: unknown kind %q", ErrInvalid, m.Kind)
	}
	if err != nil {
		return err
	}
	if !stepMark {
		b.MarkApplied(a.Stream, msgID)
	}
	return nil
}

// applySteps applies each step of a steps message as a step message of
// its own. A step's stored record is its applied mark, so the message
// needs no mark of its own: sent again, or overlapping steps sent
// before, it changes nothing that is stored.
func (a *Applier) applySteps(ctx context.Context, b *particle.Batch, m *Message) error {
	one := Message{Kind: KindStep, Agent: m.Agent, EpisodeID: m.EpisodeID, Tenant: m.Tenant, Project: m.Project}
	for i := range m.Steps {
		one.Step = &m.Steps[i]
		if err := a.Apply(ctx, b, "", &one); err != nil {
			return fmt.Errorf("steps[%d] (index %d): %w", i, m.Steps[i].Index, err)
		}
	}
	return nil
}

// episodeWriter applies one message of one episode.
type episodeWriter struct {
	a    *Applier
	ctx  context.Context
	b    *particle.Batch
	ns   string
	m    *Message
	ep   *particle.Episode
	at   time.Time
	idx  *int
	errs []error
	// pending is the edge edgeWith observes, for embedPending: one
	// method value per message instead of a closure per edge.
	pending pendingEdge
	embed   func() ([]float32, error)
}

// pendingEdge is what an edge's embedding is made of.
type pendingEdge struct {
	src, dst, pred, value string
	vec                   []float32
}

func (w *episodeWriter) blobErr() error { return errors.Join(w.errs...) }

// episode loads or creates the episode record and its node.
func (w *episodeWriter) episode(at time.Time) error {
	if ep := w.b.Episode(w.ns, w.m.EpisodeID); ep != nil {
		w.ep = ep
		return nil
	}
	w.ep = &particle.Episode{
		ID: w.m.EpisodeID, Namespace: w.ns, Agent: w.m.Agent, StartTime: at,
		NodeID: particle.EpisodeNodeID(w.ns, w.m.EpisodeID),
	}
	n := &particle.Node{ID: w.ep.NodeID, Namespace: w.ns, Type: particle.NodeEpisode, Name: w.m.EpisodeID,
		Belief: particle.Belief{Score: 1, UpdatedAt: at}}
	n.Attributes.RLDSEpisodeIDs = []string{w.m.EpisodeID}
	if err := w.embedNode(n); err != nil {
		return err
	}
	if err := w.b.PutNode(n); err != nil {
		return err
	}
	agent, err := w.node(particle.NodeAgent, w.m.Agent)
	if err != nil {
		return err
	}
	_, err = w.edge(n.ID, agent.ID, particle.EdgeMembership, "run_by", "", 1, nil)
	return err
}

func (w *episodeWriter) start() error {
	s := w.m.Start
	w.at = s.StartTime
	if w.at.IsZero() {
		w.at = w.b.Now()
	}
	if err := w.episode(w.at); err != nil {
		return err
	}
	ep := w.ep
	ep.StartTime = w.at
	if s.Location != "" {
		ep.Location = s.Location
		if err := w.location(s.Location); err != nil {
			return err
		}
	}
	if s.Metadata != nil {
		ep.Metadata = s.Metadata
	}
	if s.Source != nil {
		if ep.Metadata == nil {
			ep.Metadata = map[string]any{}
		}
		ep.Metadata["source"] = s.Source
	}
	if s.LanguageInstruction != "" {
		ep.LanguageInstruction = s.LanguageInstruction
		if err := w.instruction(s.LanguageInstruction); err != nil {
			return err
		}
	}
	return w.b.PutEpisode(ep)
}

func (w *episodeWriter) step() error {
	s := w.m.Step
	w.at = s.Timestamp
	if w.at.IsZero() {
		w.at = w.b.Now()
	}
	idx := s.Index
	w.idx = &idx
	if err := w.episode(w.at); err != nil {
		return err
	}
	ep := w.ep
	if ep.Ended && s.Index >= ep.Steps {
		return fmt.Errorf("%w: step %d after the end of episode %s (%d steps)", ErrInvalid, s.Index, ep.ID, ep.Steps)
	}
	if err := checkShapes(ep, s); err != nil {
		return err
	}
	raw, err := w.encodeStep(s)
	if err != nil {
		return err
	}
	put := w.b.PutStep
	if s.Index >= ep.Steps {
		// Past every step stored: ep.Steps rises past each step in
		// the batch that stores it, and neither is ever deleted.
		put = w.b.PutNewStep
	}
	if err := put(w.ns, ep.ID, s.Index, raw); err != nil {
		return err
	}
	if s.Index+1 > ep.Steps {
		ep.Steps = s.Index + 1
	}
	if w.at.After(ep.EndTime) {
		ep.EndTime = w.at
	}
	if s.LanguageInstruction != "" && s.LanguageInstruction != ep.LanguageInstruction {
		if ep.LanguageInstruction == "" {
			ep.LanguageInstruction = s.LanguageInstruction
		}
		if err := w.instruction(s.LanguageInstruction); err != nil {
			return err
		}
	}
	if an := s.Annotations; an != nil {
		if err := w.annotations(an); err != nil {
			return err
		}
	}
	return w.b.PutEpisode(ep)
}

func (w *episodeWriter) end() error {
	e := w.m.End
	w.at = e.EndTime
	if w.at.IsZero() {
		w.at = w.b.Now()
	}
	if err := w.episode(w.at); err != nil {
		return err
	}
	ep := w.ep
	ep.Ended = true
	if !e.EndTime.IsZero() {
		ep.EndTime = e.EndTime
	}
	if e.Steps > ep.Steps {
		ep.Steps = e.Steps
	}
	ep.Outcome = particle.Outcome{Success: e.Success, RewardSum: e.RewardSum}
	if e.Metadata != nil {
		if ep.Metadata == nil {
			ep.Metadata = map[string]any{}
		}
		for k, v := range e.Metadata {
			ep.Metadata[k] = v
		}
	}
	if e.Success != nil {
		outcome := "failure"
		if *e.Success {
			outcome = "success"
		}
		if n := w.b.Node(ep.NodeID); n != nil {
			particle.AddTag(n, "outcome:"+outcome)
			if err := w.b.PutNode(n); err != nil {
				return err
			}
		}
	}
	ep.Embedding = w.centroid(ep)
	return w.b.PutEpisode(ep)
}

// centroid is the normalised mean of the embeddings of the episode's
// nodes: the episode's place in the vector space.
func (w *episodeWriter) centroid(ep *particle.Episode) []float32 {
	var sum []float32
	for _, id := range ep.Nodes {
		n := w.b.Node(id)
		if n == nil || len(n.Embedding) == 0 {
			continue
		}
		if sum == nil {
			sum = make([]float32, len(n.Embedding))
		}
		if len(n.Embedding) != len(sum) {
			continue
		}
		for i, x := range n.Embedding {
			sum[i] += x
		}
	}
	if sum == nil || !wave.Normalize(sum) {
		return nil
	}
	return sum
}

func (w *episodeWriter) instruction(text string) error {
	p := ParseInstruction(text)
	if p.Goal == "" {
		return nil
	}
	goal, err := w.node(particle.NodeGoal, p.Goal)
	if err != nil {
		return err
	}
	if _, err := w.edge(w.ep.NodeID, goal.ID, particle.EdgeAssertion, "pursues", "", 0, nil); err != nil {
		return err
	}
	if p.Intent != "" {
		intent, err := w.node(particle.NodeIntent, p.Intent)
		if err != nil {
			return err
		}
		if _, err := w.edge(goal.ID, intent.ID, particle.EdgeMembership, "intent", "", 0, nil); err != nil {
			return err
		}
	}
	for _, o := range p.Objects {
		ent, err := w.node(particle.NodeEntity, o)
		if err != nil {
			return err
		}
		if _, err := w.edge(goal.ID, ent.ID, particle.EdgeMembership, "involves", "", 0, nil); err != nil {
			return err
		}
	}
	return nil
}

func (w *episodeWriter) location(name string) error {
	loc, err := w.node(particle.NodeLocation, name)
	if err != nil {
		return err
	}
	agent, err := w.node(particle.NodeAgent, w.m.Agent)
	if err != nil {
		return err
	}
	if _, err := w.edge(w.ep.NodeID, loc.ID, particle.EdgeMembership, "at", "", 1, nil); err != nil {
		return err
	}
	_, err = w.edge(agent.ID, loc.ID, particle.EdgeTemporal, "located_at", "", 0, nil)
	return err
}

func (w *episodeWriter) annotations(an *Annotations) error {
	agent, err := w.node(particle.NodeAgent, w.m.Agent)
	if err != nil {
		return err
	}
	epNode := w.b.Node(w.ep.NodeID)
	for _, tag := range an.SceneTags {
		if epNode != nil {
			particle.AddTag(epNode, tag)
		}
	}
	if epNode != nil && len(an.SceneTags) > 0 {
		if err := w.b.PutNode(epNode); err != nil {
			return err
		}
	}
	if an.Location != "" {
		if w.ep.Location == "" {
			w.ep.Location = an.Location
		}
		if err := w.location(an.Location); err != nil {
			return err
		}
	}
	if an.Goal != "" {
		if err := w.instruction(an.Goal); err != nil {
			return err
		}
	}
	if an.Intent != "" {
		intent, err := w.node(particle.NodeIntent, an.Intent)
		if err != nil {
			return err
		}
		if _, err := w.edge(w.ep.NodeID, intent.ID, particle.EdgeMembership, "intent", "", 0, nil); err != nil {
			return err
		}
	}
	var seen []*particle.Node
	for _, name := range an.Entities {
		ent, err := w.node(particle.NodeEntity, name)
		if err != nil {
			return err
		}
		seen = append(seen, ent)
		if _, err := w.edge(w.ep.NodeID, ent.ID, particle.EdgeMembership, "observed", "", 0, nil); err != nil {
			return err
		}
	}
	if an.Tool != "" {
		tool, err := w.node(particle.NodeTool, an.Tool)
		if err != nil {
			return err
		}
		if _, err := w.edge(agent.ID, tool.ID, particle.EdgeToolUse, "uses", "", 0, nil); err != nil {
			return err
		}
		for _, ent := range seen {
			if _, err := w.edge(tool.ID, ent.ID, particle.EdgeToolUse, "acts_on", "", 0, nil); err != nil {
				return err
			}
		}
		if last := w.ep.LastTool; last != "" && last != tool.ID {
			if _, err := w.edge(last, tool.ID, particle.EdgeTemporal, "followed_by", "", 0, nil); err != nil {
				return err
			}
		}
		w.ep.LastTool = tool.ID
	}
	for _, ev := range an.Events {
		if err := w.event(ev); err != nil {
			return err
		}
	}
	return nil
}

func (w *episodeWriter) event(ev Event) error {
	subj, err := w.node(particle.NodeEntity, ev.Subject)
	if err != nil {
		return err
	}
	obj, err := w.node(particle.NodeEntity, ev.Object)
	if err != nil {
		return err
	}
	t := particle.EdgeType(ev.EdgeType)
	if t == "" {
		t = particle.EdgeAssertion
	}
	conf := 0.0
	if ev.Confidence != nil {
		conf = *ev.Confidence
		if conf == 0 {
			conf = 1e-6 // an explicit zero is a real (near-)zero, not "unset"
		}
	}
	vec, err := w.eventVector(ev.Embedding)
	if err != nil {
		return err
	}
	pol := &particle.Policy{AllowRoles: ev.AllowRoles, DenyRoles: ev.DenyRoles}
	_, err = w.edgeWith(subj.ID, obj.ID, t, ev.Predicate, ev.Value, conf, pol, ev.Audience, vec)
	return err
}

// eventVector checks an event's own embedding against the embedder's
// dimensions and returns it at unit length (nil when the event has
// none): itself when it already is (Message.NormalizeEmbeddings), as
// embeddings are never changed in place, else a normalised copy.
func (w *episodeWriter) eventVector(v []float32) ([]float32, error) {
	if len(v) == 0 {
		return nil, nil
	}
	if w.a.Embedder != nil && len(v) != w.a.Embedder.Dimensions() {
		return nil, fmt.Errorf("%w: event embedding has %d dimensions, want %d", ErrInvalid, len(v), w.a.Embedder.Dimensions())
	}
	if wave.IsUnit(v) {
		return v, nil
	}
	c := slices.Clone(v)
	if !wave.Normalize(c) {
		return nil, fmt.Errorf("%w: event embedding is all zeros", ErrInvalid)
	}
	return c, nil
}

// node resolves (or creates) a node, gives a new one its embedding, and
// records that this episode touched it.
func (w *episodeWriter) node(t particle.NodeType, name string) (*particle.Node, error) {
	n, created, err := w.b.Resolve(w.ns, t, name)
	if err != nil {
		return nil, err
	}
	if created {
		if err := w.embedNode(n); err != nil {
			return nil, err
		}
	}
	particle.TouchNode(n, w.m.EpisodeID, "", 0, w.at)
	if err := w.b.PutNode(n); err != nil {
		return nil, err
	}
	if w.ep != nil && !particle.HasID(w.ep.Nodes, n.ID) {
		w.ep.Nodes = append(w.ep.Nodes, n.ID)
	}
	return n, nil
}

func (w *episodeWriter) embedNode(n *particle.Node) error {
	if w.a.Embedder == nil {
		return nil
	}
	v, err := w.a.Embedder.Embed(w.ctx, n.Name)
	if err != nil {
		return fmt.Errorf("embed %s %q: %w", n.Type, n.Name, err)
	}
	n.Embedding = v
	return nil
}

func (w *episodeWriter) edge(src, dst string, t particle.EdgeType, pred, value string, conf float64, pol *particle.Policy) (*particle.Edge, error) {
	return w.edgeWith(src, dst, t, pred, value, conf, pol, nil, nil)
}

// edgeWith observes an edge; vec, when set, is its embedding (else its
// text is embedded).
func (w *episodeWriter) edgeWith(src, dst string, t particle.EdgeType, pred, value string, conf float64, pol *particle.Policy, audience []string, vec []float32) (*particle.Edge, error) {
	prov := particle.Provenance{EpisodeID: w.m.EpisodeID, StepIndex: w.idx, Agent: w.m.Agent, ObservedAt: w.at}
	o := particle.Observation{
		Namespace: w.ns, Source: src, Target: dst, Type: t, Predicate: pred, Value: value,
		Confidence: conf, Provenance: prov, At: w.at,
		Decay: w.a.Decay, HalfLife: w.a.HalfLife, Reinforce: w.a.Reinforce,
		Audience: audience, Location: w.ep.Location,
	}
	if pol != nil {
		o.Policy = *pol
	}
	// Observe calls Embed before it returns, and only for a new edge.
	w.pending = pendingEdge{src: src, dst: dst, pred: pred, value: value, vec: vec}
	if w.embed == nil {
		w.embed = w.embedPending
	}
	o.Embed = w.embed
	e, created, err := w.b.Observe(o)
	w.pending = pendingEdge{}
	if err != nil {
		return nil, err
	}
	// A new edge has a fresh id: no episode lists it yet.
	if created || !w.ep.HasEdge(e.ID) {
		w.ep.AppendEdge(e.ID)
	}
	return e, nil
}

// embedPending is the embedding of the pending edge: its own vector, or
// its text embedded.
func (w *episodeWriter) embedPending() ([]float32, error) {
	p := &w.pending
	if p.vec != nil {
		return p.vec, nil
	}
	if w.a.Embedder == nil {
		return nil, nil
	}
	text := w.label(p.src) + " " + p.pred + " " + w.label(p.dst)
	if p.value != "" {
		text += " " + p.value
	}
	return w.a.Embedder.Embed(w.ctx, text)
}

func (w *episodeWriter) label(id string) string {
	if n := w.b.Node(id); n != nil {
		return n.Name
	}
	return ""
}

// checkShapes rejects a step whose feature changes shape or dtype from
// the episode's first step: a wrong-dimension vector.
func checkShapes(ep *particle.Episode, s *Step) error {
	if ep.Features == nil {
		ep.Features = map[string]string{}
	}
	// The name and signature are built in scratch space: a step whose
	// features keep their shapes, as most do, allocates neither.
	var nameBuf, sigBuf [64]byte
	for _, g := range [...]struct {
		prefix string
		f      Features
	}{{"observation", s.Observation}, {"action", s.Action}} {
		for k, t := range g.f {
			name := appendFeatureName(nameBuf[:0], g.prefix, k)
			sig := appendSignature(sigBuf[:0], t)
			have, ok := ep.Features[string(name)]
			if ok && have != string(sig) {
				return fmt.Errorf("%w: %s is %s at step %d, but %s earlier in episode %s", ErrShape, string(name), string(sig), s.Index, have, ep.ID)
			}
			if !ok {
				ep.Features[string(name)] = string(sig)
			}
		}
	}
	return nil
}

func signature(t Tensor) string { return string(appendSignature(nil, t)) }

// appendSignature appends t's dtype and shape, the shape as JSON
// ("null", "[]", "[7]"): signatures are stored.
func appendSignature(b []byte, t Tensor) []byte {
	b = append(b, t.DType...)
	if t.DType == Image || t.DType == Bytes || t.DType == String {
		return append(b, "null"...)
	}
	shape := t.Shape
	if len(shape) == 0 && len(t.Data) > 1 {
		b = strconv.AppendInt(append(b, '['), int64(len(t.Data)), 10)
		return append(b, ']')
	}
	if shape == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, d := range shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(d), 10)
	}
	return append(b, ']')
}

// encodeStep stores image and byte tensors as blobs and returns the
// step's storage encoding (the wire JSON with Bytes replaced by Ref, and
// without event embeddings: those live on their edges).
func (w *episodeWriter) encodeStep(s *Step) ([]byte, error) {
	c := *s
	c.Observation = w.blobs(s.Observation)
	c.Action = w.blobs(s.Action)
	c.Annotations = withoutEventVectors(s.Annotations)
	if err := w.blobErr(); err != nil {
		return nil, err
	}
	return EncodeStep(&c)
}

// withoutEventVectors returns an, or a copy of it whose events carry no
// embedding.
func withoutEventVectors(an *Annotations) *Annotations {
	if an == nil || !slices.ContainsFunc(an.Events, func(e Event) bool { return len(e.Embedding) > 0 }) {
		return an
	}
	c := *an
	c.Events = slices.Clone(an.Events)
	for i := range c.Events {
		c.Events[i].Embedding = nil
	}
	return &c
}

func (w *episodeWriter) blobs(f Features) Features {
	if !hasBytes(f) {
		return f // nothing to move: the step's own map serves (it is only read)
	}
	out := make(Features, len(f))
	for k, t := range f {
		if len(t.Bytes) > 0 {
			ref, err := w.b.PutBlob(t.Bytes)
			if err != nil {
				w.errs = append(w.errs, err)
			}
			t.Bytes, t.Ref = nil, ref
		}
		out[k] = t
	}
	return out
}

func hasBytes(f Features) bool {
	for _, t := range f {
		if len(t.Bytes) > 0 {
			return true
		}
	}
	return false
}
