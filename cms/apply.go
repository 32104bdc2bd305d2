package cms

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
)

// Applier maps spans to graph writes.
type Applier struct {
	Embedder embed.Embedder
	// Bands are the per-level decay parameters (DefaultBands when nil).
	Bands []Band
	// Stream names the applied-message table (default "CMS").
	Stream string
}

// MaxConceptLinks bounds the related_to edges one span adds between its
// concepts (pairs of its first concepts).
const MaxConceptLinks = 8

// Apply writes span s into b; a span applied before changes nothing.
func (a *Applier) Apply(ctx context.Context, b *particle.Batch, s *Span) error {
	stream := a.Stream
	if stream == "" {
		stream = "CMS"
	}
	done, err := b.Applied(stream, s.ID)
	if err != nil || done {
		return err
	}
	bands := a.Bands
	if bands == nil {
		bands = DefaultBands()
	}
	band := BandFor(bands, s.Level)
	ns := particle.Namespace(s.Tenant, s.Project)
	at := s.End
	if at.IsZero() {
		at = s.Start
	}
	if at.IsZero() {
		at = b.Now()
	}
	size := s.UpdateSize
	if size == 0 {
		size = 0.1
	}
	reinforce := math.Min(1, size)
	prov := particle.Provenance{CMSSpanID: s.ID, EpisodeID: s.EpisodeID, StepIndex: s.StepStart, Agent: s.Agent, ObservedAt: at}

	if len(s.Embedding) == 0 && s.Text != "" && a.Embedder != nil {
		v, err := a.Embedder.Embed(ctx, s.Text)
		if err != nil {
			return fmt.Errorf("embed span %s text: %w", s.ID, err)
		}
		s.Embedding = v
	}
	raw, err := encodeSpan(s)
	if err != nil {
		return err
	}
	if err := b.PutSpan(ns, s.ID, s.Level, raw); err != nil {
		return err
	}

	resolve := func(t particle.NodeType, name string) (*particle.Node, error) {
		n, created, err := b.Resolve(ns, t, name)
		if err != nil {
			return nil, err
		}
		if created && a.Embedder != nil {
			v, err := a.Embedder.Embed(ctx, n.Name)
			if err != nil {
				return nil, fmt.Errorf("embed %s %q: %w", t, name, err)
			}
			n.Embedding = v
		}
		particle.TouchNode(n, "", s.ID, 0, at)
		particle.AddTag(n, fmt.Sprintf("cms_level:%d", s.Level))
		return n, b.PutNode(n)
	}
	observe := func(src, dst *particle.Node, t particle.EdgeType, pred string) error {
		_, _, err := b.Observe(particle.Observation{
			Namespace: ns, Source: src.ID, Target: dst.ID, Type: t, Predicate: pred,
			Provenance: prov, At: at, Decay: band.Decay, HalfLife: band.HalfLife, Reinforce: reinforce,
			Embed: func() ([]float32, error) {
				if a.Embedder == nil {
					return nil, nil
				}
				return a.Embedder.Embed(ctx, src.Name+" "+pred+" "+dst.Name)
			},
		})
		return err
	}

	var concepts []*particle.Node
	for _, c := range s.Concepts {
		n, err := resolve(particle.NodeConcept, c)
		if err != nil {
			return err
		}
		concepts = append(concepts, n)
	}
	var epNode *particle.Node
	if s.EpisodeID != "" {
		if ep := b.Episode(ns, s.EpisodeID); ep != nil {
			epNode = b.Node(ep.NodeID)
			if epNode != nil {
				particle.TouchNode(epNode, "", s.ID, 1, at)
				if err := b.PutNode(epNode); err != nil {
					return err
				}
			}
		}
	}
	for _, c := range concepts {
		if epNode != nil {
			if err := observe(c, epNode, particle.EdgeMembership, "abstracts"); err != nil {
				return err
			}
		}
		for _, name := range s.Entities {
			ent, err := resolve(particle.NodeEntity, name)
			if err != nil {
				return err
			}
			if err := observe(c, ent, particle.EdgeAssertion, "about"); err != nil {
				return err
			}
		}
	}
	limit := min(len(concepts), MaxConceptLinks)
	for i := 0; i < limit; i++ {
		for j := i + 1; j < limit; j++ {
			if err := observe(concepts[i], concepts[j], particle.EdgeAssertion, "related_to"); err != nil {
				return err
			}
		}
	}
	if len(concepts) == 0 {
		for _, name := range s.Entities {
			if _, err := resolve(particle.NodeEntity, name); err != nil {
				return err
			}
		}
	}
	b.MarkApplied(stream, s.ID)
	return nil
}

// ConceptNames returns the distinct canonical concept names of s.
func (s *Span) ConceptNames() []string {
	var out []string
	for _, c := range s.Concepts {
		if n := particle.Canonical(c); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
