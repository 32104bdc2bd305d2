package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ctxgraph/ctxgraph/cms"
	"github.com/ctxgraph/ctxgraph/embed"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/wave"
)

// Config is the daemon's configuration: configs/ctxgraph.yaml documents
// every field and its default.
type Config struct {
	Data     string `yaml:"data"`
	LogLevel string `yaml:"log_level"`
	NATS     struct {
		Addr string `yaml:"addr"`
		// Prefix starts every subject (default "ctxgraph").
		Prefix string `yaml:"prefix"`
		// MaxPayload is the largest message the server accepts.
		MaxPayload int32 `yaml:"max_payload"`
		// DedupeWindow is JetStream's Nats-Msg-Id duplicate window. The
		// server keeps every id published inside it on its heap, about
		// 125 bytes and 2 objects each (BenchmarkDedupeWindowHeap): a
		// daemon taking R messages/s holds R × window of them, and each
		// garbage collection marks them all. A start rebuilds them from
		// the stream's messages of the last window (JetStream's restore,
		// the "serve" start phase): about 3 µs each. Past the window the
		// graph's applied-message records still drop a repeat, so the
		// window only saves a late retry's trip to the consumer: 30 s
		// covers a publisher's retries, and a restart right after 90 s of
		// ingest at 1,000 messages/s restored in 46 ms against 241 ms
		// at JetStream's usual 2 minutes (BENCHMARKS.md, fiftieth round).
		DedupeWindow time.Duration `yaml:"dedupe_window"`
		// MaxStreamBytes caps each stream's disk use (-1: unlimited).
		MaxStreamBytes int64 `yaml:"max_stream_bytes"`
		// SyncAlways fsyncs every stored message before JetStream acks
		// the publish (an acknowledged step survives a power cut);
		// otherwise JetStream fsyncs every SyncInterval and an
		// acknowledged step survives a process crash.
		SyncAlways   bool          `yaml:"sync_always"`
		SyncInterval time.Duration `yaml:"sync_interval"`
	} `yaml:"nats"`
	HTTP struct {
		Addr string `yaml:"addr"`
		// Pprof serves Go's profiles (CPU, heap, allocations,
		// goroutines, an execution trace) under /debug/pprof/, to
		// operators only. Off by default.
		Pprof bool `yaml:"pprof"`
	} `yaml:"http"`
	Ingest struct {
		// BatchSize is how many messages one pull takes at most, and
		// how many one Badger transaction takes, a steps message
		// counting as its steps.
		BatchSize int `yaml:"batch_size"`
		// MaxMessageBytes: larger messages go to the dead-letter stream.
		MaxMessageBytes int `yaml:"max_message_bytes"`
		// MaxDeliver: deliveries of a failing message before it is
		// dead-lettered.
		MaxDeliver int `yaml:"max_deliver"`
		// Backoff is the first redelivery delay of a failed message;
		// it doubles with each delivery, up to MaxBackoff. A storage
		// failure holds the batch and retries it on the same schedule.
		Backoff    time.Duration `yaml:"backoff"`
		MaxBackoff time.Duration `yaml:"max_backoff"`
		// AckWait is how long JetStream waits for an ack before it
		// redelivers (after a crash, unacked messages come back then).
		AckWait time.Duration `yaml:"ack_wait"`
		// SyncWrites fsyncs each Badger commit before the ack.
		SyncWrites bool `yaml:"sync_writes"`
		// YieldToPlanner is the longest ingest's decoding, applying and
		// vector indexing pause at a time while planner calls run (at
		// most half the time); 0 turns it off.
		YieldToPlanner time.Duration `yaml:"yield_to_planner"`
	} `yaml:"ingest"`
	Storage struct {
		// GCInterval is how often Badger's value log is garbage
		// collected; 0 turns it off.
		GCInterval time.Duration `yaml:"gc_interval"`
		// GCDiscardRatio: a value-log file is rewritten once at least
		// this fraction of it is stale.
		GCDiscardRatio float64 `yaml:"gc_discard_ratio"`
		// ValueThreshold: graph values larger than this many bytes
		// (records, embeddings, stored steps) go to the value log (cheap
		// compactions, faster ingest; replaced values take disk until
		// value-log GC); 0 keeps all in the tree.
		ValueThreshold int `yaml:"value_threshold"`
		// MemTableMiB is the size of each of Badger's memtables, MiB
		// (particle.Options.MemTableSize): a full one is written out as
		// a table, a core's work that gives way to ingest but still
		// slows it (BENCHMARKS.md, sixty-fourth round).
		MemTableMiB int `yaml:"memtable_mib"`
		// ValueLogFileMiB is the size at which Badger starts a new
		// value-log file, MiB (particle.Options.ValueLogFileSize): a
		// start reads the newest file whole before it loads the graph.
		ValueLogFileMiB int `yaml:"value_log_file_mib"`
		// ViewSnapshot: a clean shutdown copies the graph's nodes,
		// edges and episodes to DIR/graph/view.snapshot, and the next
		// start loads them from it when the graph has not been written
		// since (faster than scanning Badger).
		ViewSnapshot bool `yaml:"view_snapshot"`
		// Checkpoints: while it serves, the daemon saves each part a
		// start after a crash catches up again, once this many records
		// (writes and deletions of nodes, edges and episodes) have been
		// committed since it was last saved, so that the start catches
		// it up only with what came after. The parts' costs differ
		// (BENCHMARKS.md, fifty-ninth round; 1M-edge store):
		//   - view_records: the view snapshot (needs view_snapshot): a
		//     cheap catch-up (3-10 s for 191k records on a slow host),
		//     but saving it writes a copy of the graph (3.2 GB, about
		//     20 s of CPU);
		//   - vector_records: the vector index and its splits: without
		//     checkpoints the slowest part of a crash start (23-25 s
		//     for 191k records), 1.2 GB to save;
		//   - keyword_records: the keyword index's documents: 12-16 s
		//     for 191k records, 11 MB to save.
		// A due part waits for a lull of ingest (2 s with nothing
		// applied), up to twice its count. A part with nothing on disk
		// counts the whole graph. 0 turns a part's checkpoints off.
		// Check is how often the daemon looks whether one is due.
		Checkpoints struct {
			ViewRecords    int64         `yaml:"view_records"`
			VectorRecords  int64         `yaml:"vector_records"`
			KeywordRecords int64         `yaml:"keyword_records"`
			Check          time.Duration `yaml:"check"`
		} `yaml:"checkpoints"`
	} `yaml:"storage"`
	Retention struct {
		// Enabled turns the retention pass on (off by default).
		Enabled bool `yaml:"enabled"`
		// Interval is how often the pass runs.
		Interval time.Duration `yaml:"interval"`
		// Action is archive (keep removed items as archive records)
		// or delete.
		Action string `yaml:"action"`
		// Rules say per kind and type when an item has faded.
		Rules []particle.RetentionRule `yaml:"rules"`
	} `yaml:"retention"`
	Embed struct {
		Provider   string        `yaml:"provider"`
		Dimensions int           `yaml:"dimensions"`
		BaseURL    string        `yaml:"base_url"`
		Model      string        `yaml:"model"`
		APIKeyEnv  string        `yaml:"api_key_env"`
		Timeout    time.Duration `yaml:"timeout"`
	} `yaml:"embed"`
	Salience struct {
		Decay     wave.DecayFn  `yaml:"decay"`
		HalfLife  time.Duration `yaml:"half_life"`
		Reinforce float64       `yaml:"reinforce"`
	} `yaml:"salience"`
	CMS struct {
		Bands []cms.Band `yaml:"bands"`
	} `yaml:"cms"`
	Planner struct {
		HypothesisBelow float64 `yaml:"hypothesis_below"`
		PerNodeFanout   int     `yaml:"per_node_fanout"`
		// SessionAlpha is the rate at which answers move a session's
		// context state vector.
		SessionAlpha float64 `yaml:"session_alpha"`
	} `yaml:"planner"`
	Vectors struct {
		// Index is ivf (inverted file: fast inserts and filtered search),
		// hnsw (graph) or flat (exact).
		Index string `yaml:"index"`
		// NProbe is the number of IVF lists an unfiltered search probes
		// at most; from an eighth of them on it stops once the lists left
		// cannot hold a better item (wave.IVFOptions.NProbe).
		NProbe int `yaml:"nprobe"`
		// SplitByAgent keeps the IVF's items a second time apart by
		// agent, for same-agent searches (wave.IVF.SplitByAgent).
		SplitByAgent bool `yaml:"split_by_agent"`
		// SplitByTime keeps them apart by the hour their scope starts
		// in as well, for searches under a narrow time window
		// (wave.IVF.SplitByTime).
		SplitByTime    bool `yaml:"split_by_time"`
		M              int  `yaml:"m"`
		EfConstruction int  `yaml:"ef_construction"`
		EfSearch       int  `yaml:"ef_search"`
	} `yaml:"vectors"`
	Memory struct {
		// HugePages lets the daemon ask for transparent huge pages on
		// Linux (package hugepage), for hosts whose THP mode is madvise:
		// a start that loads snapshots has its load fault in huge pages
		// where memory is free for them, or on a host that takes free
		// memory back faults it in ahead in 4 KiB pages (hugepage.ForLoad), and with
		// CollapseIdle the heap is collapsed while the daemon is idle.
		// On by default; a host in THP mode "always" needs none of it,
		// one in mode "never" keeps 4 KiB pages (faulted in ahead where
		// its host takes free memory back).
		HugePages bool `yaml:"huge_pages"`
		// CollapseIdle (with HugePages) runs the huge-page keeper: the
		// heap is collapsed into huge pages while the daemon is idle,
		// and the planner's random reads over gigabytes then miss the
		// TLB less, for more resident memory; a reply can stall while a
		// pass collapses. Off by default: on the VM the benchmarks run
		// on (a PVM guest), a collapsed heap was followed by the planner
		// running 5-10 times slower (BENCHMARKS.md, sixty-second round).
		CollapseIdle bool `yaml:"collapse_idle"`
		// GCPercent is the Go garbage collector's target (GOGC): the
		// heap may grow by this percentage of what is live before a
		// collection. Most of the daemon's heap is the long-lived view,
		// which every collection marks whole: 300 instead of Go's 100
		// makes collections a third as frequent, which halves the
		// visibility tail (BENCHMARKS.md), at up to twice the heap.
		// 100 leaves Go's setting (and a GOGC environment variable)
		// alone; -1 turns collection off but for LimitMiB.
		GCPercent int `yaml:"gc_percent"`
		// LimitMiB is a soft memory limit (GOMEMLIMIT), MiB: near it the
		// collector runs as often as it must. It budgets the edges'
		// codes too, which live outside Go's heap: Go's own limit is
		// what they leave of it (at least half). 0 leaves Go's setting
		// (and a GOMEMLIMIT environment variable) alone.
		LimitMiB int64 `yaml:"limit_mib"`
	} `yaml:"memory"`
	// Security is auth, rate_limit and policy (security.go).
	Security SecurityConfig `yaml:",inline"`
}

// DefaultConfig is the configuration without a file or flags.
func DefaultConfig() Config {
	var c Config
	c.Data = "./ctxgraph-data"
	c.LogLevel = "info"
	c.NATS.Addr = "127.0.0.1:4222"
	c.NATS.Prefix = "ctxgraph"
	c.NATS.MaxPayload = 8 << 20
	c.NATS.DedupeWindow = 30 * time.Second
	c.NATS.MaxStreamBytes = -1
	c.NATS.SyncInterval = 2 * time.Minute
	c.HTTP.Addr = "127.0.0.1:8080"
	c.Ingest.BatchSize = 2048
	c.Ingest.MaxMessageBytes = 4 << 20
	c.Ingest.MaxDeliver = 5
	c.Ingest.Backoff = 250 * time.Millisecond
	c.Ingest.MaxBackoff = 30 * time.Second
	c.Ingest.AckWait = 30 * time.Second
	c.Ingest.SyncWrites = true
	c.Ingest.YieldToPlanner = 5 * time.Millisecond
	c.Storage.GCInterval = 10 * time.Minute
	c.Storage.GCDiscardRatio = 0.5
	c.Storage.ValueThreshold = particle.DefaultValueThreshold
	c.Storage.MemTableMiB = particle.DefaultMemTableSize >> 20
	c.Storage.ValueLogFileMiB = particle.DefaultValueLogFileSize >> 20
	c.Storage.ViewSnapshot = true
	c.Storage.Checkpoints.ViewRecords = 1_000_000
	c.Storage.Checkpoints.VectorRecords = 250_000
	c.Storage.Checkpoints.KeywordRecords = 50_000
	c.Storage.Checkpoints.Check = 15 * time.Second
	c.Retention.Interval = time.Hour
	c.Retention.Action = "archive"
	c.Retention.Rules = []particle.RetentionRule{}
	c.Embed.Provider = "hash"
	c.Embed.Dimensions = 384
	c.Embed.Timeout = 10 * time.Second
	c.Salience.Decay = wave.DecayExp
	c.Salience.HalfLife = 6 * time.Hour
	c.Salience.Reinforce = 0.2
	c.CMS.Bands = cms.DefaultBands()
	c.Planner.HypothesisBelow = 0.5
	c.Planner.PerNodeFanout = 32
	c.Planner.SessionAlpha = 0.3
	c.Vectors.Index = "ivf"
	c.Vectors.NProbe = wave.DefaultIVFOptions().NProbe
	c.Vectors.SplitByAgent = true
	c.Vectors.SplitByTime = true
	c.Vectors.M = 16
	c.Vectors.EfConstruction = 200
	c.Vectors.EfSearch = 96
	c.Memory.HugePages = true
	c.Memory.GCPercent = 100
	c.Security = DefaultSecurity()
	return c
}

// LoadConfig reads path over the defaults (no path: the defaults).
// Unknown keys are errors.
func LoadConfig(path string) (Config, error) {
	c := DefaultConfig()
	if path == "" {
		return c, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Data == "" {
		errs = append(errs, errors.New("data: a directory is required"))
	}
	for name, addr := range map[string]string{"nats.addr": c.NATS.Addr, "http.addr": c.HTTP.Addr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", name, addr, err))
		}
	}
	if c.Memory.GCPercent < -1 || c.Memory.GCPercent == 0 || c.Memory.LimitMiB < 0 {
		errs = append(errs, fmt.Errorf("memory: gc_percent %d must be -1 or ≥ 1, limit_mib %d ≥ 0", c.Memory.GCPercent, c.Memory.LimitMiB))
	}
	if c.Memory.GCPercent == -1 && c.Memory.LimitMiB == 0 {
		errs = append(errs, errors.New("memory: gc_percent -1 (collection off) needs limit_mib"))
	}
	if c.Ingest.BatchSize < 1 || c.Ingest.BatchSize > 10000 {
		errs = append(errs, fmt.Errorf("ingest.batch_size %d outside 1..10000", c.Ingest.BatchSize))
	}
	if c.Ingest.MaxDeliver < 1 {
		errs = append(errs, fmt.Errorf("ingest.max_deliver %d must be ≥ 1", c.Ingest.MaxDeliver))
	}
	if c.Ingest.MaxMessageBytes < 1 || int32(c.Ingest.MaxMessageBytes) > c.NATS.MaxPayload {
		errs = append(errs, fmt.Errorf("ingest.max_message_bytes %d must be in 1..nats.max_payload (%d)", c.Ingest.MaxMessageBytes, c.NATS.MaxPayload))
	}
	if c.Ingest.Backoff <= 0 || c.Ingest.MaxBackoff < c.Ingest.Backoff {
		errs = append(errs, fmt.Errorf("ingest.backoff %v must be > 0 and ≤ ingest.max_backoff %v", c.Ingest.Backoff, c.Ingest.MaxBackoff))
	}
	if c.Ingest.AckWait < time.Second {
		errs = append(errs, fmt.Errorf("ingest.ack_wait %v must be ≥ 1s", c.Ingest.AckWait))
	}
	if c.Ingest.YieldToPlanner < 0 || c.Ingest.YieldToPlanner > time.Second {
		errs = append(errs, fmt.Errorf("ingest.yield_to_planner %v outside 0..1s", c.Ingest.YieldToPlanner))
	}
	if c.Storage.GCInterval < 0 || !(c.Storage.GCDiscardRatio > 0 && c.Storage.GCDiscardRatio < 1) {
		errs = append(errs, fmt.Errorf("storage: gc_interval %v must be ≥ 0 and gc_discard_ratio %v in (0, 1)", c.Storage.GCInterval, c.Storage.GCDiscardRatio))
	}
	if ck := c.Storage.Checkpoints; ck.ViewRecords < 0 || ck.VectorRecords < 0 || ck.KeywordRecords < 0 || ck.Check <= 0 {
		errs = append(errs, fmt.Errorf("storage.checkpoints: view_records %d, vector_records %d and keyword_records %d must be ≥ 0 (0: none), check %v > 0",
			ck.ViewRecords, ck.VectorRecords, ck.KeywordRecords, ck.Check))
	}
	if c.Storage.ValueThreshold < 0 || c.Storage.ValueThreshold > 1<<20 {
		errs = append(errs, fmt.Errorf("storage.value_threshold %d outside 0..1048576", c.Storage.ValueThreshold))
	}
	if c.Storage.MemTableMiB < 4 || c.Storage.MemTableMiB > 1024 {
		// Below 4 MiB a transaction (15% of it) could not hold an
		// ingest batch's keys.
		errs = append(errs, fmt.Errorf("storage.memtable_mib %d outside 4..1024", c.Storage.MemTableMiB))
	}
	if c.Storage.ValueLogFileMiB < 1 || c.Storage.ValueLogFileMiB > 2047 {
		// (Badger's bounds.)
		errs = append(errs, fmt.Errorf("storage.value_log_file_mib %d outside 1..2047", c.Storage.ValueLogFileMiB))
	}
	if c.Retention.Enabled && c.Retention.Interval <= 0 {
		errs = append(errs, fmt.Errorf("retention.interval %v must be > 0", c.Retention.Interval))
	}
	if c.Retention.Action != "archive" && c.Retention.Action != "delete" {
		errs = append(errs, fmt.Errorf("retention.action %q must be archive or delete", c.Retention.Action))
	}
	for i, r := range c.Retention.Rules {
		if err := r.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("retention.rules[%d]: %w", i, err))
		}
	}
	if err := (wave.Decay{Fn: c.Salience.Decay, HalfLife: c.Salience.HalfLife}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("salience: %w", err))
	}
	for _, b := range c.CMS.Bands {
		if err := (wave.Decay{Fn: b.Decay, HalfLife: b.HalfLife}).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("cms.bands level %d: %w", b.Level, err))
		}
	}
	switch c.Vectors.Index {
	case "ivf", "hnsw", "flat":
	default:
		errs = append(errs, fmt.Errorf("vectors.index %q (want ivf, hnsw or flat)", c.Vectors.Index))
	}
	if c.Vectors.Index == "ivf" && (c.Vectors.NProbe < 1 || c.Vectors.NProbe > 4096) {
		errs = append(errs, fmt.Errorf("vectors.nprobe %d (want 1 to 4096)", c.Vectors.NProbe))
	}
	if c.Vectors.Index == "hnsw" && (c.Vectors.M < 2 || c.Vectors.EfConstruction < 1 || c.Vectors.EfSearch < 1) {
		errs = append(errs, fmt.Errorf("vectors: m must be ≥ 2 and ef_construction, ef_search ≥ 1"))
	}
	if c.Prefix() == "" {
		errs = append(errs, errors.New("nats.prefix is required"))
	}
	errs = append(errs, c.validateSecurity()...)
	return errors.Join(errs...)
}

// Prefix is the subject prefix.
func (c *Config) Prefix() string { return c.NATS.Prefix }

// EmbedOptions translates the embed section.
func (c *Config) EmbedOptions() embed.Options {
	o := embed.DefaultOptions()
	o.Provider = c.Embed.Provider
	o.Dimensions = c.Embed.Dimensions
	o.BaseURL = c.Embed.BaseURL
	o.Model = c.Embed.Model
	o.Timeout = c.Embed.Timeout
	if c.Embed.APIKeyEnv != "" {
		o.APIKey = os.Getenv(c.Embed.APIKeyEnv)
	}
	return o
}

// applyMemoryConfig sets the garbage collector's target and the soft
// memory limit the memory section asks for (the process's, so the last
// daemon started in a process sets them); the defaults leave Go's (and
// GOGC / GOMEMLIMIT) as they are.
func applyMemoryConfig(c Config, log *slog.Logger) {
	if c.Memory.GCPercent != 100 {
		prev := debug.SetGCPercent(c.Memory.GCPercent)
		log.Info("garbage collector target set", "gc_percent", c.Memory.GCPercent, "was", prev)
	}
	if c.Memory.LimitMiB > 0 {
		prev := debug.SetMemoryLimit(c.Memory.LimitMiB << 20)
		log.Info("soft memory limit set", "limit_mib", c.Memory.LimitMiB, "was_mib", prev>>20)
	}
}
