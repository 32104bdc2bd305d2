package arrowexport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// RecordWriter receives an export: Begin with the schema, once, then
// each record batch. The export does not close it.
type RecordWriter interface {
	Begin(schema *arrow.Schema) error
	Write(rec arrow.Record) error
}

// Stats counts what an export wrote.
type Stats struct {
	Rows    int64
	Batches int
}

// Run exports one table of st into w, streaming: it reads one consistent
// snapshot of the store in record batches of at most o.BatchRows rows,
// while another goroutine writes the previous batch, so memory holds a
// few batches whatever the store's size and ingest can go on meanwhile.
func Run(ctx context.Context, st *particle.Store, o Options, w RecordWriter) (Stats, error) {
	o.defaults()
	if err := o.validate(); err != nil {
		return Stats{}, err
	}
	// What an export writes leaves ctxgraph: policy judges it so.
	o.Filter.Principal.Export = true
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p := &pipe{ctx: ctx, cancel: cancel, opts: &o, w: w, recs: make(chan arrow.Record, 1), done: make(chan struct{})}
	err := st.Snapshot(ctx, func(sn *particle.Snapshot) error {
		x := &exporter{sn: sn, o: &o, p: p, g: sn.Guard(o.Filter.Principal)}
		switch o.Table {
		case TableSteps:
			return x.steps()
		case TableEpisodes:
			return x.episodes()
		case TableNodes:
			return x.nodes()
		default:
			return x.edges()
		}
	})
	if p.started {
		close(p.recs)
		<-p.done
	}
	if cause := context.Cause(ctx); p.werr != nil && errors.Is(err, context.Canceled) && cause == p.werr {
		err = nil // the writer's error is the one to report
	}
	if err = errors.Join(err, p.werr); err != nil {
		return p.stats, fmt.Errorf("arrowexport: %s: %w", o.Table, err)
	}
	return p.stats, nil
}

// pipe hands record batches from the snapshot reader to the writer's
// goroutine.
type pipe struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	opts    *Options
	w       RecordWriter
	recs    chan arrow.Record
	done    chan struct{}
	started bool
	werr    error
	stats   Stats
}

// begin announces the schema and starts the writer.
func (p *pipe) begin(s *arrow.Schema, estimate int64) error {
	if p.opts.OnSchema != nil {
		if err := p.opts.OnSchema(s, estimate); err != nil {
			return err
		}
	}
	if err := p.w.Begin(s); err != nil {
		return err
	}
	p.started = true
	go func() {
		defer close(p.done)
		for rec := range p.recs {
			if p.werr == nil {
				if err := p.w.Write(rec); err != nil {
					p.werr = err
					p.cancel(err)
				}
			}
			rec.Release()
		}
	}()
	return nil
}

// send passes a batch to the writer, which releases it.
func (p *pipe) send(rec arrow.Record) error {
	if rec.NumRows() == 0 {
		rec.Release()
		return nil
	}
	p.stats.Rows += rec.NumRows()
	p.stats.Batches++
	select {
	case p.recs <- rec:
		return nil
	case <-p.ctx.Done():
		rec.Release()
		return p.ctx.Err()
	}
}

// exporter reads one table from a snapshot.
type exporter struct {
	sn *particle.Snapshot
	o  *Options
	p  *pipe
	g  *particle.Guard // the principal's, over sn
}

// episodeMatches applies the agent, episode and time filters to an
// episode.
func (x *exporter) episodeMatches(ep *particle.Episode) bool {
	f := &x.o.Filter
	if f.Agent != "" && ep.Agent != f.Agent {
		return false
	}
	if len(f.Episodes) > 0 && !slices.Contains(f.Episodes, ep.ID) {
		return false
	}
	end := ep.EndTime
	if end.IsZero() {
		end = ep.StartTime
	}
	return particle.TimeRange{From: ep.StartTime, To: end}.Overlaps(particle.TimeRange{From: f.Since, To: f.Until})
}

// matchingEpisodes lists the ids of the episodes the filters select, and
// an upper bound of their steps. Only ids are kept: an export holds one
// episode's records at a time.
func (x *exporter) matchingEpisodes() (ids []string, steps int64, err error) {
	err = x.sn.Episodes(x.o.Filter.Namespace, func(ep *particle.Episode) error {
		if x.episodeMatches(ep) && x.g.EpisodeVisible(ep) {
			ids = append(ids, ep.ID)
			steps += int64(ep.Steps)
		}
		return nil
	})
	return ids, steps, err
}

// visibleEdge returns e as the principal may see it (its provenance
// naming no episode the principal may not see), and reports whether it
// is visible at all and salient enough.
func (x *exporter) visibleEdge(e *particle.Edge) (seen *particle.Edge, decayed float64, ok bool) {
	if seen = x.g.VisibleEdge(e); seen == nil {
		return nil, 0, false
	}
	decayed = DecayedSalience(seen, x.o.Now)
	return seen, decayed, decayed >= x.o.Filter.MinSalience
}

func (x *exporter) steps() error {
	ns := x.o.Filter.Namespace
	ids, estimate, err := x.matchingEpisodes()
	if err != nil {
		return err
	}
	var fs featureSet
	for _, id := range ids {
		ep, err := x.sn.Episode(ns, id)
		if err != nil {
			return err
		}
		if err := fs.add(ep); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	specs := fs.sorted()
	b := newStepBuilder(x.o.Alloc, specs, schemaMeta(TableSteps, x.o))
	defer b.release()
	if err := x.p.begin(b.schema, estimate); err != nil {
		return err
	}
	binary := slices.ContainsFunc(specs, func(s *featureSpec) bool { return !s.numeric() && s.dtype != rlds.String })
	return x.pipeSteps(ids, binary, b)
}

// stepChunk is a run of raw stored steps handed from the goroutine that
// scans Badger to the one that builds columns: the scan (the snapshot's
// transaction) and the build each get a core.
type stepChunk struct {
	arena []byte
	views []rlds.StepView // parsed steps, pointing into arena
	n     int             // views in use
	eps   []*episodeRun
	blobs map[string][]byte // image and byte blobs the steps refer to
	size  int
}

// chunkPool keeps chunks, and the parsed views in them, from one export
// to the next.
var chunkPool = sync.Pool{New: func() any { return &stepChunk{blobs: map[string][]byte{}} }}

// episodeRun is an exported episode and its steps' graph context.
type episodeRun struct {
	ep   *particle.Episode
	ctxs map[int]*stepContext
}

func (c *stepChunk) reset() {
	c.arena, c.n, c.eps, c.size = c.arena[:0], 0, c.eps[:0], 0
	clear(c.blobs)
}

// add copies a stored step into the chunk and parses it there.
func (c *stepChunk) add(raw []byte, run *episodeRun) (*rlds.StepView, error) {
	start := len(c.arena)
	c.arena = append(c.arena, raw...)
	if c.n == len(c.views) {
		c.views = append(c.views, rlds.StepView{})
	}
	v := &c.views[c.n]
	if err := v.Parse(c.arena[start:len(c.arena):len(c.arena)]); err != nil {
		return nil, err
	}
	c.n++
	c.eps = append(c.eps, run)
	c.size += len(raw)
	return v, nil
}

// pipeSteps scans and parses the episodes' steps on this goroutine (it
// owns the snapshot) and builds record batches on another.
func (x *exporter) pipeSteps(ids []string, binary bool, b *stepBuilder) error {
	const nchunks = 3
	full, free := make(chan *stepChunk, nchunks), make(chan *stepChunk, nchunks)
	var chunks [nchunks]*stepChunk
	for i := range chunks {
		chunks[i] = chunkPool.Get().(*stepChunk)
		free <- chunks[i]
	}
	defer func() {
		for _, c := range chunks {
			c.reset()
			chunkPool.Put(c)
		}
	}()
	buildErr := make(chan error, 1)
	go func() {
		err := x.buildSteps(b, full, free)
		if err != nil {
			x.p.cancel(err)
			for c := range full { // let the scanner finish
				free <- c
			}
		}
		buildErr <- err
	}()
	scanErr := x.scanSteps(ids, binary, full, free)
	close(full)
	if err := <-buildErr; err != nil {
		return err
	}
	return scanErr
}

// scanSteps fills chunks with parsed steps, applying the time filter and
// resolving blobs when the export has image or byte features.
func (x *exporter) scanSteps(ids []string, binary bool, full, free chan *stepChunk) error {
	ns, f := x.o.Filter.Namespace, &x.o.Filter
	var c *stepChunk
	get := func() error {
		select {
		case c = <-free:
			c.reset()
			return nil
		case <-x.p.ctx.Done():
			return x.p.ctx.Err()
		}
	}
	if err := get(); err != nil {
		return err
	}
	for _, id := range ids {
		ep, err := x.sn.Episode(ns, id)
		if err != nil {
			return err
		}
		ctxs, err := x.stepContexts(ep)
		if err != nil {
			return err
		}
		run := &episodeRun{ep: ep, ctxs: ctxs}
		err = x.sn.Steps(ns, ep.ID, func(idx int, raw []byte) error {
			v, err := c.add(raw, run)
			if err != nil {
				return fmt.Errorf("episode %s step %d: %w", ep.ID, idx, err)
			}
			if (!f.Since.IsZero() && v.Timestamp.Before(f.Since)) || (!f.Until.IsZero() && v.Timestamp.After(f.Until)) {
				c.n--
				c.eps = c.eps[:len(c.eps)-1]
				return nil
			}
			if binary {
				if err := x.readBlobs(c, v); err != nil {
					return fmt.Errorf("episode %s step %d: %w", ep.ID, idx, err)
				}
			}
			if c.n < x.o.BatchRows && c.size < x.o.BatchBytes {
				return nil
			}
			full <- c
			return get()
		})
		if err != nil {
			return err
		}
	}
	full <- c
	return nil
}

// readBlobs reads the blobs v's features refer to into the chunk.
func (x *exporter) readBlobs(c *stepChunk, v *rlds.StepView) error {
	for _, fs := range [2][]rlds.FeatureView{v.Observation, v.Action} {
		for i := range fs {
			ref := fs[i].Ref
			if len(ref) == 0 || c.blobs[string(ref)] != nil {
				continue
			}
			blob, err := x.sn.Blob(string(ref))
			if err != nil {
				return err
			}
			c.blobs[string(ref)] = blob
			c.size += len(blob)
		}
	}
	return nil
}

// buildSteps builds the chunks' steps into record batches.
func (x *exporter) buildSteps(b *stepBuilder, full, free chan *stepChunk) error {
	blobs := func(c *stepChunk) func([]byte, string) ([]byte, error) {
		return func(dst []byte, ref string) ([]byte, error) {
			blob, ok := c.blobs[ref]
			if !ok {
				return dst, fmt.Errorf("%w: blob %s not read", particle.ErrNotFound, ref)
			}
			return append(dst, blob...), nil
		}
	}
	b.reserve(x.o.BatchRows)
	for c := range full {
		lookup := blobs(c)
		for i := range c.n {
			run, v := c.eps[i], &c.views[i]
			if err := b.add(run.ep, v, run.ctxs[v.Index], lookup); err != nil {
				return fmt.Errorf("episode %s: %w", run.ep.ID, err)
			}
			if b.len() >= x.o.BatchRows || b.bytes >= x.o.BatchBytes {
				b.bytes = 0
				if err := x.p.send(b.newRecord()); err != nil {
					return err
				}
				b.reserve(x.o.BatchRows)
			}
		}
		free <- c
	}
	return x.p.send(b.newRecord())
}

// stepContexts maps each step of ep to the visible edges whose
// provenance is that step, and their visible endpoints. Edges keep
// their particle.MaxProvenance most recent sightings, so an early step
// of an edge seen very often loses its context.
func (x *exporter) stepContexts(ep *particle.Episode) (map[int]*stepContext, error) {
	ns := x.o.Filter.Namespace
	out := map[int]*stepContext{}
	nodes := map[string]*particle.Node{}
	node := func(id string) (*particle.Node, error) {
		if n, ok := nodes[id]; ok {
			return n, nil
		}
		n, err := x.sn.Node(ns, id)
		if errors.Is(err, particle.ErrNotFound) {
			err = nil
		}
		if n != nil && !x.g.NodeVisible(n) {
			n = nil
		}
		nodes[id] = n
		return n, err
	}
	for _, eid := range ep.Edges {
		e, err := x.sn.Edge(ns, eid)
		if errors.Is(err, particle.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		e, sal, ok := x.visibleEdge(e)
		if !ok {
			continue
		}
		src, err := node(e.Source)
		if err != nil {
			return nil, err
		}
		dst, err := node(e.Target)
		if err != nil {
			return nil, err
		}
		if src == nil || dst == nil {
			continue // an edge to a node the principal may not see says too much
		}
		for _, p := range e.Provenance {
			if p.EpisodeID != ep.ID || p.StepIndex == nil {
				continue
			}
			sc := out[*p.StepIndex]
			if sc == nil {
				sc = &stepContext{}
				out[*p.StepIndex] = sc
			}
			if slices.ContainsFunc(sc.edges, func(c ctxEdge) bool { return c.id == e.ID }) {
				continue
			}
			sc.edges = append(sc.edges, ctxEdge{id: e.ID, src: e.Source, dst: e.Target, conf: e.Confidence, sal: sal})
			for _, n := range []*particle.Node{src, dst} {
				i := slices.IndexFunc(sc.nodes, func(c ctxNode) bool { return c.id == n.ID })
				if i < 0 {
					sc.nodes = append(sc.nodes, ctxNode{id: n.ID, conf: n.Belief.Score, sal: sal})
				} else {
					sc.nodes[i].sal = max(sc.nodes[i].sal, sal)
				}
			}
		}
	}
	return out, nil
}

// graphTable streams a table of R whose embedding width is fixed by
// the snapshot's records of kind k: it announces the schema, then scan
// adds the rows, flushing a batch whenever it fills.
func graphTable[R any](x *exporter, k particle.RecordKind, t Table, cols func(dim int) []column[R], scan func(add func(*R) error) error) error {
	dims, err := x.sn.EmbeddingDims(k, x.o.Filter.Namespace)
	if err != nil {
		return err
	}
	r := newRows(x.o.Alloc, cols(embeddingDim(dims)), schemaMeta(t, x.o))
	defer r.release()
	var estimate int64
	for _, n := range dims {
		estimate += n
	}
	if err := x.p.begin(r.schema, estimate); err != nil {
		return err
	}
	err = scan(func(v *R) error {
		r.add(v)
		if r.len() >= x.o.BatchRows {
			return x.p.send(r.rb.NewRecord())
		}
		return nil
	})
	if err != nil {
		return err
	}
	return x.p.send(r.rb.NewRecord())
}

func (x *exporter) episodes() error {
	ns := x.o.Filter.Namespace
	ids, _, err := x.matchingEpisodes()
	if err != nil {
		return err
	}
	return graphTable(x, particle.KindEpisode, TableEpisodes, episodeColumns, func(add func(*particle.Episode) error) error {
		for _, id := range ids {
			ep, err := x.sn.Episode(ns, id)
			if err != nil {
				return err
			}
			if err := x.filterEpisodeRefs(ep); err != nil {
				return err
			}
			if err := add(ep); err != nil {
				return err
			}
		}
		return nil
	})
}

// filterEpisodeRefs drops from ep's node and edge lists what the
// principal may not see, and edges below the salience floor.
func (x *exporter) filterEpisodeRefs(ep *particle.Episode) error {
	ns := x.o.Filter.Namespace
	var errs []error
	ep.Edges = slices.DeleteFunc(ep.Edges, func(id string) bool {
		e, err := x.sn.Edge(ns, id)
		if err != nil {
			if !errors.Is(err, particle.ErrNotFound) {
				errs = append(errs, err)
			}
			return true
		}
		_, _, ok := x.visibleEdge(e)
		return !ok
	})
	ep.Nodes = slices.DeleteFunc(ep.Nodes, func(id string) bool {
		n, err := x.sn.Node(ns, id)
		if err != nil {
			if !errors.Is(err, particle.ErrNotFound) {
				errs = append(errs, err)
			}
			return true
		}
		return !x.g.NodeVisible(n)
	})
	if len(ep.Edges) == 0 {
		ep.Edges = nil
	}
	if len(ep.Nodes) == 0 {
		ep.Nodes = nil
	}
	return errors.Join(errs...)
}

// agentEpisodes is the set of episodes a node filter refers to: those of
// Filter.Agent and those listed in Filter.Episodes (nil when neither is
// set).
func (x *exporter) agentEpisodes() (map[string]bool, error) {
	f := &x.o.Filter
	if f.Agent == "" && len(f.Episodes) == 0 {
		return nil, nil
	}
	set := map[string]bool{}
	err := x.sn.Episodes(f.Namespace, func(ep *particle.Episode) error {
		if (f.Agent == "" || ep.Agent == f.Agent) && (len(f.Episodes) == 0 || slices.Contains(f.Episodes, ep.ID)) &&
			x.g.EpisodeVisible(ep) {
			set[ep.ID] = true
		}
		return nil
	})
	return set, err
}

func (x *exporter) nodes() error {
	f := &x.o.Filter
	eps, err := x.agentEpisodes()
	if err != nil {
		return err
	}
	return graphTable(x, particle.KindNode, TableNodes, nodeColumns, func(add func(*particle.Node) error) error {
		return x.sn.Nodes(f.Namespace, func(n *particle.Node) error {
			if n = x.g.VisibleNode(n); n == nil {
				return nil // (else n names only the episodes the principal may see)
			}
			if eps != nil && !slices.ContainsFunc(n.Attributes.RLDSEpisodeIDs, func(id string) bool { return eps[id] }) {
				return nil
			}
			if (!f.Since.IsZero() && n.UpdatedAt.Before(f.Since)) || (!f.Until.IsZero() && n.CreatedAt.After(f.Until)) {
				return nil
			}
			return add(n)
		})
	})
}

// edgeMatches applies the agent, episode and time filters to an edge.
func (x *exporter) edgeMatches(e *particle.Edge) bool {
	f := &x.o.Filter
	if f.Agent != "" || len(f.Episodes) > 0 {
		if !slices.ContainsFunc(e.Provenance, func(p particle.Provenance) bool {
			return (f.Agent == "" || p.Agent == f.Agent) && (len(f.Episodes) == 0 || slices.Contains(f.Episodes, p.EpisodeID))
		}) {
			return false
		}
	}
	return e.Scope.TimeRange.Overlaps(particle.TimeRange{From: f.Since, To: f.Until})
}

func (x *exporter) edges() error {
	f := &x.o.Filter
	return graphTable(x, particle.KindEdge, TableEdges, edgeColumns, func(add func(*EdgeRow) error) error {
		return x.sn.Edges(f.Namespace, func(e *particle.Edge) error {
			// Visibility first: the agent and episode filters match
			// only the provenance the principal may see.
			e, sal, ok := x.visibleEdge(e)
			if !ok || !x.edgeMatches(e) {
				return nil
			}
			return add(&EdgeRow{Edge: *e, SalienceDecayed: sal})
		})
	})
}
