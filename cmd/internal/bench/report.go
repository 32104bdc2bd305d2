package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/ctxgraph/ctxgraph/wave"
)

// Report is the outcome of a run; --json writes it.
type Report struct {
	Preset  string         `json:"preset"`
	Seed    uint64         `json:"seed"`
	Index   string         `json:"index"`
	Machine Machine        `json:"machine"`
	Config  map[string]any `json:"config"`
	Started time.Time      `json:"started"`
	// Figures are the measurements by plain name; those under "exact."
	// are the brute-force baseline of the figure of the same name.
	Figures map[string]float64 `json:"figures"`
	Targets []Target           `json:"targets"`
}

// Target is one of the design's targets checked against a figure.
type Target struct {
	Figure string  `json:"figure"`
	Op     string  `json:"op"` // "<=" or ">="
	Want   float64 `json:"target"`
	Got    float64 `json:"value"`
	Met    bool    `json:"met"`
	// Applies is false when the target is stated for another preset
	// (the planner and ingest targets are for medium, reopen for large).
	Applies bool   `json:"applies"`
	Note    string `json:"note,omitempty"`
}

// targets are the design's targets (DESIGN.md, Targets).
var targets = []struct {
	figure, op string
	want       float64
	preset     string
	note       string
}{
	{"ingest.steps_per_s", ">=", 20000, "medium", "durable ingest, steps/s"},
	{"ingest.visibility_p99_ms", "<=", 100, "medium", "step visible to the planner, p99 ms"},
	{"planner.in_process.p99_us", "<=", 1000, "medium", "planner p99 in-process, 1 hop, µs"},
	{"planner.in_process.hops2.p99_us", "<=", 1500, "medium", "planner p99 in-process, 2 hops budget 256, µs"},
	{"planner.nats.overhead_p99_us", "<=", 500, "medium", "NATS p99 minus in-process p99, 1 hop, µs"},
	{"planner.nats.hops2.overhead_p99_us", "<=", 500, "medium", "NATS p99 minus in-process p99, 2 hops, µs"},
	{"planner.nats_s2.overhead_p99_us", "<=", 500, "medium", "NATS p99 minus in-process p99, 1 hop, JSON answers in s2 (Accept-Encoding), µs"},
	{"planner.nats_s2.hops2.overhead_p99_us", "<=", 500, "medium", "NATS p99 minus in-process p99, 2 hops, JSON answers in s2 (Accept-Encoding), µs"},
	{"planner.nats_msgpack.overhead_p99_us", "<=", 500, "medium", "NATS p99 minus in-process p99, 1 hop, msgpack requests and answers, µs"},
	{"planner.nats_msgpack.hops2.overhead_p99_us", "<=", 500, "medium", "NATS p99 minus in-process p99, 2 hops, msgpack requests and answers, µs"},
	{"prefilter.recall_at_10", ">=", 0.95, "medium", "prefilter recall@10 against exact"},
	{"reopen_s", "<=", 5, "large", "reopen of a 1M-edge store until it answers, s"},
	{"reopen.process_s", "<=", 5, "large", "restart of a 1M-edge store in a process of its own until it answers over NATS, s"},
}

func checkTargets(f figures, preset string) []Target {
	var out []Target
	for _, t := range targets {
		got, ok := f[t.figure]
		if !ok {
			continue
		}
		met := got <= t.want
		if t.op == ">=" {
			met = got >= t.want
		}
		out = append(out, Target{Figure: t.figure, Op: t.op, Want: t.want, Got: got, Met: met && !math.IsNaN(got),
			Applies: t.preset == preset, Note: t.note})
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	clean := make(map[string]any, len(rep.Figures))
	for k, v := range rep.Figures {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			clean[k] = nil
		} else {
			clean[k] = v
		}
	}
	type alias Report
	b, err := json.MarshalIndent(struct {
		*alias
		Figures map[string]any `json:"figures"`
	}{(*alias)(rep), clean}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteTable writes the report as a Markdown table: every figure beside
// its exact baseline and its target.
func (rep *Report) WriteTable(w io.Writer) {
	f := figures(rep.Figures)
	n := func(k string, prec int) string { return num(f, k, prec) }
	heap := func(p string) string {
		return mb(f, p+"heap_live_bytes") + ", " + mb(f, p+"heap_scan_bytes") + "; " + millions(f, p+"heap_objects") + "; " + n(p+"full_collection_s", 2)
	}
	// A start's phases under prefix (reopen.start., reopen.process.start.).
	startPhases := func(prefix string) string {
		p := func(name string) string { return n(prefix+name+"_s", 2) }
		return p("heap") + "; " + p("badger") + ", " + p("lease") + ", " + p("view") + "; " + p("vectors") + "; " + p("index") + "; " + p("links") + "; " + p("serve")
	}
	trio := func(prefix, unit string) string {
		return n(prefix+"p50_"+unit, 0) + " / " + n(prefix+"p95_"+unit, 0) + " / " + n(prefix+"p99_"+unit, 0)
	}
	pair := func(a, b string, prec int) string { return n(a, prec) + " / " + n(b, prec) }
	written := func(phase string) string {
		return n(phase+"written_bytes_per_step", 0) + " (" + n(phase+"written_node_bytes_per_step", 0) + ", " +
			n(phase+"written_edge_bytes_per_step", 0) + ", " + n(phase+"written_episode_bytes_per_step", 0) + ", " +
			n(phase+"written_step_bytes_per_step", 0) + ")"
	}
	writer := func(phase string) string {
		busy := "—"
		if v, ok := f[phase+"writer_busy"]; ok {
			busy = commas(100*v, 0) + "%"
		}
		us := func(stage string) string { return n(phase+"writer_"+stage+"_us_per_step", 0) }
		return busy + "; " + us("apply") + " + " + us("encode") + " + " + us("commit") + " + " + us("publish") + "; " + n(phase+"steps_per_batch", 1)
	}
	// sched is the writer's time by state in a traced phase (--profile),
	// in percent: on a CPU / runnable / blocked (system calls with it).
	sched := func(phase string) string {
		pct := func(states ...string) string {
			var v float64
			for _, st := range states {
				x, ok := f[phase+"writer_"+st+"_share"]
				if !ok {
					return "—"
				}
				v += x
			}
			return commas(100*v, 0) + "%"
		}
		return pct("running") + " / " + pct("runnable") + " / " + pct("syscall", "blocked")
	}
	verdict := func(fig string) string {
		for _, t := range rep.Targets {
			if t.Figure != fig {
				continue
			}
			s := "meets"
			if !t.Met {
				s = "misses: " + missBy(t)
			}
			if !t.Applies {
				s = "(" + s + "; target is for " + presetOf(t.Figure) + ")"
			}
			return s
		}
		return ""
	}
	type row struct{ what, got, exact, target, verdict string }
	rows := []row{
		{"ingest, steps/s (durable, as fast as acknowledged)", n("ingest.steps_per_s", 0), "—", "≥ 20,000", verdict("ingest.steps_per_s")},
		{"… CPU µs per step; the same messages through JetStream alone (no graph): steps/s, CPU µs per step", n("ingest.cpu_us_per_step", 0), pair("ingest.transport.steps_per_s", "ingest.transport.cpu_us_per_step", 0), "", ""},
		{"… the bulk phase alone: CPU µs per step, cores busy; steps a message; of the CPU, µs per step in the system; pages faulted in per step", pair("ingest.bulk_cpu_us_per_step", "ingest.bulk_cpu_cores", 2) + "; " + n("ingest.steps_per_message", 0) + "; " + n("ingest.bulk_system_cpu_us_per_step", 0) + "; " + n("ingest.bulk_faults_per_step", 2), "", "", ""},
		{fmt.Sprintf("step visible to the planner, p50 / p99 ms (at %s of the %s steps/s asked)", n("ingest.visibility_rate_steps_per_s", 0), n("ingest.visibility_asked_steps_per_s", 0)),
			pair("ingest.visibility_p50_ms", "ingest.visibility_p99_ms", 1), "—", "p99 ≤ 100", verdict("ingest.visibility_p99_ms")},
		{"… of which graph commit, p50 / p99 ms", pair("ingest.commit_visibility_p50_ms", "ingest.commit_visibility_p99_ms", 1), "—", "", ""},
		{"… the steps whose wait overlapped no mark phase of the collector nor the second after one, p50 / p99 ms; the share of steps that did; mark phases, s of marking",
			pair("ingest.visibility_clear_of_marking_p50_ms", "ingest.visibility_clear_of_marking_p99_ms", 1) + "; " + n("ingest.visibility_share_near_marking", 3) +
				"; " + n("ingest.visibility_mark_phases", 0) + ", " + n("ingest.visibility_marking_s", 2), "—", "", ""},
		{"… graph bytes written per step, bulk / paced phase (of which nodes, edges, episodes, stored steps)", written("ingest.bulk_") + " / " + written("ingest.paced_"), "—", "", ""},
		{"… steps of one episode a batch holds, bulk / paced phase (each batch writes an episode's records once); keys set per step, bulk / paced", pair("ingest.bulk_steps_per_episode_write", "ingest.paced_steps_per_episode_write", 1) + "; " + pair("ingest.bulk_written_keys_per_step", "ingest.paced_written_keys_per_step", 1), "—", "", ""},
		{"… graph writer, bulk / paced phase: busy; µs per step applying + encoding + in Badger's commit + publishing; steps per batch. A paced step's cost over a bulk step's (at the default paced rate, half the bulk rate, its writer has no time spare from 2)", writer("ingest.bulk_") + " / " + writer("ingest.paced_") + ". " + n("ingest.paced_writer_cost_ratio", 2), "—", "", ""},
		{"… the graph writer's time in the bulk / paced phase's execution trace (with --profile): on a CPU / waiting for one / blocked (Badger's commit and its syncs, locks, system calls)", sched("ingest.bulk_") + "; " + sched("ingest.paced_"), "—", "", ""},
		{"planner in-process, 1 hop, p50 / p95 / p99 µs", trio("planner.in_process.", "us"), trio("exact.planner.in_process.", "us"), "p99 ≤ 1,000", verdict("planner.in_process.p99_us")},
		{fmt.Sprintf("… 1 hop, 1 thread at 250 calls/s, while %s steps/s stream in (the mixed phase), p50 / p99 µs; the same graph with nothing ingested; its wait for the graph's read lock: p99, mean µs, the share of calls that waited 10 µs or more", n("ingest.mixed_steps_per_s", 0)),
			pair("planner.beside_ingest.p50_us", "planner.beside_ingest.p99_us", 0) + "; " + pair("planner.beside_ingest.idle_p50_us", "planner.beside_ingest.idle_p99_us", 0) + "; " +
				n("planner.beside_ingest.wait_p99_us", 0) + ", " + n("planner.beside_ingest.wait_mean_us", 1) + ", " + n("planner.beside_ingest.waited_share", 3), "—", "", ""},
		{"… of those calls' time, the share their OS thread waited on the kernel's run queue (for a vCPU another thread held), and its p99 µs a call; the same with nothing ingested",
			n("planner.beside_ingest.runqueue_wait_share", 3) + ", " + n("planner.beside_ingest.runqueue_wait_p99_us", 0) + "; " +
				n("planner.beside_ingest.idle_runqueue_wait_share", 3) + ", " + n("planner.beside_ingest.idle_runqueue_wait_p99_us", 0), "—", "", ""},
		{"planner in-process, 2 hops, budget 256, p50 / p95 / p99 µs", trio("planner.in_process.hops2.", "us"), trio("exact.planner.in_process.hops2.", "us"), "p99 ≤ 1,500", verdict("planner.in_process.hops2.p99_us")},
		{"… each query's faster call of two passes (the host's stalls mostly left out), p99 µs, 1 / 2 hops", pair("planner.in_process.best_of_2.p99_us", "planner.in_process.hops2.best_of_2.p99_us", 0), "—", "", ""},
		{"… calls a stall hit (3× and 1 ms over the same query's in the other pass), first / second pass, 1 hop; 2 hops (over 1% of the calls, the pass's p99 is theirs)",
			pair("planner.in_process.stalled_calls", "planner.in_process.second_pass.stalled_calls", 0) + "; " +
				pair("planner.in_process.hops2.stalled_calls", "planner.in_process.hops2.second_pass.stalled_calls", 0), "—", "", ""},
		{"… 1 hop, p99 µs of the queries admitting ≥ 1% / < 1% of events", pair("planner.in_process.broad.p99_us", "planner.in_process.selective.p99_us", 0), pair("exact.planner.in_process.broad.p99_us", "exact.planner.in_process.selective.p99_us", 0), "", ""},
		{fmt.Sprintf("… 1 hop, p50 / p99 µs of the queries whose exact 10th best hit scores ≥ %g / of the %s far ones, < %g (their filters leave nothing close)", FarScore, n("prefilter.far_queries", 0), FarScore),
			pair("planner.in_process.near.p50_us", "planner.in_process.near.p99_us", 0) + " / " + pair("planner.in_process.far.p50_us", "planner.in_process.far.p99_us", 0),
			pair("exact.planner.in_process.near.p50_us", "exact.planner.in_process.near.p99_us", 0) + " / " + pair("exact.planner.in_process.far.p50_us", "exact.planner.in_process.far.p99_us", 0), "", ""},
		{"planner in-process QPS, 1 hop, 1 / 2 threads", pair("planner.in_process.qps", "planner.in_process.threads2.qps", 0), pair("exact.planner.in_process.qps", "exact.planner.in_process.threads2.qps", 0), "", ""},
		{"planner in-process QPS, 2 hops, 1 / 2 threads", pair("planner.in_process.hops2.qps", "planner.in_process.hops2.threads2.qps", 0), pair("exact.planner.in_process.hops2.qps", "exact.planner.in_process.hops2.threads2.qps", 0), "", ""},
		{"planner p99 µs on 2 threads, 1 / 2 hops", pair("planner.in_process.threads2.p99_us", "planner.in_process.hops2.threads2.p99_us", 0), pair("exact.planner.in_process.threads2.p99_us", "exact.planner.in_process.hops2.threads2.p99_us", 0), "", ""},
		{"planner over NATS, 1 hop, p50 / p95 / p99 µs", trio("planner.nats.", "us"), "—", "≤ in-process + 500", verdict("planner.nats.overhead_p99_us")},
		{"planner over NATS, 2 hops, p50 / p95 / p99 µs", trio("planner.nats.hops2.", "us"), "—", "≤ in-process + 500", verdict("planner.nats.hops2.overhead_p99_us")},
		{"planner over NATS QPS, 1 hop, 1 / 2 threads", pair("planner.nats.qps", "planner.nats.threads2.qps", 0), "—", "", ""},
		{"planner over NATS QPS, 2 hops, 1 / 2 threads", pair("planner.nats.hops2.qps", "planner.nats.hops2.threads2.qps", 0), "—", "", ""},
		{"planner over NATS, JSON answers in s2 (Accept-Encoding: s2, decoded in the timing), 1 hop, p50 / p95 / p99 µs", trio("planner.nats_s2.", "us"), "—", "≤ in-process + 500", verdict("planner.nats_s2.overhead_p99_us")},
		{"planner over NATS, JSON answers in s2, 2 hops, p50 / p95 / p99 µs", trio("planner.nats_s2.hops2.", "us"), "—", "≤ in-process + 500", verdict("planner.nats_s2.hops2.overhead_p99_us")},
		{"… JSON answers in s2: QPS, 1 hop, 1 / 2 threads; bytes a reply, 1 / 2 hops (the share compressed); NATS request/reply alone with replies of that size, 1 hop, p50 / p99 µs",
			pair("planner.nats_s2.qps", "planner.nats_s2.threads2.qps", 0) + "; " + n("planner.nats_s2.reply_bytes_mean", 0) + " (" + n("planner.nats_s2.coded_share", 2) + ") / " +
				n("planner.nats_s2.hops2.reply_bytes_mean", 0) + " (" + n("planner.nats_s2.hops2.coded_share", 2) + "); " + pair("planner.nats_s2.floor.p50_us", "planner.nats_s2.floor.p99_us", 0), "—", "", ""},
		{"planner over NATS, msgpack requests and answers, 1 hop, p50 / p95 / p99 µs", trio("planner.nats_msgpack.", "us"), "—", "≤ in-process + 500", verdict("planner.nats_msgpack.overhead_p99_us")},
		{"planner over NATS, msgpack requests and answers, 2 hops, p50 / p95 / p99 µs", trio("planner.nats_msgpack.hops2.", "us"), "—", "≤ in-process + 500", verdict("planner.nats_msgpack.hops2.overhead_p99_us")},
		{"planner over NATS QPS, msgpack answers, 1 / 2 hops, 1 thread", pair("planner.nats_msgpack.qps", "planner.nats_msgpack.hops2.qps", 0), "—", "", ""},
		{"… NATS request/reply alone, replies of the msgpack answers' size, 1 hop, p50 / p95 / p99 µs", trio("planner.nats_msgpack.floor.", "us"), "—", "", ""},
		{"… of which the daemon encoding a msgpack answer + handing the reply to NATS, 1 / 2 hops, mean µs", n("planner.nats_msgpack.daemon_encode_mean_us", 0) + " + " + n("planner.nats_msgpack.daemon_reply_mean_us", 0) + " / " +
			n("planner.nats_msgpack.hops2.daemon_encode_mean_us", 0) + " + " + n("planner.nats_msgpack.hops2.daemon_reply_mean_us", 0), "—", "", ""},
		{"… the same, replies of the JSON answers' size", trio("planner.nats.floor.", "us"), "—", "", ""},
		{"… per call, msgpack answers, 1 hop, p50 / p99 µs: the daemon's planner; the rest (the request's decoding, the answer's encoding, NATS, wake-ups)",
			pair("planner.nats_msgpack.daemon_planner_p50_us", "planner.nats_msgpack.daemon_planner_p99_us", 0) + "; " +
				pair("planner.nats_msgpack.outside_planner_p50_us", "planner.nats_msgpack.outside_planner_p99_us", 0), "—", "", ""},
	}
	for _, st := range []struct{ name, label string }{{"prefilter", "prefilter"}, {"expand", "expansion"}, {"rerank", "re-rank"}, {"stitch", "stitch"}} {
		for _, hops := range []string{"", "hops2."} {
			p := "planner.in_process." + hops + "stage." + st.name
			e := "exact." + p
			h := map[string]string{"": "1 hop", "hops2.": "2 hops"}[hops]
			rows = append(rows, row{fmt.Sprintf("stage %s, %s, p50 / p99 µs", st.label, h), pair(p+"_p50_us", p+"_p99_us", 0), pair(e+"_p50_us", e+"_p99_us", 0), "", ""})
		}
	}
	rows = append(rows,
		// (The 2-hop calls' prefilter is the same search.)
		row{"prefilter's index search, 1 hop: lists scanned p50 / p99; items scored p50 / p99",
			pair("planner.in_process.prefilter.lists_p50", "planner.in_process.prefilter.lists_p99", 0) + "; " +
				pair("planner.in_process.prefilter.scored_p50", "planner.in_process.prefilter.scored_p99", 0), "", "", ""},
		row{"… the index's inverted lists: how many; entries a list, mean / as an item sees them (Σ len² / Σ len) / the longest",
			n("index.lists", 0) + "; " + n("index.list_len_mean", 0) + " / " + n("index.list_len_seen", 0) + " / " + n("index.list_len_max", 0), "", "", ""},
		row{"… the same-agent queries, 1 hop: lists scanned / items scored (mean), against all queries",
			pair("planner.in_process.prefilter.same_agent.lists_mean", "planner.in_process.prefilter.same_agent.scored_mean", 0) + " against " +
				pair("planner.in_process.prefilter.lists_mean", "planner.in_process.prefilter.scored_mean", 0), "", "", ""},
		row{"answer size, 1 / 2 hops: nodes + edges (mean)", n("planner.in_process.answer.nodes_mean", 0) + "+" + n("planner.in_process.answer.edges_mean", 0) + " / " +
			n("planner.in_process.hops2.answer.nodes_mean", 0) + "+" + n("planner.in_process.hops2.answer.edges_mean", 0), "", "", ""},
		row{"prefilter recall@10: mean / 5th percentile", pair("prefilter.recall_at_10", "prefilter.recall_at_10_p5", 3), "1 / 1", "≥ 0.95", verdict("prefilter.recall_at_10")},
		row{fmt.Sprintf("prefilter recall@10, the %s queries admitting < 1%%", n("prefilter.selective_queries", 0)), n("prefilter.recall_at_10_selective", 3), "1", "≥ 0.95", ""},
		row{fmt.Sprintf("prefilter recall@10, the %s same-agent queries", n("prefilter.same_agent_queries", 0)), n("prefilter.recall_at_10_same_agent", 3), "1", "≥ 0.95", ""},
		row{fmt.Sprintf("prefilter recall@10, the %s far queries (exact 10th best < %g)", n("prefilter.far_queries", 0), FarScore), n("prefilter.recall_at_10_far", 3), "1", "", ""},
		row{"… the exact top-10 hits the prefilter missed, all / of them nodes", n("prefilter.missed_at_10", 0) + " / " + n("prefilter.missed_nodes_at_10", 0), "0", "", ""},
		row{"index search alone (the prefilter's call), p50 / p99 µs", pair("prefilter.search_p50_us", "prefilter.search_p99_us", 0), pair("exact.search_filter_last_p50_us", "exact.search_filter_last_p99_us", 0) + " (filter-last)", "", ""},
		row{"unfiltered brute-force scan of every vector, p50 / p99 µs", "", pair("exact.search_unfiltered_p50_us", "exact.search_unfiltered_p99_us", 0), "", ""},
		row{"exact search agrees with the generated ground truth (top 10)", n("truth.agreement_at_10", 3), "", "", ""},
		row{"reopen until the first answer, s (Start alone)", n("reopen_s", 2) + " (" + n("reopen.start_s", 2) + ")", "—", "≤ 5 at 1M edges", verdict("reopen_s")},
		row{"… restarted in a process of its own (`ctxgraph serve`), until its first answer over NATS, s (serving); its RSS then",
			n("reopen.process_s", 2) + " (" + n("reopen.process_serving_s", 2) + "); " + mb(f, "reopen.process_rss_bytes"), "—", "≤ 5 at 1M edges", verdict("reopen.process_s")},
		row{"… prefilter recall@10 after it (the index read from its snapshot, its splits read from theirs after the start): all / admitting < 1% / same-agent",
			n("reopen.recall_at_10", 3) + " / " + n("reopen.recall_at_10_selective", 3) + " / " + n("reopen.recall_at_10_same_agent", 3), "", "≥ 0.95", ""},
		row{"… planner in-process after it, 1 hop, 1 thread, p50 / p99 µs; each query's faster of two passes, p99 µs",
			pair("reopen.planner.in_process.p50_us", "reopen.planner.in_process.p99_us", 0) + "; " + n("reopen.planner.in_process.best_of_2.p99_us", 0), "", "p99 ≤ 1,000", ""},
		row{"… the start, s: the heap readied for the load; Badger's open, the id sequence's read, the view's load; beside them the vector and keyword indexes read; then the vector index made ready; beside it the adjacency; serving",
			startPhases("reopen.start."), "—", "", ""},
		row{"… the restarted process's start, s: the same phases", startPhases("reopen.process.start."), "—", "", ""},
		row{"… the vector index's splits ready (same-agent and narrow windowed searches served by them) after the start, s; read from their snapshot (else filled from the index)",
			n("reopen.splits_ready_s", 2) + "; " + yesNo(f, "reopen.splits_from_snapshot"), "—", "", ""},
		row{"heap after the load / after the reopen: live, of which holding pointers (what every collection scans); objects, millions; a full collection, s",
			heap("gc.") + " / " + heap("reopen.gc."), "—", "", ""},
		row{"RSS after reopen, the index's splits ready, bytes per edge (total MB)", n("rss_bytes_per_edge", 0) + " (" + mb(f, "rss_bytes") + ")", "—", "", ""},
		row{"disk, bytes per edge: all / graph (total MB; of it the vector index's snapshots, MB)", pair("disk_bytes_per_edge", "disk.graph_bytes_per_edge", 0) + " (" + mb(f, "disk_bytes") + "; " + mb(f, "disk.vector_snapshots_bytes") + ")", "—", "", ""},
		row{"graph: nodes / edges / vectors", n("graph.nodes", 0) + " / " + n("graph.edges", 0) + " / " + n("graph.vectors", 0), "", "", ""},
		row{"machine: work handed to an idle vCPU waits, p50 / p99 µs; a load missing the caches, ns; a 384-d dot product, ns; a fresh 4 KiB page faulted in, µs",
			n("machine.wake_p50_us", 0) + " / " + n("machine.wake_p99_us", 0) + "; " + n("machine.mem_latency_ns", 0) + "; " + n("machine.dot384_ns", 1) + "; " + n("machine.page_fault_us", 1), "", "", ""},
		row{"the host's steal, % of the vCPUs' time: ingest; planner in-process 1 / 2 hops; over NATS, msgpack answers, 1 / 2 hops",
			percent(f, "ingest.host_steal_share") + "; " + percent(f, "planner.in_process.host_steal_share") + " / " + percent(f, "planner.in_process.hops2.host_steal_share") +
				"; " + percent(f, "planner.nats_msgpack.host_steal_share") + " / " + percent(f, "planner.nats_msgpack.hops2.host_steal_share"), "", "", ""},
	)
	fmt.Fprintf(w, "| %s (%s index) | ctxgraph | exact baseline | target | |\n|---|---|---|---|---|\n", rep.Preset, rep.Index)
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.what, r.got, r.exact, r.target, r.verdict)
	}
}

func presetOf(figure string) string {
	for _, t := range targets {
		if t.figure == figure {
			return t.preset
		}
	}
	return ""
}

func missBy(t Target) string {
	if math.IsNaN(t.Got) {
		return "not measured"
	}
	if t.Op == "<=" {
		return fmt.Sprintf("%s over (%.2f×)", trim(t.Got-t.Want), t.Got/t.Want)
	}
	return fmt.Sprintf("%s short (%.2f× the target)", trim(t.Want-t.Got), t.Got/t.Want)
}

func trim(x float64) string {
	if math.Abs(x) < 10 {
		return fmt.Sprintf("%.3g", x)
	}
	return commas(x, 0)
}

// num formats figure k, or "—" when the run did not measure it.
func num(f figures, k string, prec int) string {
	v, ok := f[k]
	if !ok || math.IsNaN(v) {
		return "—"
	}
	return commas(v, prec)
}

// percent is the share f[k] as a percentage, one decimal.
func percent(f figures, k string) string {
	v, ok := f[k]
	if !ok || math.IsNaN(v) {
		return "—"
	}
	return commas(100*v, 1)
}

// yesNo is a flag figure (1 or 0) as yes or no.
func yesNo(f figures, k string) string {
	switch v, ok := f[k]; {
	case !ok:
		return "—"
	case v != 0:
		return "yes"
	}
	return "no"
}

// millions is f[k] in millions, two decimals.
func millions(f figures, k string) string {
	v, ok := f[k]
	if !ok {
		return "—"
	}
	return commas(v/1e6, 2)
}

func mb(f figures, k string) string {
	v, ok := f[k]
	if !ok {
		return "—"
	}
	return commas(v/1e6, 0) + " MB"
}

// commas formats x with prec decimals and thousands separators.
func commas(x float64, prec int) string {
	s := fmt.Sprintf("%.*f", prec, x)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// indexKind names an index's implementation ("flat", "hnsw").
func indexKind(x wave.Index) string {
	t := reflect.TypeOf(x)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return strings.ToLower(t.Name())
}

// firstAnswer waits until the daemon answers a planner request.
func (r *runner) firstAnswer(ctx context.Context) error {
	req := r.qs[0].Request
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := r.d.Planner().Plan(ctx, &req)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no planner answer a minute after reopening: %w", err)
		}
		time.Sleep(time.Millisecond)
		req = r.qs[0].Request
	}
	resp, err := http.Get("http://" + r.d.HTTPAddr() + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reopened daemon answers but /readyz says %s", resp.Status)
	}
	return nil
}
