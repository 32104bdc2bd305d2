package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/wave"
)

func micro(t *testing.T) Preset {
	p, err := PresetNamed("micro")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The same preset and seed give byte-identical files; another seed
// gives another workload.
func TestGenerateIsDeterministic(t *testing.T) {
	p := micro(t)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	for i, d := range dirs {
		if _, err := Generate(GenOptions{Preset: p, Seed: uint64(1 + i/2), Out: d}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{MessagesFile, SpansFile, QueriesFile} {
		a, _ := os.ReadFile(filepath.Join(dirs[0], f))
		b, _ := os.ReadFile(filepath.Join(dirs[1], f))
		c, _ := os.ReadFile(filepath.Join(dirs[2], f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs with seed 1", f)
		}
		if bytes.Equal(a, c) {
			t.Errorf("%s is the same with seeds 1 and 2", f)
		}
	}
}

// Every generated message is a valid wire message (it decodes as the
// daemon decodes it), and the integer-vector JSON is the JSON that
// encoding/json writes for the same message.
func TestGeneratedMessagesDecode(t *testing.T) {
	dir := t.TempDir()
	m, err := Generate(GenOptions{Preset: micro(t), Seed: 7, Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	var n, steps, events, vectors int
	err = readJSONL(filepath.Join(dir, MessagesFile), func(b []byte) error {
		msg, err := rlds.DecodeMessage(b)
		if err != nil {
			return err
		}
		h, err := messageHead(b)
		if err != nil {
			return err
		}
		if h.Kind != msg.Kind || h.Agent != msg.Agent || h.EpisodeID != msg.EpisodeID || msg.Step != nil && h.Index != msg.Step.Index {
			t.Fatalf("messageHead = %+v, the message is %s %s %s", h, msg.Kind, msg.Agent, msg.MsgID())
		}
		want, err := json.Marshal(msg)
		if err != nil {
			return err
		}
		got, err := marshalMessage(msg)
		if err != nil {
			return err
		}
		if !jsonEqual(t, got, want) {
			t.Fatalf("marshalMessage differs from json.Marshal:\n%s\n%s", got, want)
		}
		n++
		if msg.Step != nil {
			steps++
			for _, e := range msg.Step.Annotations.Events {
				events++
				if len(e.Embedding) == Dims {
					vectors++
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != m.Messages || steps != m.Steps || events != m.Events || vectors != events {
		t.Errorf("files hold %d messages, %d steps, %d events (%d with vectors); manifest says %d, %d, %d",
			n, steps, events, vectors, m.Messages, m.Steps, m.Events)
	}
	qs, err := ReadQueries(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != m.Queries {
		t.Fatalf("%d queries, manifest says %d", len(qs), m.Queries)
	}
	for _, q := range qs {
		if len(q.Request.Vector) != Dims || (len(q.Truth) == 0) != (q.Admitted == 0) || q.Admitted > 1 {
			t.Fatalf("query %d: %d dims, %d truth, admitted %v", q.ID, len(q.Request.Vector), len(q.Truth), q.Admitted)
		}
		if !slices.IsSortedFunc(q.Truth, func(a, b Truth) int { return -cmpF(a.Score, b.Score) }) {
			t.Fatalf("query %d: truth not best first", q.ID)
		}
	}
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// brute (the run's exact ground truth) answers exactly what wave.Flat
// answers, under filters of every selectivity.
func TestBruteEqualsFlat(t *testing.T) {
	s, err := particle.Open(particle.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(3, 4))
	tp := newTopics(r, 4, 4)
	q := make([]float32, Dims)
	_, err = s.Update(context.Background(), func(b *particle.Batch) error {
		for i := range 3000 {
			n, _, err := b.Resolve(particle.DefaultNamespace, particle.NodeEntity, "thing "+strconv.Itoa(i))
			if err != nil {
				return err
			}
			n.Embedding = make([]float32, Dims)
			tp.item(r, r.IntN(16), q, n.Embedding)
			if err := b.PutNode(n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	br := newBrute(s)
	flat := wave.NewFlat(Dims)
	s.Read(func(rd particle.Reader) {
		rd.Nodes(func(n *particle.Node) bool {
			if err := flat.Add(n.Seq, n.Embedding, wave.Meta{}); err != nil {
				t.Fatal(err)
			}
			return true
		})
	})
	for i, keep := range []uint64{1, 2, 10, 100, 1000} {
		f := &wave.Filter{Allow: func(id uint64) bool { return id%keep == 0 }}
		v := make([]float32, Dims)
		tp.item(r, i, q, v)
		for _, k := range []int{1, 10, 40} {
			got, want := br.Search(v, k, f), flat.Search(v, k, f)
			if !reflect.DeepEqual(ids(got, k), ids(want, k)) {
				t.Errorf("keep 1/%d, k %d: brute %v, flat %v", keep, k, ids(got, k), ids(want, k))
			}
		}
	}
}

// A whole run on the micro preset: the workload goes through NATS into
// a daemon, every phase reports its figures. No timing is asserted.
func TestRunMicro(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon")
	}
	var out bytes.Buffer
	profiles, calls := t.TempDir(), t.TempDir()
	rep, err := Run(context.Background(), RunOptions{Preset: "micro", Seed: 1, Dir: t.TempDir(),
		Data: filepath.Join(t.TempDir(), "data"), Threads: []int{1}, Queries: 15, ExactQueries: 5, Out: &out,
		ProfileDir: profiles, CallsDir: calls})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// Each configuration's timed calls: as many as it counted, each of
	// one of the 15 queries, the in-process ones with their stages, each
	// marked far as its query's recall record is; the far calls and the
	// others timed apart.
	farQuery := checkRecallRecords(t, filepath.Join(calls, RecallFile), rep.Figures)
	for _, prefix := range []string{"planner.in_process", "planner.in_process.hops2", "planner.nats_msgpack"} {
		b, err := os.ReadFile(filepath.Join(calls, prefix+".jsonl"))
		if err != nil {
			t.Errorf("calls of %s: %v", prefix, err)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if float64(len(lines)) != rep.Figures[prefix+".calls"] {
			t.Errorf("%s: %d calls written, %v counted", prefix, len(lines), rep.Figures[prefix+".calls"])
		}
		staged, searched, far := 0, 0, 0
		for _, l := range lines {
			var c callRecord
			if err := json.Unmarshal([]byte(l), &c); err != nil || c.Query < 0 || c.Query >= 15 || c.US <= 0 {
				t.Errorf("%s: call %s (%v)", prefix, l, err)
				break
			}
			if c.Far != farQuery[c.Query] {
				t.Errorf("%s: call %s: far %v, its recall record %v", prefix, l, c.Far, farQuery[c.Query])
			}
			if c.Far {
				far++
			}
			if c.PrefilterUS+c.ExpandUS+c.StitchUS > 0 {
				staged++
				// The planner's own time holds its parts, and the call's
				// time holds it.
				if parts := c.EmbedUS + c.PrefilterUS + c.ExpandUS + c.RerankUS + c.StitchUS; c.TotalUS < parts || c.TotalUS > c.US {
					t.Errorf("%s: call %s: the planner's total outside its parts and the call", prefix, l)
				}
			}
			if c.Lists > 0 && c.Scored > 0 {
				searched++
			}
			if c.Allowed > c.Asked {
				t.Errorf("%s: call %s: more candidates allowed than asked about", prefix, l)
			}
		}
		for class, n := range map[string]int{"far.": far, "near.": len(lines) - far} {
			if p99, ok := rep.Figures[prefix+"."+class+"p99_us"]; prefix != "planner.nats_msgpack" && (!ok || (n > 0) != (p99 > 0)) {
				t.Errorf("%s: %d %s calls, their p99 %v µs (present %v)", prefix, n, class, p99, ok)
			}
		}
		// Every call has its stage times (over NATS, the answer's); only
		// in-process does the daemon's planner say what its IVF did.
		if inProcess := prefix != "planner.nats_msgpack"; staged != len(lines) || inProcess != (searched == len(lines)) || !inProcess && searched > 0 {
			t.Errorf("%s: %d calls of %d with stage times, %d with the index search's work", prefix, staged, len(lines), searched)
		}
	}
	// The one-thread in-process configurations' second pass, the same
	// queries again, beside the first.
	for _, prefix := range []string{"planner.in_process", "planner.in_process.hops2"} {
		b, err := os.ReadFile(filepath.Join(calls, prefix+".second_pass.jsonl"))
		if err != nil {
			t.Errorf("second pass of %s: %v", prefix, err)
			continue
		}
		queries := map[int]bool{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var c callRecord
			if err := json.Unmarshal([]byte(l), &c); err != nil || c.US <= 0 || c.PrefilterUS+c.ExpandUS+c.StitchUS <= 0 {
				t.Errorf("second pass of %s: call %s (%v)", prefix, l, err)
				break
			}
			queries[c.Query] = true
		}
		if float64(len(queries)) != rep.Figures[prefix+".calls"] {
			t.Errorf("second pass of %s: %d queries, the first pass %v calls", prefix, len(queries), rep.Figures[prefix+".calls"])
		}
	}
	// Each phase leaves a CPU and an allocation profile (gzipped protobuf).
	for _, name := range []string{"ingest.pprof", "ingest.allocs.pprof", "planner.allocs.pprof", "reopen.allocs.pprof"} {
		b, err := os.ReadFile(filepath.Join(profiles, name))
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("profile %s: %d bytes (%v)", name, len(b), err)
		}
	}
	f := rep.Figures
	for _, k := range []string{"ingest.steps_per_s", "ingest.visibility_p99_ms", "planner.in_process.p99_us",
		"planner.in_process.hops2.p99_us", "exact.planner.in_process.p99_us", "planner.nats.p99_us", "planner.nats_msgpack.hops2.p99_us",
		"planner.in_process.stage.expand_p99_us", "prefilter.recall_at_10", "reopen_s", "rss_bytes_per_edge", "disk_bytes_per_edge",
		"ingest.gc_cycles", "ingest.gc_cpu_s", "ingest.visibility_gc_cycles", "ingest.visibility_seconds",
		"machine.wake_p50_us", "machine.wake_p99_us", "machine.mem_latency_ns", "machine.dot384_ns",
		"planner.in_process.prefilter.lists_p99", "planner.in_process.hops2.prefilter.scored_p50"} {
		if _, ok := f[k]; !ok {
			t.Errorf("figure %s missing", k)
		}
	}
	// The index's lists as the planner found them: the mean list an item
	// lies in is between the mean list and the longest.
	if l, mean, seen, longest := f["index.lists"], f["index.list_len_mean"], f["index.list_len_seen"], f["index.list_len_max"]; l < 1 || mean <= 0 || seen < mean || seen > longest {
		t.Errorf("index lists: %v lists, mean %v, seen %v, longest %v", l, mean, seen, longest)
	}
	// The mixed phase asked the planner while steps streamed in, and
	// beforehand on the same graph with nothing ingested.
	// No call waited 10 µs or more only if the mean wait is under 10 µs.
	if w, share := f["planner.beside_ingest.wait_mean_us"], f["planner.beside_ingest.waited_share"]; w < 0 || share < 0 || share > 1 || share == 0 && w >= 10 {
		t.Errorf("mixed phase: wait mean %v µs (p99 %v), waited share %v", w, f["planner.beside_ingest.wait_p99_us"], share)
	}
	if f["planner.beside_ingest.calls"] < 1 || f["planner.beside_ingest.p99_us"] < f["planner.beside_ingest.p50_us"] ||
		f["planner.beside_ingest.p50_us"] <= 0 || f["planner.beside_ingest.idle_p50_us"] <= 0 || f["ingest.mixed_steps_per_s"] <= 0 {
		t.Errorf("mixed phase: %v calls, p50 %v, p99 %v µs, idle p50 %v µs, %v steps/s", f["planner.beside_ingest.calls"],
			f["planner.beside_ingest.p50_us"], f["planner.beside_ingest.p99_us"], f["planner.beside_ingest.idle_p50_us"], f["ingest.mixed_steps_per_s"])
	}
	if m := f["planner.beside_ingest.runqueue_measured"]; m > f["planner.beside_ingest.calls"] {
		t.Errorf("mixed phase: %v calls' run-queue waits measured of %v calls", m, f["planner.beside_ingest.calls"])
	}
	// Where the kernel says (Linux's schedstat), each measured call's
	// wait on the run queue is within the call, so the share of the
	// calls' time is a fraction.
	for _, pre := range []string{"planner.beside_ingest.", "planner.beside_ingest.idle_"} {
		if m, ok := f[pre+"runqueue_measured"]; ok {
			if share := f[pre+"runqueue_wait_share"]; m < 1 || share < 0 || share > 1 ||
				f[pre+"runqueue_wait_mean_us"] < 0 || f[pre+"runqueue_wait_p99_us"] < 0 {
				t.Errorf("%s: %v calls measured, run-queue share %v, mean %v, p99 %v µs", pre, m, share, f[pre+"runqueue_wait_mean_us"], f[pre+"runqueue_wait_p99_us"])
			}
		}
	}
	// The reopen says where its start's time went: the heap readied for
	// the load, the graph's open (in turn), then the index's fill, then serving, each within the start.
	var serial float64
	for _, p := range []string{"heap", "badger", "lease", "view", "vectors", "index", "links", "serve"} {
		v, ok := f["reopen.start."+p+"_s"]
		if !ok || v < 0 || v > f["reopen.start_s"] {
			t.Errorf("reopen.start.%s_s = %v (present %v), the start %v s", p, v, ok, f["reopen.start_s"])
		}
		if p == "heap" || p == "badger" || p == "lease" || p == "view" || p == "index" || p == "serve" {
			serial += v
		}
	}
	if serial > f["reopen.start_s"] || f["reopen.start.view_s"] <= 0 {
		t.Errorf("the start's serial parts sum to %v s, the start %v s; the view's load %v s", serial, f["reopen.start_s"], f["reopen.start.view_s"])
	}
	// Each query's faster call of two passes is at most its call in the
	// first, so every percentile of those is at most the pass's.
	for _, prefix := range []string{"planner.in_process.", "planner.in_process.hops2."} {
		for _, p := range []string{"p50_us", "p99_us"} {
			best, ok := f[prefix+"best_of_2."+p]
			if !ok || best <= 0 || best > f[prefix+p] {
				t.Errorf("%sbest_of_2.%s = %v (present %v) against the pass's %v", prefix, p, best, ok, f[prefix+p])
			}
		}
		// The calls a stall hit, in each pass: counted, at most the calls.
		for _, k := range []string{"stalled_calls", "second_pass.stalled_calls"} {
			if n, ok := f[prefix+k]; !ok || n < 0 || n > f[prefix+"calls"] {
				t.Errorf("%s%s = %v (present %v) of %v calls", prefix, k, n, ok, f[prefix+"calls"])
			}
		}
	}
	// On Linux each phase says what share of the vCPUs' time the host
	// took meanwhile, and so does each timed configuration that lasted
	// a clock tick of /proc/stat's.
	if runtime.GOOS == "linux" {
		for _, k := range []string{"ingest.host_steal_share", "planner.host_steal_share"} {
			if _, ok := f[k]; !ok {
				t.Errorf("figure %s missing", k)
			}
		}
	}
	for k, v := range f {
		if strings.HasSuffix(k, "host_steal_share") && (v < 0 || v > 1) {
			t.Errorf("figure %s = %v, not a share", k, v)
		}
	}
	// The paced phase asked for half the bulk rate (no --visibility-rate)
	// and reached a positive rate.
	if asked := f["ingest.visibility_asked_steps_per_s"]; asked != min(20000, f["ingest.steps_per_s"]/2) || f["ingest.visibility_rate_steps_per_s"] <= 0 {
		t.Errorf("paced phase: asked %v steps/s (bulk %v), reached %v", asked, f["ingest.steps_per_s"], f["ingest.visibility_rate_steps_per_s"])
	}
	// The transport baseline took every bulk message, and none of its
	// stream's reached the graph (checked below: graph.steps).
	if f["ingest.transport.steps_per_s"] <= 0 || f["ingest.transport.cpu_us_per_step"] <= 0 {
		t.Errorf("transport baseline: %v steps/s, %v µs of CPU per step", f["ingest.transport.steps_per_s"], f["ingest.transport.cpu_us_per_step"])
	}
	// (Whether the collector runs during a micro ingest depends on the
	// heap the earlier tests left: only the figures' sense is checked.)
	if f["ingest.gc_cycles"] < 0 || f["ingest.gc_cpu_s"] < 0 || f["ingest.cpu_s"] <= 0 {
		t.Errorf("ingest: %v GC cycles using %v s of %v s of CPU", f["ingest.gc_cycles"], f["ingest.gc_cpu_s"], f["ingest.cpu_s"])
	}
	if f["ingest.visibility_gc_cycles"] < 0 || f["ingest.visibility_gc_cycles"] > f["ingest.gc_cycles"] || f["ingest.visibility_seconds"] <= 0 {
		t.Errorf("paced phase: %v GC cycles (the ingest's %v) in %v s", f["ingest.visibility_gc_cycles"], f["ingest.gc_cycles"], f["ingest.visibility_seconds"])
	}
	// The heap after the load: what a forced collection found live, the
	// part of it holding pointers, its objects; the per-edge figure is
	// that part over the graph's edges.
	for _, p := range []string{"gc.", "reopen.gc."} { // after the load, after the reopen
		live, scan, objects := f[p+"heap_live_bytes"], f[p+"heap_scan_bytes"], f[p+"heap_objects"]
		if live <= 0 || scan <= 0 || objects <= 0 || f[p+"full_collection_s"] <= 0 || f[p+"heap_scan_bytes_per_edge"] != scan/f["graph.edges"] {
			t.Errorf("heap (%s): %v bytes live, %v scannable (%v per edge), %v objects, collection %v s",
				p, live, scan, f[p+"heap_scan_bytes_per_edge"], objects, f[p+"full_collection_s"])
		}
	}
	// Every step writes its stored step and its graph records: more
	// bytes in all than in nodes or in edges alone, in both phases.
	for _, phase := range []string{"ingest.bulk_", "ingest.paced_"} {
		all, nodes, edges := f[phase+"written_bytes_per_step"], f[phase+"written_node_bytes_per_step"], f[phase+"written_edge_bytes_per_step"]
		episodes, steps := f[phase+"written_episode_bytes_per_step"], f[phase+"written_step_bytes_per_step"]
		// Applying a step allocates at least the records it writes.
		if a := f[phase+"allocated_bytes_per_step"]; a < episodes+steps {
			t.Errorf("%s: %v bytes allocated per step", phase, a)
		}
		if nodes <= 0 || edges <= 0 || episodes <= 0 || steps <= 0 || all < nodes+edges+episodes+steps {
			t.Errorf("%s: %v bytes written per step, %v of nodes, %v of edges, %v of episodes, %v of stored steps", phase, all, nodes, edges, episodes, steps)
		}
		// The writer applied, encoded and committed the steps, in
		// batches, for part of the phase (a batch begun just before it
		// can count whole: a little over 1 is not wrong).
		busy, apply, commit, batch := f[phase+"writer_busy"], f[phase+"writer_apply_us_per_step"], f[phase+"writer_commit_us_per_step"], f[phase+"steps_per_batch"]
		if busy <= 0 || busy > 1.5 || apply <= 0 || commit <= 0 || batch <= 0 {
			t.Errorf("%s writer: busy %v, apply %v µs and commit %v µs per step, %v steps per batch", phase, busy, apply, commit, batch)
		}
		// Its time per step is its stages' sum (each truncated to whole
		// microseconds before the division).
		sum := f[phase+"writer_apply_us_per_step"] + f[phase+"writer_encode_us_per_step"] + f[phase+"writer_commit_us_per_step"] + f[phase+"writer_publish_us_per_step"]
		if total := f[phase+"writer_us_per_step"]; total <= 0 || math.Abs(total-sum) > 0.01*sum {
			t.Errorf("%s writer: %v µs a step in all, %v in its stages", phase, total, sum)
		}
	}
	if r := f["ingest.paced_writer_cost_ratio"]; r != f["ingest.paced_writer_us_per_step"]/f["ingest.bulk_writer_us_per_step"] || r <= 0 {
		t.Errorf("a paced step's cost over a bulk step's: %v", r)
	}
	// The NATS floor echoes replies of the answers' mean size: a
	// msgpack answer is smaller than its JSON, and not empty.
	if m, j := f["planner.nats_msgpack.floor.reply_bytes"], f["planner.nats.floor.reply_bytes"]; m <= 0 || m > j ||
		f["planner.nats_msgpack.floor.calls"] != 15 || f["planner.nats_msgpack.floor.p50_us"] <= 0 {
		t.Errorf("NATS floor: reply bytes %v (msgpack) and %v (JSON), %v calls, p50 %v µs", m, j,
			f["planner.nats_msgpack.floor.calls"], f["planner.nats_msgpack.floor.p50_us"])
	}
	// The daemon timed its part of every NATS reply: encoding the
	// answer and handing it to NATS.
	for _, prefix := range []string{"planner.nats.", "planner.nats_msgpack.hops2."} {
		if enc, resp := f[prefix+"daemon_encode_mean_us"], f[prefix+"daemon_reply_mean_us"]; enc <= 0 || resp <= 0 {
			t.Errorf("%s: the daemon's encoding %v µs and reply %v µs", prefix, enc, resp)
		}
	}
	// Each NATS call is split by the planner's time in the daemon, read
	// from its answer: a positive part of the call, never all of it.
	for _, prefix := range []string{"planner.nats.", "planner.nats_msgpack.", "planner.nats_msgpack.hops2."} {
		planned, rest := f[prefix+"daemon_planner_p50_us"], f[prefix+"outside_planner_p50_us"]
		if planned <= 0 || rest <= 0 || f[prefix+"daemon_planner_max_us"] >= f[prefix+"max_us"] {
			t.Errorf("%s: the daemon's planner p50 %v µs (max %v), the rest p50 %v µs, calls max %v µs", prefix, planned, f[prefix+"daemon_planner_max_us"], rest, f[prefix+"max_us"])
		}
	}
	for _, mode := range []string{"in_process", "nats", "nats_msgpack"} {
		k := "planner." + mode + ".gc_cycles"
		if n, ok := f[k]; !ok || n < 0 || n > f["planner.gc_cycles"] {
			t.Errorf("%s = %v (present %v), the planner phase's %v", k, n, ok, f["planner.gc_cycles"])
		}
	}
	p := micro(t)
	if f["graph.steps"] != float64(p.Steps()) || f["ingest.dead_lettered"] != 0 {
		t.Errorf("graph holds %v steps (want %d), %v dead-lettered", f["graph.steps"], p.Steps(), f["ingest.dead_lettered"])
	}
	if f["truth.agreement_at_10"] != 1 {
		t.Errorf("exact search agrees with the generated ground truth %v, want 1", f["truth.agreement_at_10"])
	}
	if f["reopen.vectors"] != f["graph.vectors"] {
		t.Errorf("reopened with %v vectors, had %v", f["reopen.vectors"], f["graph.vectors"])
	}
	var table, js bytes.Buffer
	rep.WriteTable(&table)
	if !strings.Contains(table.String(), "planner in-process, 1 hop") {
		t.Errorf("table:\n%s", table.String())
	}
	if !regexp.MustCompile(`\| machine: [^|]+ \| [0-9,]+ / [0-9,]+; [0-9,]+; [0-9.]+; [0-9.,]+ \|`).MatchString(table.String()) {
		t.Errorf("table lacks the machine's probes:\n%s", table.String())
	}
	// The ingest phase's steal is a percentage on Linux (the micro
	// configurations may be too short for a tick of /proc/stat's).
	if runtime.GOOS == "linux" && !regexp.MustCompile(`\| the host's steal[^|]+ \| [0-9.]+; `).MatchString(table.String()) {
		t.Errorf("table lacks the host's steal:\n%s", table.String())
	}
	if err := rep.WriteJSON(&js); err != nil || !json.Valid(js.Bytes()) {
		t.Errorf("JSON report: %v", err)
	}
}

// TestWakeLatency checks the hand-off probe: one sample per hand-off,
// none negative, and the percentiles in order.
func TestWakeLatency(t *testing.T) {
	d := wakeLatency(50)
	if d.n() != 50 {
		t.Fatalf("%d samples, want 50", d.n())
	}
	if p50, p99 := d.pct(50), d.pct(99); d.pct(0) < 0 || p50 > p99 {
		t.Errorf("samples from %v µs, p50 %v, p99 %v", d.pct(0), p50, p99)
	}
}

// TestMachineSpeedProbes: the memory and arithmetic probes give a time
// per operation that is positive and plausible (a cache miss slower than
// an L1 hit, a 384-d dot product more than a nanosecond and less than a
// microsecond on anything this runs on).
func TestMachineSpeedProbes(t *testing.T) {
	mem, dot := memoryLatency(), dotTime()
	if !(mem > 1 && mem < 10_000) {
		t.Errorf("memory latency %v ns", mem)
	}
	if !(dot > 1 && dot < 1_000) {
		t.Errorf("dot product %v ns", dot)
	}
	t.Logf("memory latency %.1f ns, dot384 %.1f ns", mem, dot)
}

// A paced phase of no steps, or of all of them, is refused before
// anything starts.
func TestRunRefusesABadVisibilityShare(t *testing.T) {
	for _, share := range []float64{-0.1, 1, 1.5} {
		_, err := Run(context.Background(), RunOptions{Preset: "micro", VisibilityShare: share, Dir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "share") {
			t.Errorf("share %v: %v, want an error naming the share", share, err)
		}
	}
}

// A line in another field order still yields its subject and id.
func TestMessageHeadOtherOrder(t *testing.T) {
	for _, line := range []string{
		`{"agent":"r1","episode_id":"e1","kind":"step","step":{"timestamp":"2026-01-01T00:00:00Z","index":12}}`,
		`{"kind":"step","agent":"r1","episode_id":"e1","step":{"timestamp":"2026-01-01T00:00:00Z","index":12}}`,
		`{"kind":"step","agent":"r\"1","episode_id":"e1","step":{"index":12}}`,
	} {
		h, err := messageHead([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if h.Kind != rlds.KindStep || h.EpisodeID != "e1" || h.Index != 12 || !strings.HasPrefix(h.Agent, "r") {
			t.Errorf("%s: head %+v", line, h)
		}
	}
}

// TestWorkloadPackKeepsStrings packs a workload's strings into one
// allocation: every subject, id and episode id reads as before, and all
// of them lie in one buffer, back to back.
func TestWorkloadPackKeepsStrings(t *testing.T) {
	w := &workload{
		msgs:  []pubMsg{{subj: "ctx.rlds.robot-1.ep-1", id: "ep-1-0", ep: "ep-1"}, {subj: "ctx.rlds.robot-1.ep-1", id: "ep-1-1", ep: "ep-1"}},
		spans: []pubMsg{{subj: "ctx.cms.0", id: "span-1"}}, // no episode
	}
	var want []string
	for _, l := range [][]pubMsg{w.msgs, w.spans} {
		for _, m := range l {
			want = append(want, m.subj, m.id, m.ep)
		}
	}
	w.pack()
	var got []string
	var lo, hi uintptr
	for _, l := range [][]pubMsg{w.msgs, w.spans} {
		for _, m := range l {
			for _, s := range []string{m.subj, m.id, m.ep} {
				got = append(got, s)
				if s == "" {
					continue
				}
				p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
				if lo == 0 || p < lo {
					lo = p
				}
				hi = max(hi, p+uintptr(len(s)))
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("packed strings %q, want %q", got, want)
	}
	total := 0
	for _, s := range want {
		total += len(s)
	}
	if int(hi-lo) != total {
		t.Fatalf("the strings span %d bytes, want %d back to back", hi-lo, total)
	}
}

// checkRecallRecords checks the recall pass's records against the
// figures: one per query with an exact answer, each recall the share of
// its exact top 10 found, each miss named, the misses counted, each far
// as its exact 10th best says and the far ones counted. It returns
// whether each query is far.
func checkRecallRecords(t *testing.T, path string, f map[string]float64) (far map[int]bool) {
	t.Helper()
	far = map[int]bool{}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("recall records: %v", err)
		return far
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if float64(len(lines)) != f["prefilter.queries"] {
		t.Errorf("%d recall records, %v queries counted", len(lines), f["prefilter.queries"])
	}
	var sum, farSum float64
	missed := 0
	for _, l := range lines {
		var rec recallRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil || len(rec.Exact) == 0 || len(rec.Found) > 10 || len(rec.Exact) > 10 {
			t.Errorf("recall record %s (%v)", l, err)
			return far
		}
		// Far: the exact 10th best (the last, with fewer) scores below FarScore.
		if last := rec.Exact[len(rec.Exact)-1][1]; rec.Far != (last < FarScore) {
			t.Errorf("recall record %s: far %v with the exact last scoring %v", l, rec.Far, last)
		}
		far[rec.Query] = rec.Far
		if rec.Far {
			farSum += rec.Recall
		}
		found := 0
		for _, e := range rec.Exact {
			if slices.ContainsFunc(rec.Found, func(h [2]float64) bool { return h[0] == e[0] }) {
				found++
			}
		}
		if want := float64(found) / float64(len(rec.Exact)); rec.Recall != want || len(rec.Missed) != len(rec.Exact)-found {
			t.Errorf("recall record %s: recall %v and %d missed, want %v and %d", l, rec.Recall, len(rec.Missed), want, len(rec.Exact)-found)
		}
		for _, m := range rec.Missed {
			if m != "node" && m != "episode" && !strings.HasPrefix(m, "edge:") {
				t.Errorf("recall record %s: a miss named %q", l, m)
			}
		}
		sum += rec.Recall
		missed += len(rec.Missed)
	}
	if mean := sum / float64(len(lines)); math.Abs(mean-f["prefilter.recall_at_10"]) > 1e-9 || float64(missed) != f["prefilter.missed_at_10"] {
		t.Errorf("records: mean recall %v and %d missed; figures %v and %v", mean, missed, f["prefilter.recall_at_10"], f["prefilter.missed_at_10"])
	}
	nFar := 0
	for _, v := range far {
		if v {
			nFar++
		}
	}
	if float64(nFar) != f["prefilter.far_queries"] || nFar > 0 && math.Abs(farSum/float64(nFar)-f["prefilter.recall_at_10_far"]) > 1e-9 {
		t.Errorf("records: %d far queries, mean recall %v; figures %v and %v", nFar, farSum/float64(max(nFar, 1)), f["prefilter.far_queries"], f["prefilter.recall_at_10_far"])
	}
	return far
}

// The bulk phase's steps grouped into steps messages carry the same
// steps of the same episodes, in each episode's order; the mixed and
// paced phases keep their messages as they were.
func TestWorkloadGroupsTheBulkPhase(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(GenOptions{Preset: micro(t), Seed: 7, Out: dir}); err != nil {
		t.Fatal(err)
	}
	for _, asMsgpack := range []bool{false, true} {
		load := func(n int) *workload {
			w, err := loadWorkload(dir, "ctxgraph", asMsgpack)
			if err != nil {
				t.Fatal(err)
			}
			w.cut(0.25, 0.1)
			if err := w.groupBulk(n, "ctxgraph", asMsgpack); err != nil {
				t.Fatal(err)
			}
			return w
		}
		one, four := load(1), load(4)
		if four.bulkEnd >= one.bulkEnd || countSteps(four.msgs[:four.bulkEnd]) != countSteps(one.msgs[:one.bulkEnd]) {
			t.Fatalf("msgpack %v: bulk of %d messages (%d steps) grouped into %d (%d steps)", asMsgpack,
				one.bulkEnd, countSteps(one.msgs[:one.bulkEnd]), four.bulkEnd, countSteps(four.msgs[:four.bulkEnd]))
		}
		steps := func(w *workload) map[string][]int {
			out := map[string][]int{}
			for _, p := range w.msgs[:w.bulkEnd] {
				m, err := rlds.DecodeMessage(p.body)
				if err != nil {
					t.Fatal(err)
				}
				if p.subj != m.Subject("ctxgraph") || p.id != m.MsgID() || p.ep != m.EpisodeID {
					t.Fatalf("message %s: subject %s, episode %s", p.id, p.subj, p.ep)
				}
				if m.Step != nil {
					out[m.EpisodeID] = append(out[m.EpisodeID], m.Step.Index)
				}
				for _, s := range m.Steps {
					out[m.EpisodeID] = append(out[m.EpisodeID], s.Index)
				}
				if len(m.Steps) > 0 && (p.steps != len(m.Steps) || p.idx != m.Steps[len(m.Steps)-1].Index) {
					t.Fatalf("message %s: %d steps, last %d; counted %d, last %d", p.id, len(m.Steps), m.Steps[len(m.Steps)-1].Index, p.steps, p.idx)
				}
			}
			return out
		}
		if !reflect.DeepEqual(steps(four), steps(one)) {
			t.Fatalf("msgpack %v: the grouped bulk phase carries other steps", asMsgpack)
		}
		rest := func(w *workload) (ids []string) {
			for _, p := range w.msgs[w.bulkEnd:] {
				ids = append(ids, p.id)
			}
			return ids
		}
		if !slices.Equal(rest(four), rest(one)) || four.pacedStart-four.bulkEnd != one.pacedStart-one.bulkEnd {
			t.Fatalf("msgpack %v: grouping the bulk phase changed the later phases", asMsgpack)
		}
	}
}

// A run that sends its bulk phase several steps a message stores every
// step, with none dead-lettered.
func TestRunStepsPerMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon")
	}
	var out bytes.Buffer
	rep, err := Run(context.Background(), RunOptions{Preset: "micro", Seed: 1, Dir: t.TempDir(), Phases: []string{},
		StepsPerMessage: 4, Wire: WireMsgpack, Out: &out})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	f := rep.Figures
	if f["ingest.bulk_steps_per_episode_write"] < 1 {
		t.Errorf("the bulk phase's steps of an episode a batch: %v", f["ingest.bulk_steps_per_episode_write"])
	}
	if f["ingest.bulk_cpu_cores"] <= 0 || f["ingest.bulk_cpu_us_per_step"] <= 0 {
		t.Errorf("the bulk phase's CPU: %v cores, %v µs a step", f["ingest.bulk_cpu_cores"], f["ingest.bulk_cpu_us_per_step"])
	}
	if sys := f["ingest.bulk_system_cpu_us_per_step"]; sys < 0 || sys > f["ingest.bulk_cpu_us_per_step"] || f["ingest.bulk_faults_per_step"] <= 0 {
		t.Errorf("the bulk phase's system CPU %v of %v µs a step, %v pages faulted in a step", sys, f["ingest.bulk_cpu_us_per_step"], f["ingest.bulk_faults_per_step"])
	}
	if f["ingest.steps_per_message"] != 4 || f["ingest.dead_lettered"] != 0 || f["graph.steps"] != float64(micro(t).Steps()) {
		t.Errorf("steps per message %v, dead-lettered %v, steps stored %v (want 4, 0, %d)\n%s",
			f["ingest.steps_per_message"], f["ingest.dead_lettered"], f["graph.steps"], micro(t).Steps(), out.String())
	}
	if _, err := Run(context.Background(), RunOptions{Preset: "micro", StepsPerMessage: rlds.MaxStepsPerMessage + 1, Dir: t.TempDir()}); err == nil {
		t.Error("a run of more steps a message than a message may carry was not refused")
	}
}

// TestRunRestartThatDoesNotServe: a restarted process that exits
// without serving fails the run, with what it logged last (here the
// configuration file it was given).
func TestRunRestartThatDoesNotServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon")
	}
	var out bytes.Buffer
	_, err := Run(context.Background(), RunOptions{Preset: "micro", Seed: 1, Dir: t.TempDir(), Threads: []int{1},
		Phases: []string{"reopen"}, Out: &out,
		Serve: []string{"sh", "-c", `echo "no such store: $2" >&2; exit 3`, "serve"}})
	if err == nil || !strings.Contains(err.Error(), "exited before serving") || !strings.Contains(err.Error(), ".yaml") {
		t.Fatalf("a restart that exits at once: %v\n%s", err, out.String())
	}
}
