package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/planner/contentenc"
	"github.com/ctxgraph/ctxgraph/wave"
)

// metrics are the daemon's Prometheus series, on their own registry.
type metrics struct {
	reg             *prometheus.Registry
	ingested        *prometheus.CounterVec
	batchSeconds    *prometheus.HistogramVec
	plannerRequests *prometheus.CounterVec
	plannerStage    *prometheus.HistogramVec
	// prefilterLists, prefilterScored and prefilterRescored are the
	// IVF's work per planner prefilter (wave.SearchStats): its tail is
	// queries that scan far.
	prefilterLists, prefilterScored, prefilterRescored prometheus.Histogram
	// stage holds plannerStage's observers, resolved once rather than
	// by label on every request.
	stage plannerStageObservers
	// replies counts NATS planner replies and their bytes by content
	// coding ("" for identity, s2, snappy, gzip): what compression saves.
	replies map[string]replyCounters
}

// replyCounters are one content coding's series of replies and bytes.
type replyCounters struct{ replies, bytes prometheus.Counter }

// plannerStageObservers are plannerStage's series: the plan's own stages
// (embed … total), the request's (its decoding and plan), and the
// reply's (encoding the answer; handing it to NATS).
type plannerStageObservers struct {
	embed, wait, prefilter, expand, rerank, stitch, total, request, encode, reply prometheus.Observer
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.ingested = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ctxgraph_ingest_messages_total", Help: "Stream messages by stream and result (applied, dead_lettered).",
	}, []string{"stream", "result"})
	m.batchSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ctxgraph_ingest_batch_seconds", Help: "Time to decode, apply and commit one pulled batch.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"stream"})
	m.plannerRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ctxgraph_planner_requests_total", Help: "Planner requests by result (ok, invalid, error).",
	}, []string{"result"})
	m.plannerStage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ctxgraph_planner_stage_seconds", Help: "Planner latency per stage: embed, wait (for the graph's read lock, held by a writer publishing a batch), prefilter, expand, rerank, stitch, total (the plan); request (decoding and plan); encode (the answer in its format); reply (handing it to NATS).",
		Buckets: prometheus.ExponentialBuckets(0.00001, 2, 18),
	}, []string{"stage"})
	m.prefilterLists = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ctxgraph_planner_prefilter_lists", Help: "Inverted lists the IVF index scanned per planner prefilter (an eighth of vectors.nprobe at least, vectors.nprobe unless the rest cannot hold a better item; more under a selective filter).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 13),
	})
	m.prefilterScored = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ctxgraph_planner_prefilter_scored", Help: "Items whose codes the IVF index scored per planner prefilter (those of the scanned lists that the request's time window, agent, site and confidence let through).",
		Buckets: prometheus.ExponentialBuckets(16, 2, 14),
	})
	m.prefilterRescored = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ctxgraph_planner_prefilter_rescored", Help: "Candidates the IVF index rescored with their float32 vectors per planner prefilter (of the best by their codes, those whose exact score may still rank).",
		Buckets: prometheus.ExponentialBuckets(4, 2, 10),
	})
	replies := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ctxgraph_planner_replies_total", Help: "Planner answers replied over NATS, by content coding (identity, or the s2, snappy or gzip a request asked for in Accept-Encoding).",
	}, []string{"coding"})
	replyBytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ctxgraph_planner_reply_bytes_total", Help: "Bytes of the planner answers replied over NATS, as sent, by content coding.",
	}, []string{"coding"})
	m.replies = map[string]replyCounters{}
	for _, c := range []string{"", contentenc.S2, contentenc.Snappy, contentenc.Gzip} {
		label := c
		if c == "" {
			label = "identity"
		}
		m.replies[c] = replyCounters{replies.WithLabelValues(label), replyBytes.WithLabelValues(label)}
	}
	o := m.plannerStage.WithLabelValues
	m.stage = plannerStageObservers{embed: o("embed"), wait: o("wait"), prefilter: o("prefilter"), expand: o("expand"), rerank: o("rerank"),
		stitch: o("stitch"), total: o("total"), request: o("request"), encode: o("encode"), reply: o("reply")}
	m.reg.MustRegister(m.ingested, m.batchSeconds, m.plannerRequests, m.plannerStage, m.prefilterLists, m.prefilterScored, m.prefilterRescored, replies, replyBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observePlan records a planned answer's stages, its prefilter's work
// (when an IVF searched) and the whole request's time.
func (m *metrics) observePlan(ans *planner.Answer, request time.Duration) {
	if s := ans.Search; s.Lists > 0 {
		m.prefilterLists.Observe(float64(s.Lists))
		m.prefilterScored.Observe(float64(s.Scored))
		m.prefilterRescored.Observe(float64(s.Rescored))
	}
	t, st := ans.Timings, &m.stage
	for _, s := range []struct {
		o  prometheus.Observer
		us int64
	}{{st.embed, t.EmbedUS}, {st.wait, t.WaitUS}, {st.prefilter, t.PrefilterUS}, {st.expand, t.ExpandUS}, {st.rerank, t.RerankUS}, {st.stitch, t.StitchUS}, {st.total, t.TotalUS}} {
		s.o.Observe(float64(s.us) / 1e6)
	}
	st.request.Observe(request.Seconds())
}

// observeEncode records an answer's encoding in its format.
func (m *metrics) observeEncode(encode time.Duration) { m.stage.encode.Observe(encode.Seconds()) }

// observeReply records a NATS planner reply: its answer's encoding (and
// compression), its hand-off to NATS, and its size as sent in coding
// ("" for none).
func (m *metrics) observeReply(encode, respond time.Duration, coding string, bytes int) {
	m.observeEncode(encode)
	m.stage.reply.Observe(respond.Seconds())
	if c, ok := m.replies[coding]; ok {
		c.replies.Inc()
		c.bytes.Add(float64(bytes))
	}
}

// registerStore exports store sizes and ingest lag as gauges read at
// scrape time.
func (m *metrics) registerStore(d *Daemon) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_store_nodes", Help: "Nodes in the graph.",
	}, func() float64 { return float64(sum(d.store.Counts().Nodes)) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_store_edges", Help: "Edges in the graph.",
	}, func() float64 { return float64(sum(d.store.Counts().Edges)) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_store_episodes", Help: "Episodes in the graph.",
	}, func() float64 { return float64(d.store.Counts().Episodes) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_store_steps", Help: "RLDS steps stored.",
	}, func() float64 { return float64(d.store.Counts().Steps) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_store_spans", Help: "CMS spans stored.",
	}, func() float64 { return float64(d.store.Counts().Spans) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_vector_index_size", Help: "Vectors in the index.",
	}, func() float64 { return float64(d.index.Len()) }))
	if x, ok := d.index.(interface{ Bytes() int }); ok {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ctxgraph_vector_index_bytes", Help: "Memory the vector index holds beside the float vectors it shares with the graph (its codes, ids, metadata and lists; with its splits).",
		}, func() float64 { return float64(x.Bytes()) }))
	}
	if x, ok := d.index.(*wave.IVF); ok {
		for _, g := range []struct {
			name, help string
			value      func(wave.ListStats) float64
		}{
			{"ctxgraph_vector_index_lists", "The IVF's inverted lists (1 before its first training).",
				func(s wave.ListStats) float64 { return float64(s.Lists) }},
			{"ctxgraph_vector_index_list_length_seen", "The mean length of the inverted list a vector lies in (sum of squared lengths over their sum, removed entries included until a cleanup): what a search walks where an item lies. Above the mean list length by how uneven the lists have grown since the last training.",
				func(s wave.ListStats) float64 { return s.Seen }},
			{"ctxgraph_vector_index_list_length_max", "The longest inverted list's entries (removed ones included until a cleanup).",
				func(s wave.ListStats) float64 { return float64(s.Longest) }},
		} {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help},
				func() float64 { return g.value(x.ListStats()) }))
		}
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_store_edge_codes_mapped_bytes", Help: "Memory mapped outside the Go heap for the edges' int8 codes (the expansion's similarity bounds), which Go's memory statistics leave out: the pages written so far are resident.",
	}, func() float64 { return float64(particle.MappedCodeBytes()) }))
	for split, ready := range map[string]func(*wave.IVF) bool{"agent": (*wave.IVF).SplitReady, "time": (*wave.IVF).TimeSplitReady} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ctxgraph_vector_index_split_ready", ConstLabels: prometheus.Labels{"split": split},
			Help: "1 when the IVF's split (by agent: vectors.split_by_agent, serving same-agent searches; by time: vectors.split_by_time, serving narrow windows) holds every vector, else 0 (filling after a start, turned off, or another index).",
		}, func() float64 {
			if x, ok := d.index.(*wave.IVF); ok && ready(x) {
				return 1
			}
			return 0
		}))
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_vector_index_splits_from_snapshot",
		Help: "1 when this start read the IVF's splits from the snapshot saved beside the index (at a clean shutdown or a checkpoint), else 0 (filled from the index's lists, or loading).",
	}, func() float64 {
		if d.SplitsFromSnapshot() {
			return 1
		}
		return 0
	}))
	for table := range d.store.Written().ByTable() {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ctxgraph_store_written_bytes_total", ConstLabels: prometheus.Labels{"table": table},
			Help: "Bytes (keys and values) committed to the graph store since start, by table: a node or edge record is written whole at every change, its embedding (counted with it) only when that changes.",
		}, func() float64 { return float64(d.store.Written().ByTable()[table]) }))
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ctxgraph_store_written_keys_total",
		Help: "Keys committed to the graph store since start (deletions apart): Badger inserts each into its memtable and logs it, so its commit costs by keys as well as by bytes.",
	}, func() float64 { return float64(d.store.Written().Keys) }))
	for stage := range d.store.UpdateTimes().ByStage() {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ctxgraph_store_update_seconds_total", ConstLabels: prometheus.Labels{"stage": stage},
			Help: "Time the graph store's committed batches spent, by stage (apply, encode, commit: Badger's writes and fsyncs, publish), one after the other on the writer: their rate summed is how busy the writer is.",
		}, func() float64 { return d.store.UpdateTimes().ByStage()[stage].Seconds() }))
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ctxgraph_store_updates_total", Help: "Batches the graph store committed.",
	}, func() float64 { return float64(d.store.UpdateTimes().Batches) }))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ctxgraph_ingest_yields_total", Help: "Times ingest's decoding, applying or vector indexing paused for running planner calls (ingest.yield_to_planner).",
	}, func() float64 { n, _ := d.priority.Waited(); return float64(n) }))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "ctxgraph_ingest_yield_seconds_total", Help: "Time ingest's decoding, applying and vector indexing spent paused for running planner calls, summed over the goroutines that paused.",
	}, func() float64 { _, t := d.priority.Waited(); return t.Seconds() }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_store_view_from_snapshot", Help: "1 when the start loaded the graph's view from its view snapshot, 0 when from Badger.",
	}, func() float64 {
		if d.store.LoadedFromSnapshot() {
			return 1
		}
		return 0
	}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_store_view_caught_up_records", Help: "Nodes, edges and episodes written, and nodes and edges deleted, after the view snapshot the start loaded, which it read from Badger (a snapshot that a run that died before its shutdown set aside); -1 when the snapshot was of Badger's version or the view came from Badger.",
	}, func() float64 {
		cu, behind := d.store.CaughtUp()
		if !behind {
			return -1
		}
		return float64(cu.Nodes + cu.Edges + cu.Episodes + cu.Removed)
	}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_vector_index_caught_up_records", Help: "Vectors the start dropped from the vector snapshot it loaded, for the fill from the graph to add again: of the nodes, edges and episodes written or deleted since it was saved (a run that died before its shutdown saved none newer); -1 when the snapshot matched the graph or none was loaded.",
	}, func() float64 { return float64(d.vectorsCaughtUp) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_start_seconds", Help: "How long the daemon took from start to serving.",
	}, func() float64 { t, _ := d.StartTimes(); return t.Total.Seconds() }))
	for i, p := range (StartTimes{}).Phases() {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "ctxgraph_start_phase_seconds",
			Help:        "Where the start's time went (0 until serving): heap (readied for the load: marked for huge pages or faulted in ahead), badger, lease (the read of the graph's id sequence) and view (the graph's open), vectors (beside them: the vector and keyword indexes read), index (the vector index made ready from the graph), links (beside it: the graph's adjacency), serve (NATS, consumers, HTTP).",
			ConstLabels: prometheus.Labels{"phase": p.Name},
		}, func() float64 {
			t, ok := d.StartTimes()
			if !ok {
				return 0
			}
			return t.Phases()[i].Took.Seconds()
		}))
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ctxgraph_ingest_lag_messages", Help: "Stream messages not yet applied (pending plus unacked), all streams.",
	}, func() float64 { return float64(d.ingestLag()) }))
}

func sum[K comparable](m map[K]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func fmtDuration(since time.Time) string { return time.Since(since).Round(time.Second).String() }
