// Package daemon wires ctxgraph's parts into the one process that
// `ctxgraph serve` runs: an embedded NATS server with JetStream, the
// particle store, the vector index, the planner, sessions, and the HTTP
// API. It owns their lifecycle: Start brings them up in order and
// Shutdown takes them down in reverse.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/planner/keyword"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/session"
	"github.com/ctxgraph/ctxgraph/wave"
)

// Stream names.
const (
	StreamRLDS = "RLDS"
	StreamCMS  = "CMS"
	StreamDLQ  = "DLQ"
)

// Durable consumer names.
const (
	DurableRLDS = "ctxgraph-rlds"
	DurableCMS  = "ctxgraph-cms"
)

// Daemon is a running ctxgraph.
type Daemon struct {
	cfg Config
	log *slog.Logger

	ns *server.Server
	nc *nats.Conn          // in-process: the responders, dead letters, streams
	js jetstream.JetStream // on nc
	// ingestNC is the ingest consumers' own connection, over loopback
	// TCP (ingestConnect), and ingestJS the JetStream context on it.
	ingestNC *nats.Conn
	ingestJS jetstream.JetStream
	store    *particle.Store
	index    wave.Index
	indexer  *planner.Indexer
	// priority is what ingest's decoding, applying and indexing give
	// way to while planner calls run (nil: ingest.yield_to_planner 0).
	priority *planner.Priority
	keyword  *keyword.Index
	embedder embed.Embedder
	planner  *planner.Planner
	replies  replyTimer
	sessions *session.Manager
	metrics  *metrics
	sec      *security // identity, rate limits, denials (auth.go)

	rldsApplier *rlds.Applier
	cmsApplier  *cms.Applier
	consumers   []*consumer
	reqDone     chan struct{}  // closed to stop the NATS request workers
	reqWG       sync.WaitGroup // the NATS request workers
	respSubs    []*nats.Subscription
	stopped     chan struct{} // closed by Shutdown; ends Start's watcher
	maint       maintenanceMetrics
	ckpt        checkpointMetrics
	ckptParts   []checkpointPart
	// vectorsSavedAt and keywordSavedAt are the store's
	// RecordsCommitted when the vector index and keyword documents were
	// last saved (checkpoint.go).
	vectorsSavedAt, keywordSavedAt atomic.Int64

	httpSrv *http.Server
	httpLn  net.Listener
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	ready   atomic.Bool
	storeOK atomic.Bool
	started time.Time
	// startTimes are how long Start took to serve and where that time
	// went (nil until then).
	startTimes atomic.Pointer[StartTimes]
	// vectorsAt is the store generation the vector index loaded from its
	// snapshot was saved at (nil: none loaded).
	vectorsAt *particle.Generation
	// vectorsCaughtUp counts the vectors catchUpVectors dropped from it
	// for the fill to add again (-1: it matched the graph, or none).
	vectorsCaughtUp int
	// splitsFile is the vector index's splits snapshot, open from the
	// load until read once serving (splitIndex).
	splitsFile *os.File
	// splitsStale are the items a start's catch-up removed from the
	// index loaded from its snapshot, whose entries in the splits
	// snapshot are stale.
	splitsStale   []uint64
	splitsLoaded  atomic.Bool // read from that snapshot (SplitsFromSnapshot)
	splitsLoading atomic.Bool // being read (SplitsLoading)
	// loadCollected is closed once the loaded heap is collected
	// (collectLoad).
	loadCollected chan struct{}
	stopOnce      sync.Once
	stopErr       error
	// unlockData releases the data directory (lockData), at the end of
	// Shutdown.
	unlockData func()
}

// Start brings the daemon up. Cancel ctx or call Shutdown to stop it.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (d *Daemon, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d = &Daemon{cfg: cfg, log: log, started: time.Now()}
	// A failed start stops what it started. (Not through d: a failed
	// start returns nil, which the deferred call would find there.)
	started := d
	defer func() {
		if err != nil {
			started.Shutdown(context.Background())
		}
	}()
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if d.unlockData, err = lockData(cfg.Data); err != nil {
		return nil, err
	}
	d.metrics = newMetrics()
	applyMemoryConfig(cfg, log)

	d.embedder, err = embed.New(cfg.EmbedOptions())
	if err != nil {
		return nil, fmt.Errorf("embedder: %w", err)
	}
	so := particle.DefaultOptions(filepath.Join(cfg.Data, "graph"))
	so.SyncWrites = cfg.Ingest.SyncWrites
	so.ValueThreshold = cfg.Storage.ValueThreshold
	so.MemTableSize = int64(cfg.Storage.MemTableMiB) << 20
	so.ValueLogFileSize = int64(cfg.Storage.ValueLogFileMiB) << 20
	so.ViewSnapshot = cfg.Storage.ViewSnapshot
	so.CheckEmbeddingsLater = true // once serving, below
	so.ReadChangedSince = d.vectorStampAhead()
	so.Logger = log.With("component", "particle")
	// The graph loads beside the vector snapshot and the keyword index's
	// files, then the indexer's fill, the keyword index's reconciliation
	// and the graph's adjacency (which Open leaves building) run side by
	// side (all read the graph): a reopen is ready in the time of the
	// slower of each set.
	// What they build stays reachable, and they make little garbage: a
	// collection meanwhile would mark gigabytes to free little, on the
	// cores the load needs. GC is off until the daemon serves and has
	// collected the loaded heap once (collectLoad; a memory limit set
	// with GOMEMLIMIT still applies).
	var times StartTimes
	times.Heap = d.readyHeapForLoad(so)
	restoreGC := particle.PauseGC()
	defer func() {
		if err != nil {
			restoreGC()
		}
	}()
	var storeErr, indexErr, keywordErr error
	both(func() { d.store, storeErr = particle.Open(so) },
		func() {
			t := time.Now()
			d.index, indexErr = d.openVectorIndex(d.embedder.Dimensions())
			keywordErr = d.openKeyword()
			times.Vectors = time.Since(t)
		})
	if err := errors.Join(storeErr, indexErr, keywordErr); err != nil {
		return nil, err
	}
	d.storeOK.Store(true)
	// NATS starts beside the vector index's fill and the keyword index's
	// build: it needs the store (the API keys its users are made from)
	// and nothing they build. After a crash JetStream reads every block
	// of its streams back (about 1 s for 1.4 GB of steps): started after
	// them, that added to the start; beside them, it takes what cores
	// they leave idle. Nothing is consumed
	// before the consumers start, below; a client that connects sooner
	// may publish (JetStream stores it) and finds no responders.
	natsDone := make(chan error, 1)
	go func() {
		t := time.Now()
		var err error
		if d.sec, err = newSecurity(d); err == nil {
			err = d.startNATS()
		}
		times.NATS = time.Since(t)
		natsDone <- err
	}()
	t := time.Now()
	both(func() {
		if err = d.catchUpVectors(); err != nil {
			err = fmt.Errorf("vector snapshot: %w", err)
			return
		}
		d.indexer, err = planner.NewIndexer(d.store, d.index, 0)
		if d.vectorsAt != nil && errors.Is(err, planner.ErrIndexHoldsMore) {
			d.log.Warn("vector snapshot caught up still holds vectors the graph does not; rebuilding it from the graph", "err", err)
			if err = d.dropLoadedVectors(); err == nil {
				d.indexer, err = planner.NewIndexer(d.store, d.index, 0)
			}
		}
		if err != nil {
			err = fmt.Errorf("build vector index: %w", err)
			return
		}
		times.Index = time.Since(t)
		log.Info("vector index ready", "vectors", d.index.Len(), "took", times.Index)
	}, func() {
		d.store.WaitLinked() // the load's adjacency, built beside the fill
		log.Info("graph adjacency ready", "took", time.Since(t))
		keywordErr = d.attachKeyword()
		times.Links = time.Since(t)
	})
	natsErr := <-natsDone
	serving := time.Now()
	if err := errors.Join(err, keywordErr, natsErr); err != nil {
		return nil, err
	}
	// The splits saved beside the vector index's snapshot are read once
	// serving; what ingest changes in the index from here they leave out.
	var splitsLoad *wave.SplitsLoad
	if x, ok := d.index.(*wave.IVF); ok && d.splitsFile != nil {
		splitsLoad = x.ExpectSplits()
		splitsLoad.Exclude(d.splitsStale)
		d.splitsStale = nil
	}
	d.sessions = session.NewManager(d.store, d.embedder.Dimensions(), cfg.Planner.SessionAlpha)
	d.priority = planner.NewPriority(cfg.Ingest.YieldToPlanner)
	d.indexer.GiveWayTo(d.priority)
	d.planner = planner.New(d.store, d.index, d.embedder, sessionSeeds{d.sessions}, planner.Options{
		HypothesisBelow: cfg.Planner.HypothesisBelow, PerNodeFanout: cfg.Planner.PerNodeFanout,
		Keyword: d.keyword, Logger: log.With("component", "planner"), Priority: d.priority,
	})
	d.rldsApplier = &rlds.Applier{Embedder: d.embedder, Decay: cfg.Salience.Decay, HalfLife: cfg.Salience.HalfLife,
		Reinforce: cfg.Salience.Reinforce, Stream: StreamRLDS}
	d.cmsApplier = &cms.Applier{Embedder: d.embedder, Bands: cfg.CMS.Bands, Stream: StreamCMS}
	d.metrics.registerStore(d)

	runCtx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	if err := d.startConsumers(runCtx); err != nil {
		return nil, err
	}
	d.startMaintenance(runCtx)
	d.startCheckpoints(runCtx)
	if err := d.startResponders(); err != nil {
		return nil, err
	}
	if err := d.startHTTP(); err != nil {
		return nil, err
	}
	d.ready.Store(true)
	d.collectLoad(restoreGC)
	// Serving: the edges' codes, which the expansion reads, are made in
	// the background from here, instead of by the first calls to reach
	// each edge; so are the maps of the loaded edges by id and identity,
	// which ingest's first batch and the first look-up of an edge by id
	// would otherwise wait for; and the vector index's splits by agent
	// and by time (same-agent and windowed searches use the inverted
	// lists until each is whole, read from their snapshot or filled);
	// and the check of the edges' embeddings a load from the view
	// snapshot left in its file.
	d.store.CheckEmbeddings()
	d.store.CodeAll()
	if x, ok := d.index.(*wave.IVF); ok {
		d.splitIndex(runCtx, x, splitsLoad)
	}
	go func() {
		t := time.Now()
		d.store.IndexLoaded()
		log.Info("loaded edges indexed by id", "took", time.Since(t))
	}()
	took := time.Since(d.started)
	times.Total, times.Store, times.Serve = took, d.store.OpenTimes(), time.Since(serving)
	d.startTimes.Store(&times)
	log.Info("ctxgraph serving", "nats", d.NATSURL(), "http", d.HTTPAddr(), "data", cfg.Data,
		"start", took.Round(time.Millisecond), "badger", times.Store.Badger.Round(time.Millisecond),
		"view_from_snapshot", d.store.LoadedFromSnapshot())
	d.stopped = make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			d.Shutdown(context.Background())
		case <-d.stopped: // shut down by a direct call: nothing to wait for
		}
	}()
	return d, nil
}

// collectLoad runs the first collection after the load in the
// background, then gives the collector back its percentage (restore).
// The loaded heap stands far over the goal the last collection (before
// the load) left: with the percentage restored first, the goroutines
// that allocated while that collection marked the loaded heap, the
// planner's calls among them, were made to assist it, and the first
// calls after a start of the 1M-edge store spent up to 470 ms in the
// prefilter (BENCHMARKS.md, fifty-fifth round). Forced while the
// percentage is still off, the collection has no goal to keep and asks
// no assists; the heap it finds live then sets the next goal.
func (d *Daemon) collectLoad(restore func()) {
	d.loadCollected = make(chan struct{})
	go func() {
		defer close(d.loadCollected)
		runtime.GC()
		restore()
	}()
}

// LoadCollected is closed once the daemon has collected the heap its
// start loaded and the collector runs at its configured percentage
// again (nil before serving).
func (d *Daemon) LoadCollected() <-chan struct{} { return d.loadCollected }

// StartTimes are where a start's time went, from Start to serving.
type StartTimes struct {
	// Total is from Start to serving.
	Total time.Duration
	// Heap is the heap readied for the load before it: marked for
	// huge pages, or faulted in ahead (hugepage.ForLoad).
	Heap time.Duration
	// Store is the graph's open: Badger's, the read of its id sequence and the
	// view's load. Vectors, beside it, is the vector index read from its
	// snapshot and the keyword index opened.
	Store   particle.OpenTimes
	Vectors time.Duration
	// Index is the vector index made ready from the graph after both.
	// Links, beside it, is the graph's adjacency finished and the
	// keyword index attached to the graph; NATS, beside both, is the
	// embedded server started, its streams recovered and made.
	Index, Links, NATS time.Duration
	// Serve is the rest: the consumers, the responders, HTTP.
	Serve time.Duration
}

// StartPhase is one part of a start, named as /metrics
// (ctxgraph_start_phase_seconds) and the bench (reopen.start.NAME_s)
// name it.
type StartPhase struct {
	Name string
	Took time.Duration
}

// Phases lists t's parts in the order they begin. Vectors runs beside
// the store's three, and Links and NATS beside Index.
func (t StartTimes) Phases() []StartPhase {
	return []StartPhase{
		{"heap", t.Heap}, {"badger", t.Store.Badger}, {"lease", t.Store.Lease}, {"view", t.Store.Load}, {"vectors", t.Vectors},
		{"index", t.Index}, {"links", t.Links}, {"nats", t.NATS}, {"serve", t.Serve},
	}
}

// StartTimes returns where the start's time went; ok is false before
// the daemon serves.
func (d *Daemon) StartTimes() (StartTimes, bool) {
	if t := d.startTimes.Load(); t != nil {
		return *t, true
	}
	return StartTimes{}, false
}

func (d *Daemon) startNATS() error {
	host, portStr, _ := net.SplitHostPort(d.cfg.NATS.Addr)
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("nats.addr port %q: %w", portStr, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	} else {
		// The embedded server only logs a port it cannot listen on, and
		// the start then waited 10 s for it: ask first.
		l, err := net.Listen("tcp", net.JoinHostPort(host, portStr))
		if err != nil {
			return fmt.Errorf("nats.addr: %w", err)
		}
		l.Close()
	}
	opts := &server.Options{
		ServerName: "ctxgraph", Host: host, Port: port,
		JetStream: true, StoreDir: filepath.Join(d.cfg.Data, "jetstream"),
		MaxPayload: d.cfg.NATS.MaxPayload, NoSigs: true,
		SyncAlways: d.cfg.NATS.SyncAlways, SyncInterval: d.cfg.NATS.SyncInterval,
	}
	if err := d.sec.natsOptions(opts); err != nil {
		return err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	ns.SetLoggerV2(d.sec.natsLog(natsLogger{d.log.With("component", "nats")}), false, false, false)
	d.ns = ns
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		return errors.New("nats: not ready after 10s")
	}
	d.nc, err = nats.Connect(ns.ClientURL(), nats.InProcessServer(ns), nats.Name("ctxgraph-daemon"), d.sec.internalNATS())
	if err != nil {
		return fmt.Errorf("nats connect: %w", err)
	}
	d.js, err = jetstream.New(d.nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if d.ingestNC, err = d.ingestConnect(); err != nil {
		return err
	}
	if d.ingestJS, err = jetstream.New(d.ingestNC); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, sc := range streamConfigs(d.cfg) {
		if _, err := d.js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("stream %s: %w", sc.Name, err)
		}
	}
	return nil
}

// streamConfigs are the daemon's JetStream streams under cfg.
func streamConfigs(cfg Config) []jetstream.StreamConfig {
	p := cfg.Prefix()
	return []jetstream.StreamConfig{
		StreamConfig(cfg, StreamRLDS, p+".rlds.>"),
		StreamConfig(cfg, StreamCMS, p+".cms.>"),
		StreamConfig(cfg, StreamDLQ, p+".dlq.>"),
	}
}

// StreamConfig is a stream as cfg makes the daemon's: file storage, the
// dedupe window and the size limits.
func StreamConfig(cfg Config, name, subjects string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: name, Subjects: []string{subjects}, Storage: jetstream.FileStorage,
		Duplicates: cfg.NATS.DedupeWindow, MaxBytes: cfg.NATS.MaxStreamBytes, MaxMsgSize: cfg.NATS.MaxPayload,
	}
}

// ConsumerConfig is a durable pull consumer as cfg makes the daemon's
// ingest consumers (before a restore moves their start): explicit acks
// within ingest.ack_wait, redelivered without limit, up to four batches
// unacknowledged.
func ConsumerConfig(cfg Config, durable string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: cfg.Ingest.AckWait,
		MaxDeliver: -1, MaxAckPending: 4 * cfg.Ingest.BatchSize,
	}
}

// PullMaxMessages is the messages an ingest consumer's pulls keep in
// flight under cfg: two batches.
func PullMaxMessages(cfg Config) int { return 2 * cfg.Ingest.BatchSize }

func (d *Daemon) startConsumers(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		stream, durable string
		dec             decoder
	}{
		{StreamRLDS, DurableRLDS, d.rldsDecoder()},
		{StreamCMS, DurableCMS, d.cmsDecoder()},
	} {
		cc, err := d.consumerConfig(cctx, c.stream, c.durable)
		if err != nil {
			return err
		}
		cons, err := d.ingestJS.CreateOrUpdateConsumer(cctx, c.stream, cc)
		if err != nil {
			return fmt.Errorf("consumer %s: %w", c.durable, err)
		}
		k := &consumer{d: d, stream: c.stream, durable: c.durable, decode: c.dec,
			log: d.log.With("component", "ingest", "stream", c.stream)}
		d.consumers = append(d.consumers, k)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := k.run(ctx, cons); err != nil {
				k.log.Error("consumer stopped", "err", err)
			}
		}()
	}
	return nil
}

func (d *Daemon) startHTTP() error {
	ln, err := net.Listen("tcp", d.cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http listen %s: %w", d.cfg.HTTP.Addr, err)
	}
	d.httpLn = ln
	d.httpSrv = &http.Server{Handler: d.routes(), ReadHeaderTimeout: 5 * time.Second}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("http server", "err", err)
		}
	}()
	return nil
}

// NATSURL is the URL clients connect to.
func (d *Daemon) NATSURL() string {
	if d.ns == nil {
		return ""
	}
	return d.ns.ClientURL()
}

// HTTPAddr is the address the HTTP API listens on.
func (d *Daemon) HTTPAddr() string {
	if d.httpLn == nil {
		return ""
	}
	return d.httpLn.Addr().String()
}

// Store is the daemon's graph store (tests and checks read it).
func (d *Daemon) Store() *particle.Store { return d.store }

// Planner is the daemon's planner.
func (d *Daemon) Planner() *planner.Planner { return d.planner }

// IngestYields reports how many times ingest paused for running planner
// calls (ingest.yield_to_planner) and for how long in all.
func (d *Daemon) IngestYields() (int64, time.Duration) { return d.priority.Waited() }

// WaitIndexed waits until every committed batch is in the vector index.
func (d *Daemon) WaitIndexed(ctx context.Context) error { return d.indexer.Sync(ctx) }

// IndexMark names the last batch queued for the vector index; read in a
// store subscription (the daemon's indexer subscribes first), it names
// the batch being committed.
func (d *Daemon) IndexMark() uint64 { return d.indexer.Queued() }

// WaitIndexedThrough waits until the batches up to mark (an IndexMark
// reading) are in the vector index, whatever was committed since.
func (d *Daemon) WaitIndexedThrough(ctx context.Context, mark uint64) error {
	return d.indexer.SyncThrough(ctx, mark)
}

func (d *Daemon) setStorageOK(ok bool) {
	if d.storeOK.Swap(ok) != ok {
		if ok {
			d.log.Info("storage recovered; ingest resumed")
		} else {
			d.log.Error("storage failing; ingest paused, planner serving from memory")
		}
	}
}

// Shutdown stops the daemon in reverse order of start: HTTP stops taking
// requests, consumers finish their batch, the request/reply responders
// drain (every request NATS had sent is answered), the NATS client
// drains, the store closes, the NATS server stops. It is safe to call
// twice.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.stopOnce.Do(func() {
		if d.stopped != nil {
			defer close(d.stopped)
		}
		d.ready.Store(false)
		var errs []error
		if d.httpSrv != nil {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			errs = append(errs, d.httpSrv.Shutdown(sctx))
			cancel()
		}
		d.awaitSplitsLoad(splitsLoadWait) // before the cancel stops it
		if d.cancel != nil {
			d.cancel()
		}
		d.wg.Wait()
		// Stop taking requests, answer those already sent to the
		// daemon, then drain.
		d.stopResponders()
		for _, nc := range []*nats.Conn{d.ingestNC, d.nc} {
			if nc != nil {
				d.drain(nc)
			}
		}
		if d.splitsFile != nil { // a start that failed before serving
			d.splitsFile.Close()
		}
		if d.indexer != nil {
			d.indexer.Close()
			errs = append(errs, d.saveVectorIndex(context.Background())) // drained: no wait
		}
		d.sec.close() // the last denials, while the store is open
		if d.keyword != nil {
			errs = append(errs, d.keyword.Close())
		}
		if d.store != nil {
			errs = append(errs, d.store.Close())
		}
		if d.ns != nil {
			done := make(chan struct{})
			go func() { d.ns.Shutdown(); d.ns.WaitForShutdown(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				d.log.Error("nats shutdown timed out")
			}
		}
		d.stopErr = errors.Join(errs...)
		if d.unlockData != nil {
			d.unlockData()
		}
		d.log.Info("ctxgraph stopped")
	})
	return d.stopErr
}

// natsLogger adapts slog to the NATS server's Logger.
type natsLogger struct{ l *slog.Logger }

func (n natsLogger) Noticef(f string, a ...any) { n.l.Debug(fmt.Sprintf(f, a...)) }
func (n natsLogger) Warnf(f string, a ...any)   { n.l.Warn(fmt.Sprintf(f, a...)) }
func (n natsLogger) Errorf(f string, a ...any)  { n.l.Error(fmt.Sprintf(f, a...)) }
func (n natsLogger) Fatalf(f string, a ...any)  { n.l.Error(fmt.Sprintf(f, a...)) }
func (n natsLogger) Debugf(f string, a ...any)  { n.l.Debug(fmt.Sprintf(f, a...)) }
func (n natsLogger) Tracef(f string, a ...any)  { n.l.Debug(fmt.Sprintf(f, a...)) }

// sessionSeeds adapts session.Manager to planner.Sessions.
type sessionSeeds struct{ m *session.Manager }

func (s sessionSeeds) Seeds(ctx context.Context, ns, id string) (planner.Seeds, error) {
	ss, err := s.m.Get(ctx, ns, id)
	if err != nil {
		return planner.Seeds{}, err
	}
	return planner.Seeds{
		Agent: ss.Agent, Goals: ss.Goals, Tools: ss.Tools, Entities: ss.ActiveEntities, Intents: ss.Intents,
		Permissions: ss.Constraints.Permissions, Location: ss.Constraints.Location,
		TimeWindow: planner.TimeWindow{From: ss.Constraints.TimeWindow.From, To: ss.Constraints.TimeWindow.To},
		State:      ss.ContextStateVector,
	}, nil
}

func (s sessionSeeds) Blend(ctx context.Context, ns, id string, vecs [][]float32, weights []float64) ([]float32, error) {
	ss, err := s.m.Blend(ctx, ns, id, vecs, weights)
	if err != nil {
		return nil, err
	}
	return ss.ContextStateVector, nil
}

// ingestLag is the number of stream messages not yet applied.
func (d *Daemon) ingestLag() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var lag int64
	for _, c := range d.consumers {
		cons, err := d.js.Consumer(ctx, c.stream, c.durable)
		if err != nil {
			continue
		}
		if ci, err := cons.Info(ctx); err == nil {
			lag += int64(ci.NumPending) + int64(ci.NumAckPending)
		}
	}
	return lag
}

// both runs f and g at once and returns when both have.
func both(f, g func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		g()
	}()
	f()
	wg.Wait()
}
