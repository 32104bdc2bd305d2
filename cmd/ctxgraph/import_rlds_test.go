package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
)

// These tests run `ctxgraph import rlds` (the CLI's own run function)
// against a running daemon, and check what the daemon stored against
// the dataset files read independently with the rlds reader, plus the
// constants rlds/dataset_test.go pins (obtained with a separate Python
// reader).

const samplesDir = "../../../shared/rlds-samples"

func sample(rel string) string { return filepath.Join(samplesDir, filepath.FromSlash(rel)) }

const (
	bridgeShard = "bridge_dataset-train.tfrecord-00000-of-00001"
	bridgeDir   = "bridge_dataset/1.0.0"
)

// recordOffsets are the byte offsets of the records of a TFRecord file,
// as the rlds reader frames them.
func recordOffsets(t testing.TB, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rlds.NewTFRecordReader(f, path)
	var out []int64
	for {
		if _, err := r.Next(); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Offset())
	}
}

func testDaemon(t testing.TB, mutate ...func(*daemon.Config)) *daemon.Daemon {
	t.Helper()
	cfg := daemon.DefaultConfig()
	cfg.Data = t.TempDir()
	cfg.NATS.Addr = "127.0.0.1:0"
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Ingest.Backoff = 20 * time.Millisecond
	for _, m := range mutate {
		m(&cfg)
	}
	d, err := daemon.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	return d
}

// importRLDSInto runs import rlds against d, waiting for the daemon,
// and returns its stderr.
func importRLDSInto(t *testing.T, d *daemon.Daemon, args ...string) (string, error) {
	t.Helper()
	_, errOut, err := runCLI(t, append([]string{"import", "rlds", "--nats", d.NATSURL(), "--wait", "60s", "--quiet"}, args...)...)
	return errOut, err
}

func mustImport(t *testing.T, d *daemon.Daemon, args ...string) string {
	t.Helper()
	out, err := importRLDSInto(t, d, args...)
	if err != nil {
		t.Fatalf("import rlds %v: %v\n%s", args, err, out)
	}
	return out
}

// readDataset reads a dataset with the rlds reader: the independent side.
func readDataset(t testing.TB, o rlds.DatasetOptions) []*rlds.Episode {
	t.Helper()
	ds, err := rlds.OpenDatasetOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	var eps []*rlds.Episode
	if err := ds.Episodes(context.Background(), func(e *rlds.Episode) error { eps = append(eps, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return eps
}

// storedSteps reads an episode's steps back from the daemon's store.
func storedSteps(t testing.TB, s *particle.Store, id string) []*rlds.Step {
	t.Helper()
	var out []*rlds.Step
	err := s.Steps(particle.DefaultNamespace, id, func(idx int, raw []byte) error {
		st, err := rlds.DecodeStep(raw)
		if err != nil {
			return fmt.Errorf("step %d: %w", idx, err)
		}
		if st.Index != idx || idx != len(out) {
			return fmt.Errorf("step key %d holds index %d after %d steps", idx, st.Index, len(out))
		}
		out = append(out, st)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// canon is v as JSON with object keys sorted, whatever Go type held it.
func canon(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

func sig(t rlds.Tensor) string { return fmt.Sprintf("%s%v", t.DType, t.Shape) }

// checkStored compares everything the daemon stored of eps with eps:
// the episode record, every step, every feature's dtype, shape and
// values, and every image's bytes (through its blob).
func checkStored(t *testing.T, s *particle.Store, eps []*rlds.Episode) {
	t.Helper()
	for _, want := range eps {
		ep, err := s.Episode(particle.DefaultNamespace, want.ID)
		if err != nil {
			t.Fatalf("episode %s (record %d): %v", want.ID, want.Source.Record, err)
		}
		if ep.Agent != want.Agent || ep.Steps != len(want.Steps) || !ep.Ended || ep.LanguageInstruction != want.LanguageInstruction || ep.Location != want.Location {
			t.Errorf("episode %s: agent %q steps %d ended %v instruction %q location %q; want %q %d true %q %q",
				want.ID, ep.Agent, ep.Steps, ep.Ended, ep.LanguageInstruction, ep.Location, want.Agent, len(want.Steps), want.LanguageInstruction, want.Location)
		}
		if got, exp := canon(t, ep.Metadata["source"]), canon(t, want.Source); got != exp {
			t.Errorf("episode %s: source %s, want %s", want.ID, got, exp)
		}
		for k, v := range want.Metadata {
			if got, exp := canon(t, ep.Metadata[k]), canon(t, v); got != exp {
				t.Errorf("episode %s: metadata %s = %s, want %s", want.ID, k, got, exp)
			}
		}
		steps := storedSteps(t, s, want.ID)
		if len(steps) != len(want.Steps) {
			t.Fatalf("episode %s: %d steps stored, want %d", want.ID, len(steps), len(want.Steps))
		}
		for i, got := range steps {
			w := want.Steps[i]
			if got.IsFirst != w.IsFirst || got.IsLast != w.IsLast || got.IsTerminal != w.IsTerminal || got.Reward != w.Reward || got.Discount != w.Discount {
				t.Errorf("episode %s step %d: flags/reward differ: %+v", want.ID, i, got)
			}
			li := w.LanguageInstruction
			if li == "" {
				li = want.LanguageInstruction
			}
			if got.LanguageInstruction != li {
				t.Errorf("episode %s step %d: instruction %q, want %q", want.ID, i, got.LanguageInstruction, li)
			}
			if canon(t, got.Metadata) != canon(t, w.Metadata) {
				t.Errorf("episode %s step %d: metadata differs", want.ID, i)
			}
			for _, g := range []struct {
				name      string
				got, want rlds.Features
			}{{"observation", got.Observation, w.Observation}, {"action", got.Action, w.Action}} {
				if len(g.got) != len(g.want) {
					t.Errorf("episode %s step %d: %d %s features, want %d", want.ID, i, len(g.got), g.name, len(g.want))
				}
				for k, wt := range g.want {
					checkTensor(t, s, fmt.Sprintf("episode %s step %d %s", want.ID, i, rlds.FeatureName(g.name, k)), g.got[k], wt)
				}
			}
		}
	}
}

func checkTensor(t *testing.T, s *particle.Store, what string, got, want rlds.Tensor) {
	t.Helper()
	if sig(got) != sig(want) || got.Encoding != want.Encoding {
		t.Errorf("%s: %s %q, want %s %q", what, sig(got), got.Encoding, sig(want), want.Encoding)
		return
	}
	if len(got.Data) != len(want.Data) || !slices.Equal(got.Text, want.Text) {
		t.Errorf("%s: %d values %q, want %d %q", what, len(got.Data), got.Text, len(want.Data), want.Text)
		return
	}
	for j := range want.Data {
		if math.Float64bits(got.Data[j]) != math.Float64bits(want.Data[j]) {
			t.Errorf("%s: value %d is %v, want %v", what, j, got.Data[j], want.Data[j])
			return
		}
	}
	if len(want.Bytes) == 0 {
		if got.Ref != "" || len(got.Bytes) != 0 {
			t.Errorf("%s: empty bytes stored as %q", what, got.Ref)
		}
		return
	}
	// Binary tensors are moved to content-addressed blobs: the stored
	// step holds a reference, the blob the original bytes.
	if len(got.Bytes) != 0 || !strings.HasPrefix(got.Ref, "blob:") {
		t.Errorf("%s: stored inline (%d bytes) or without a blob ref (%q)", what, len(got.Bytes), got.Ref)
		return
	}
	b, err := s.Blob(got.Ref)
	if err != nil {
		t.Errorf("%s: blob: %v", what, err)
		return
	}
	if !bytes.Equal(b, want.Bytes) {
		t.Errorf("%s: blob holds %d bytes, not the %d of the record", what, len(b), len(want.Bytes))
	}
	if want.DType == rlds.Image && rlds.ImageEncoding(b) != want.Encoding {
		t.Errorf("%s: blob magic says %q, want %q", what, rlds.ImageEncoding(b), want.Encoding)
	}
}

// node finds a node by type and name in the default namespace.
func node(s *particle.Store, t particle.NodeType, name string) *particle.Node {
	var n *particle.Node
	s.Read(func(r particle.Reader) { n = r.Lookup(particle.DefaultNamespace, t, name) })
	return n
}

// hasEdge reports whether an edge src -pred-> dst exists.
func hasEdge(s *particle.Store, src, pred, dst string) bool {
	found := false
	s.Read(func(r particle.Reader) {
		r.Out(src, func(e *particle.Edge) bool {
			if e.Predicate() == pred && e.Target == dst {
				found = true
			}
			return !found
		})
	})
	return found
}

// graphState is the stored graph with names for ids: every node, and
// every edge with its evidence (a duplicate application would raise it).
// Two daemons that applied the same messages, in any order, agree on it.
// With exact it adds what a repeated import must leave exactly as it
// was: ids, belief, salience, confidence, provenance.
func graphState(s *particle.Store, exact bool) string {
	var lines []string
	s.Read(func(r particle.Reader) {
		name := func(id string) string {
			if n := r.Node(id); n != nil {
				return string(n.Type) + ":" + n.Name
			}
			return id
		}
		r.Nodes(func(n *particle.Node) bool {
			l := fmt.Sprintf("N %s %d", name(n.ID), len(n.Attributes.RLDSEpisodeIDs))
			if exact {
				l += fmt.Sprintf(" %s %.9f", n.ID, n.Belief.Score)
			}
			lines = append(lines, l)
			return true
		})
		r.Edges(func(e *particle.Edge) bool {
			l := fmt.Sprintf("E %s -%s-> %s x%d", name(e.Source), e.Predicate(), name(e.Target), e.Evidence)
			if exact {
				l += fmt.Sprintf(" %s %.9f %.9f %d", e.ID, e.Salience.Score, e.Confidence, len(e.Provenance))
			}
			lines = append(lines, l)
			return true
		})
	})
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func deadLetters(t testing.TB, d *daemon.Daemon) uint64 {
	t.Helper()
	return streamMessages(t, d, daemon.StreamDLQ)
}

func TestImportRLDSBridgeDataset(t *testing.T) {
	d := testDaemon(t)
	out := mustImport(t, d, "--split", "train", sample(bridgeDir))
	if !strings.Contains(out, "published 25 episodes (250 steps") || !strings.Contains(out, "holds all 25 published episodes in full") {
		t.Errorf("summary: %s", out)
	}
	eps := readDataset(t, rlds.DatasetOptions{Dir: sample(bridgeDir), Splits: []string{"train"}})
	if len(eps) != 25 {
		t.Fatalf("reader: %d episodes", len(eps))
	}
	s := d.Store()
	c := s.Counts()
	if c.Episodes != 25 || c.Steps != 250 {
		t.Fatalf("stored %d episodes, %d steps; want 25, 250", c.Episodes, c.Steps)
	}
	checkStored(t, s, eps)

	// Constants read from the file by the independent Python reader.
	const ep0 = "bcabd5cf-c066-5d0b-895d-67dc8dd9f680"
	steps := storedSteps(t, s, ep0)
	wantObs := map[string]string{"image_0": "image[64 64 3]", "image_1": "image[64 64 3]", "image_2": "image[64 64 3]",
		"image_3": "image[64 64 3]", "state": "float32[7]"}
	for i, st := range steps {
		for k, w := range wantObs {
			if got := sig(st.Observation[k]); got != w {
				t.Errorf("step %d: %s is %s, want %s", i, k, got, w)
			}
		}
		if got := sig(st.Action[""]); got != "float32[7]" {
			t.Errorf("step %d: action is %s", i, got)
		}
		if emb := canon(t, st.Metadata["language_embedding"]); !strings.Contains(emb, `"dtype":"float32","shape":[512]`) {
			t.Errorf("step %d: language_embedding %.80s", i, emb)
		}
	}
	var bits []uint32
	for _, v := range steps[0].Action[""].Data {
		bits = append(bits, math.Float32bits(float32(v)))
	}
	if want := []uint32{0x2fc88e20, 0x2e121990, 0x2f588200, 0xb4481bdf, 0xb507279a, 0x33a11f09, 0x3f800000}; !slices.Equal(bits, want) {
		t.Errorf("episode 0 step 0 action bits %x, want %x", bits, want)
	}
	if got, want := steps[3].Action[""].Data, []float64{-0.004771918524056673, 0.0022340540308505297, -0.004606693517416716,
		-0.00252490839920938, 0.05806305631995201, -0.15041977167129517, 1}; !slices.Equal(got, want) {
		t.Errorf("episode 0 step 3 action %v, want %v", got, want)
	}
	img, err := s.Blob(steps[0].Observation["image_0"].Ref)
	if err != nil || len(img) != 3807 || !bytes.HasPrefix(img, []byte{0xff, 0xd8, 0xff}) {
		t.Errorf("episode 0 step 0 image_0: %d bytes, %v", len(img), err)
	}
	ep, err := s.Episode(particle.DefaultNamespace, ep0)
	if err != nil {
		t.Fatal(err)
	}
	const instr = "put cup from counter or drying rack into sink"
	if ep.LanguageInstruction != instr || steps[9].LanguageInstruction != instr || ep.Metadata["episode_metadata/episode_id"] != float64(5) {
		t.Errorf("episode 0: instruction %q / %q, episode_id %v", ep.LanguageInstruction, steps[9].LanguageInstruction, ep.Metadata["episode_metadata/episode_id"])
	}
	last, err := s.Episode(particle.DefaultNamespace, "37e20d3a-ddbd-5469-9de7-d2367e7a6d33")
	if err != nil || last.LanguageInstruction != "put carrot on plate" {
		t.Errorf("episode 24: %v %v", last, err)
	}

	// The instruction and metadata feed the symbolic layer: the agent the
	// dataset names, the goal, its intent and the objects it involves.
	agent := node(s, particle.NodeAgent, "bridge_dataset")
	goal := node(s, particle.NodeGoal, instr)
	intent := node(s, particle.NodeIntent, "put")
	if agent == nil || goal == nil || intent == nil {
		t.Fatalf("agent %v goal %v intent %v", agent, goal, intent)
	}
	if !hasEdge(s, ep.NodeID, "run_by", agent.ID) || !hasEdge(s, ep.NodeID, "pursues", goal.ID) || !hasEdge(s, goal.ID, "intent", intent.ID) {
		t.Errorf("episode 0: run_by/pursues/intent edges missing")
	}
	// What the instruction parser makes of it (the applier's contract),
	// and what any parse must find.
	objs := rlds.ParseInstruction(instr).Objects
	if !slices.Contains(objs, "cup") || !slices.Contains(objs, "sink") {
		t.Errorf("parsed objects %q", objs)
	}
	for _, obj := range objs {
		o := node(s, particle.NodeEntity, obj)
		if o == nil || !hasEdge(s, goal.ID, "involves", o.ID) {
			t.Errorf("goal does not involve entity %q", obj)
		}
	}
	carrot := node(s, particle.NodeEntity, "carrot")
	if carrot == nil || !slices.Contains(carrot.Attributes.RLDSEpisodeIDs, last.ID) {
		t.Errorf("entity carrot: %+v", carrot)
	}
	if n := deadLetters(t, d); n != 0 {
		t.Errorf("%d dead letters", n)
	}
}

func TestImportRLDSBridgeOXEFixture(t *testing.T) {
	d := testDaemon(t)
	// The folder's parent: the reader picks the version folder.
	out := mustImport(t, d, sample("bridge"))
	if !strings.Contains(out, "bridge 1.0.0 (train): published 1 episodes (3 steps") {
		t.Errorf("summary: %s", out)
	}
	eps := readDataset(t, rlds.DatasetOptions{Dir: sample("bridge/1.0.0")})
	s := d.Store()
	if c := s.Counts(); len(eps) != 1 || c.Episodes != 1 || c.Steps != 3 {
		t.Fatalf("reader %d episodes; stored %d episodes, %d steps; want 1, 3", len(eps), c.Episodes, c.Steps)
	}
	checkStored(t, s, eps)
	const id = "0a8c5f69-7aad-511a-bced-e0bf510271c6"
	steps := storedSteps(t, s, id)
	wantAct := map[string]string{"world_vector": "float32[3]", "rotation_delta": "float32[3]", "open_gripper": "bool[]", "terminate_episode": "float32[]"}
	wantObs := map[string]string{"image": "image[480 640 3]", "natural_language_embedding": "float32[512]", "state": "float32[7]", "natural_language_instruction": "string[]"}
	for i, st := range steps {
		for _, g := range []struct {
			want map[string]string
			got  rlds.Features
		}{{wantAct, st.Action}, {wantObs, st.Observation}} {
			for k, w := range g.want {
				if got := sig(g.got[k]); got != w {
					t.Errorf("step %d: %s is %s, want %s", i, k, got, w)
				}
			}
		}
		if wv := st.Action["world_vector"].Data; !slices.Equal(wv, []float64{0, 0, 0}) {
			t.Errorf("step %d: world_vector %v", i, wv)
		}
		if nli := st.Observation["natural_language_instruction"].Text; !slices.Equal(nli, []string{""}) || st.LanguageInstruction != "" {
			t.Errorf("step %d: instruction %q / %q", i, nli, st.LanguageInstruction)
		}
		if st.IsTerminal != (i == 2) || st.IsLast != (i == 2) {
			t.Errorf("step %d: terminal %v last %v", i, st.IsTerminal, st.IsLast)
		}
		png, err := s.Blob(st.Observation["image"].Ref)
		if err != nil || len(png) != 972 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("step %d: image %d bytes, %v", i, len(png), err)
		}
	}
	if n := node(s, particle.NodeAgent, "bridge"); n == nil {
		t.Error("no agent node bridge")
	}
	// No instruction: no goal.
	s.Read(func(r particle.Reader) {
		r.Nodes(func(n *particle.Node) bool {
			if n.Type == particle.NodeGoal {
				t.Errorf("goal %q from an empty instruction", n.Name)
			}
			return true
		})
	})
}

func TestImportRLDSTwiceChangesNothing(t *testing.T) {
	d := testDaemon(t)
	// Both splits: val holds the same records as train under other IDs.
	mustImport(t, d, sample("bridge_dataset"))
	s := d.Store()
	want, wantCounts := graphState(s, true), s.Counts()
	if wantCounts.Episodes != 50 || wantCounts.Steps != 500 {
		t.Fatalf("first import: %+v", wantCounts)
	}
	// Asked first, the daemon says it holds every episode: nothing is sent.
	out := mustImport(t, d, sample("bridge_dataset"))
	if !strings.Contains(out, "published 0 episodes (0 steps") || !strings.Contains(out, "50 already stored") {
		t.Errorf("second import: %s", out)
	}
	// Sent anyway, JetStream drops every message as a duplicate.
	out = mustImport(t, d, "--skip-stored=false", sample("bridge_dataset"))
	if !strings.Contains(out, "published 50 episodes (500 steps") || !strings.Contains(out, "600 duplicates dropped by JetStream") {
		t.Errorf("third import: %s", out)
	}
	if got := graphState(s, true); got != want {
		t.Error("the graph changed after importing the same dataset again")
	}
	if got := s.Counts(); fmt.Sprint(got) != fmt.Sprint(wantCounts) {
		t.Errorf("counts %+v, want %+v", got, wantCounts)
	}
}

// TestImportRLDSIntoNamespaces imports one dataset into the default
// namespace and then into another: the second import is not taken for
// the first (neither by the status check, nor by JetStream's dedupe, nor
// by the daemon's record of applied messages), both namespaces hold
// every episode in full, and importing again into the second stores
// nothing more.
func TestImportRLDSIntoNamespaces(t *testing.T) {
	d := testDaemon(t)
	s := d.Store()
	mustImport(t, d, "--split", "train", sample("bridge_dataset"))
	first := s.Counts()
	out := mustImport(t, d, "--tenant", "lab-b", "--project", "arm", "--split", "train", sample("bridge_dataset"))
	if !strings.Contains(out, "published 25 episodes (250 steps") || !strings.Contains(out, "0 duplicates dropped") ||
		!strings.Contains(out, "holds all 25 published episodes in full") {
		t.Fatalf("import into lab-b/arm: %s", out)
	}
	second := s.Counts()
	if second.Episodes != 2*first.Episodes || second.Steps != 2*first.Steps || first.Episodes != 25 {
		t.Fatalf("episodes %d → %d, steps %d → %d: want the second namespace to hold as many again", first.Episodes, second.Episodes, first.Steps, second.Steps)
	}
	var inDefault, inArm int
	s.Read(func(r particle.Reader) {
		r.Episodes(func(ep *particle.Episode) bool {
			switch ep.Namespace {
			case particle.DefaultNamespace:
				inDefault++
			case "lab-b/arm":
				inArm++
				if other := r.Episode(particle.DefaultNamespace, ep.ID); other == nil {
					t.Errorf("episode %s of lab-b/arm has no twin in the default namespace", ep.ID)
				}
			}
			return true
		})
	})
	if inDefault != 25 || inArm != 25 {
		t.Fatalf("episodes: %d in the default namespace, %d in lab-b/arm; want 25 and 25", inDefault, inArm)
	}
	out = mustImport(t, d, "--tenant", "lab-b", "--project", "arm", "--split", "train", sample("bridge_dataset"))
	if !strings.Contains(out, "published 0 episodes (0 steps") || !strings.Contains(out, "25 already stored") {
		t.Errorf("second import into lab-b/arm: %s", out)
	}
	if got := s.Counts(); got.Episodes != second.Episodes || got.Steps != second.Steps {
		t.Errorf("counts %+v after importing again, want %+v", got, second)
	}
}

// TestImportRLDSRefusesBadNamespaces: a tenant or project the daemon
// would refuse (particle.CheckScope: a '/', ambiguous with the
// namespace's own separator, white space, a control character) is
// refused with an error naming it, before anything is sent.
func TestImportRLDSRefusesBadNamespaces(t *testing.T) {
	d := testDaemon(t)
	for _, args := range [][]string{{"--tenant", "lab/b"}, {"--project", "arm one"}, {"--tenant", "lab\x00"}, {"--project", "a\nb"}} {
		out, err := importRLDSInto(t, d, append(args, "--split", "train", sample("bridge_dataset"))...)
		if err == nil || !strings.Contains(err.Error()+out, "only letters, digits") || !strings.Contains(err.Error()+out, args[0][2:]) {
			t.Errorf("import with %s %q: err %v\n%s", args[0], args[1], err, out)
		}
	}
	if c := d.Store().Counts(); c.Episodes != 0 || c.Steps != 0 {
		t.Errorf("refused imports stored %d episodes and %d steps", c.Episodes, c.Steps)
	}
}

func TestImportRLDSInterruptedFinishesTheRest(t *testing.T) {
	// The reference: one uninterrupted import.
	ref := testDaemon(t)
	mustImport(t, ref, "--split", "train", sample(bridgeDir))
	wantGraph, wantCounts := graphState(ref.Store(), false), ref.Store().Counts()

	d := testDaemon(t)
	out := mustImport(t, d, "--limit", "10", "--split", "train", sample(bridgeDir))
	if c := d.Store().Counts(); c.Episodes != 10 || c.Steps != 100 || !strings.Contains(out, "published 10 episodes") {
		t.Fatalf("--limit 10: %d episodes, %d steps\n%s", c.Episodes, c.Steps, out)
	}
	// A second importer dies in the middle of episode 10: its start and
	// five steps reached the daemon, the rest did not.
	eps := readDataset(t, rlds.DatasetOptions{Dir: sample(bridgeDir), Splits: []string{"train"}})
	nc, js, err := client.Connect(d.NATSURL(), "crashing-importer")
	if err != nil {
		t.Fatal(err)
	}
	pub := client.NewPublisher(js, "ctxgraph", 0)
	for _, m := range eps[10].Messages()[:6] {
		if err := pub.Publish(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	nc.Close()

	// A third is interrupted (Ctrl-C) after publishing three episodes:
	// the half one, and two more.
	ds, err := client.OpenRLDS([]string{sample(bridgeDir)}, client.ImportOptions{Splits: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	nc, js, err = client.Connect(d.NATSURL(), "interrupted-importer")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := client.ImportRLDS(ctx, nc, js, ds, client.ImportOptions{SkipStored: true, OnProgress: func(st client.ImportStats) {
		if st.Episodes == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || st.Episodes != 3 || st.Stored != 10 || st.Published[0].ID != eps[10].ID {
		t.Fatalf("interrupted import: %v, %+v", err, st)
	}
	if err := client.WaitApplied(context.Background(), js, time.Minute, map[string]string{daemon.StreamRLDS: daemon.DurableRLDS}); err != nil {
		t.Fatal(err)
	}

	out = mustImport(t, d, "--split", "train", sample(bridgeDir))
	if !strings.Contains(out, "published 12 episodes (120 steps") || !strings.Contains(out, "13 already stored") {
		t.Errorf("resumed import: %s", out)
	}
	s := d.Store()
	if got := s.Counts(); fmt.Sprint(got) != fmt.Sprint(wantCounts) {
		t.Errorf("counts %+v, want those of one import %+v", got, wantCounts)
	}
	if got := graphState(s, false); got != wantGraph {
		t.Errorf("the graph differs from one uninterrupted import's")
	}
	checkStored(t, s, eps)
}

// frame wraps payload in TFRecord framing.
func frame(dst, payload []byte) []byte {
	crc := func(b []byte) uint32 {
		c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
		return ((c >> 15) | (c << 17)) + 0xa282ead8
	}
	n := binary.LittleEndian.AppendUint64(nil, uint64(len(payload)))
	dst = append(dst, n...)
	dst = binary.LittleEndian.AppendUint32(dst, crc(n))
	dst = append(dst, payload...)
	return binary.LittleEndian.AppendUint32(dst, crc(payload))
}

// withWrongDType rewrites the shard so that record rec's steps/action,
// a float_list by features.json, is a bytes_list: the Feature's oneof
// tag goes from field 2 (float_list) to field 1 (bytes_list), which is
// still valid protobuf. The CRCs are recomputed.
func withWrongDType(t *testing.T, b []byte, offs []int64, rec int) []byte {
	t.Helper()
	var out []byte
	for i := range offs {
		end := int64(len(b))
		if i+1 < len(offs) {
			end = offs[i+1]
		}
		payload := slices.Clone(b[offs[i]+12 : end-4])
		if i == rec {
			key := append([]byte{0x0a, byte(len("steps/action"))}, "steps/action"...)
			at := bytes.Index(payload, key)
			if at < 0 {
				t.Fatal("steps/action not found")
			}
			p := at + len(key)
			if payload[p] != 0x12 { // map entry field 2: the Feature
				t.Fatalf("unexpected byte %#x after the key", payload[p])
			}
			_, n := binary.Uvarint(payload[p+1:])
			if payload[p+1+n] != 0x12 { // Feature field 2: float_list
				t.Fatalf("steps/action is not a float_list")
			}
			payload[p+1+n] = 0x0a
		}
		out = frame(out, payload)
	}
	return out
}

func TestImportRLDSBadRecords(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, b []byte, offs []int64) []byte
		bad    int // the record at fault
		says   []string
	}{
		{"corrupt CRC", func(_ *testing.T, b []byte, offs []int64) []byte {
			b[offs[3]+12+5000] ^= 1
			return b
		}, 3, []string{"record 3", "offset 420549", "payload CRC mismatch"}},
		{"truncated", func(_ *testing.T, b []byte, offs []int64) []byte { return b[:offs[24]+1000] },
			24, []string{"record 24", "offset 3340993", "truncated"}},
		{"wrong dtype", func(t *testing.T, b []byte, offs []int64) []byte { return withWrongDType(t, b, offs, 1) },
			1, []string{"record 1", "offset 144660", `"steps/action"`, "float32", "bytes_list"}},
	}
	good := readDataset(t, rlds.DatasetOptions{Dir: sample(bridgeDir), Splits: []string{"train"}})
	offs := recordOffsets(t, sample(bridgeDir+"/"+bridgeShard))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bridge_dataset", "1.0.0")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"features.json", "dataset_info.json", bridgeShard} {
				b, err := os.ReadFile(sample(bridgeDir + "/" + f))
				if err != nil {
					t.Fatal(err)
				}
				if f == bridgeShard {
					b = tc.damage(t, b, offs)
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			shard := filepath.Join(dir, bridgeShard)
			d := testDaemon(t)

			// Without --skip-bad: a clear error, and every episode before
			// the bad record stored whole.
			out, err := importRLDSInto(t, d, "--split", "train", dir)
			var re *rlds.RecordError
			if !errors.As(err, &re) || re.Record != int64(tc.bad) {
				t.Fatalf("import = %v, want the *rlds.RecordError of record %d\n%s", err, tc.bad, out)
			}
			for _, w := range append(tc.says, shard) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if c := d.Store().Counts(); c.Episodes != int64(tc.bad) || c.Steps != int64(10*tc.bad) {
				t.Errorf("after the error: %d episodes, %d steps stored; want %d, %d", c.Episodes, c.Steps, tc.bad, 10*tc.bad)
			}
			checkStored(t, d.Store(), good[:tc.bad])

			// With --skip-bad: every good episode lands, the bad one is
			// reported, and the command still fails.
			out, err = importRLDSInto(t, d, "--split", "train", "--skip-bad", dir)
			if err == nil || !strings.Contains(err.Error(), "1 bad records") || !strings.Contains(out, "skipped: "+shard) {
				t.Errorf("--skip-bad: %v\n%s", err, out)
			}
			var rest []*rlds.Episode
			for i, e := range good {
				if i != tc.bad {
					rest = append(rest, e)
				}
			}
			if c := d.Store().Counts(); c.Episodes != 24 || c.Steps != 240 {
				t.Errorf("with --skip-bad: %d episodes, %d steps stored; want 24, 240", c.Episodes, c.Steps)
			}
			checkStored(t, d.Store(), rest)
			if n := deadLetters(t, d); n != 0 {
				t.Errorf("%d dead letters", n)
			}
		})
	}
}

// stepSizes are the sizes of ep's step messages on the wire.
func stepSizes(t *testing.T, ep *rlds.Episode) []int {
	var out []int
	for _, m := range ep.Messages() {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if m.Step != nil {
			out = append(out, len(b))
		}
	}
	return out
}

func TestImportRLDSOversizedStep(t *testing.T) {
	eps := readDataset(t, rlds.DatasetOptions{Dir: sample(bridgeDir), Splits: []string{"train"}})
	sizes := make([]int, len(eps)) // each episode's largest step message
	for i, e := range eps {
		sizes[i] = slices.Max(stepSizes(t, e))
	}
	sorted := slices.Clone(sizes)
	slices.Sort(sorted)
	limit := sorted[len(sorted)/2] // about half the episodes have a bigger step
	first := slices.IndexFunc(sizes, func(n int) bool { return n > limit })
	step := slices.IndexFunc(stepSizes(t, eps[first]), func(n int) bool { return n > limit })

	d := testDaemon(t, func(c *daemon.Config) { c.Ingest.MaxMessageBytes = limit })
	out, err := importRLDSInto(t, d, "--split", "train", sample(bridgeDir))
	var ee *client.EpisodeError
	if !errors.As(err, &ee) || !errors.Is(err, client.ErrTooLarge) || ee.Episode != eps[first].ID {
		t.Fatalf("import = %v, want ErrTooLarge for episode %d\n%s", err, first, out)
	}
	for _, w := range []string{eps[first].ID, fmt.Sprintf("record %d", first), fmt.Sprintf("step %d:", step), fmt.Sprint(limit)} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	// Nothing of the oversized episode was sent; all before it was.
	if c := d.Store().Counts(); c.Episodes != int64(first) || c.Steps != int64(10*first) {
		t.Errorf("%d episodes, %d steps stored; want %d, %d", c.Episodes, c.Steps, first, 10*first)
	}
	_, err = importRLDSInto(t, d, "--split", "train", "--skip-bad", sample(bridgeDir))
	var fit []*rlds.Episode
	for i, e := range eps {
		if sizes[i] <= limit {
			fit = append(fit, e)
		}
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d bad records", len(eps)-len(fit))) {
		t.Errorf("--skip-bad: %v", err)
	}
	if c := d.Store().Counts(); c.Episodes != int64(len(fit)) {
		t.Errorf("%d episodes stored, want the %d that fit", c.Episodes, len(fit))
	}
	checkStored(t, d.Store(), fit)
	if n := deadLetters(t, d); n != 0 {
		t.Errorf("%d dead letters", n)
	}
}

func TestImportRLDSShardFiles(t *testing.T) {
	// Shard files instead of the folder; the metadata beside them is used.
	d := testDaemon(t)
	mustImport(t, d, "--limit", "3", sample(bridgeDir+"/"+bridgeShard))
	eps := readDataset(t, rlds.DatasetOptions{Files: []string{sample(bridgeDir + "/" + bridgeShard)}})
	if c := d.Store().Counts(); c.Episodes != 3 || c.Steps != 30 {
		t.Fatalf("%d episodes, %d steps", c.Episodes, c.Steps)
	}
	checkStored(t, d.Store(), eps[:3])
}

// example serializes a tf.train.Example of bytes, float and int64
// features (lists packed).
func example(features map[string]any) []byte {
	var feats []byte
	for _, k := range slices.Sorted(maps.Keys(features)) {
		var list []byte
		var kind protowire.Number
		switch v := features[k].(type) {
		case []string:
			kind = 1
			for _, s := range v {
				list = protowire.AppendTag(list, 1, protowire.BytesType)
				list = protowire.AppendString(list, s)
			}
		case []float32:
			kind = 2
			var packed []byte
			for _, f := range v {
				packed = protowire.AppendFixed32(packed, math.Float32bits(f))
			}
			list = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), packed)
		case []int64:
			kind = 3
			var packed []byte
			for _, n := range v {
				packed = protowire.AppendVarint(packed, uint64(n))
			}
			list = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), packed)
		}
		feature := protowire.AppendBytes(protowire.AppendTag(nil, kind, protowire.BytesType), list)
		entry := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), k)
		entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), feature)
		feats = protowire.AppendBytes(protowire.AppendTag(feats, 1, protowire.BytesType), entry)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), feats)
}

func TestImportRLDSMetadataNamesAgentLocationScene(t *testing.T) {
	// A dataset of our own, with no features.json (shapes inferred), whose
	// episode metadata names the robot, the place and the scene.
	dir := filepath.Join(t.TempDir(), "lab_set", "0.1.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	jpeg := func(i byte) string { return string([]byte{0xff, 0xd8, 0xff, 0xe0, i}) }
	var shard []byte
	for i, robot := range []string{"Franka Panda #2", "UR5 (left)"} {
		shard = frame(shard, example(map[string]any{
			"steps/is_first":              []int64{1, 0, 0},
			"steps/is_last":               []int64{0, 0, 1},
			"steps/is_terminal":           []int64{0, 0, 1},
			"steps/reward":                []float32{0, 0, 1},
			"steps/action":                []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, float32(i)},
			"steps/observation/state":     []float32{0.5, -0.5, 1.5, -1.5, 2.5, -2.5},
			"steps/observation/image":     []string{jpeg(0), jpeg(1), jpeg(2)},
			"steps/language_instruction":  []string{"pick up the red block", "pick up the red block", "pick up the red block"},
			"episode_metadata/robot_name": []string{robot},
			"episode_metadata/location":   []string{"Berkeley RAIL"},
			"episode_metadata/scene":      []string{"toy kitchen"},
		}))
	}
	if err := os.WriteFile(filepath.Join(dir, "lab_set-train.tfrecord-00000-of-00001"), shard, 0o644); err != nil {
		t.Fatal(err)
	}
	d := testDaemon(t)
	out := mustImport(t, d, dir)
	if !strings.Contains(out, "no features.json") || !strings.Contains(out, "published 2 episodes (6 steps") {
		t.Errorf("import: %s", out)
	}
	eps := readDataset(t, rlds.DatasetOptions{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	s := d.Store()
	checkStored(t, s, eps)
	loc := node(s, particle.NodeLocation, "Berkeley RAIL")
	if loc == nil {
		t.Fatal("no location node")
	}
	for i, agent := range []string{"franka_panda_2", "ur5_left"} {
		a := node(s, particle.NodeAgent, agent)
		ep, err := s.Episode(particle.DefaultNamespace, eps[i].ID)
		if a == nil || err != nil {
			t.Fatalf("agent %s: %v, episode: %v", agent, a, err)
		}
		var tags []string
		s.Read(func(r particle.Reader) { tags = r.Node(ep.NodeID).Attributes.Tags })
		if ep.Agent != agent || ep.Location != "Berkeley RAIL" || !slices.Contains(tags, "scene:toy kitchen") {
			t.Errorf("episode %d: agent %q location %q tags %q", i, ep.Agent, ep.Location, tags)
		}
		if !hasEdge(s, ep.NodeID, "run_by", a.ID) || !hasEdge(s, ep.NodeID, "at", loc.ID) || !hasEdge(s, a.ID, "located_at", loc.ID) {
			t.Errorf("episode %d: run_by / at / located_at edges missing", i)
		}
	}
	if got := storedSteps(t, s, eps[1].ID)[2].Action[""].Data; !slices.Equal(got, []float64{9, 10, 11, 1}) {
		t.Errorf("episode 1 step 2 action %v", got)
	}
	if node(s, particle.NodeEntity, "red block") == nil || node(s, particle.NodeIntent, "pick up") == nil || node(s, particle.NodeGoal, "pick up the red block") == nil {
		t.Error("the instruction did not become goal, intent and entity nodes")
	}
}

func TestImportJSONLThroughDaemon(t *testing.T) {
	d := testDaemon(t)
	file := filepath.Join("..", "..", "testdata", "episodes.jsonl")
	args := []string{"import", "jsonl", "--nats", d.NATSURL(), "--wait", "60s", "--quiet", file}
	_, out, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := d.Store()
	want, wantCounts := graphState(s, true), s.Counts()
	if wantCounts.Episodes != 4 || wantCounts.Steps != 32 {
		t.Fatalf("counts %+v", wantCounts)
	}
	ep, err := s.Episode(particle.DefaultNamespace, "ep-alpha-0001")
	if err != nil || ep.Agent != "ur5-alpha" || ep.Location != "kitchen lab" || !ep.Ended {
		t.Fatalf("episode ep-alpha-0001: %+v %v", ep, err)
	}
	steps := storedSteps(t, s, "ep-alpha-0001")
	if got := steps[0].Action[""].Data; !slices.Equal(got, []float64{1.0, 0.5403, -0.4161, -0.99, -0.6536, 0.2837, 0.9602}) {
		t.Errorf("step 0 action %v", got)
	}
	_, out, err = runCLI(t, args...)
	if err != nil || !strings.Contains(out, "40 already stored") {
		t.Errorf("second import: %v\n%s", err, out)
	}
	if graphState(s, true) != want || fmt.Sprint(s.Counts()) != fmt.Sprint(wantCounts) {
		t.Error("importing the JSONL file again changed the graph")
	}

	// Four steps a message, in msgpack: the same graph, from fewer
	// messages.
	grouped := testDaemon(t)
	_, out, err = runCLI(t, "import", "jsonl", "--nats", grouped.NATSURL(), "--wait", "60s", "--quiet",
		"--steps-per-message", "4", "--wire", "msgpack", file)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got, want := graphState(grouped.Store(), false), graphState(s, false); got != want {
		t.Errorf("imported four steps a message, the graph is\n%s\nwant\n%s", got, want)
	}
	if c := grouped.Store().Counts(); c.Steps != wantCounts.Steps || c.Episodes != wantCounts.Episodes {
		t.Errorf("four steps a message: counts %+v, want %+v", c, wantCounts)
	}
	if n := streamMessages(t, grouped, daemon.StreamRLDS); n >= 40 {
		t.Errorf("%d messages for 40 lines sent four steps a message", n)
	}
}

// BenchmarkImportRLDS measures `import rlds` end to end: reading the
// shards, publishing over NATS, and the daemon applying every message
// (the clock stops when the daemon holds everything in full). The
// dataset is bridge_dataset with its train shard copied under 8 shard
// names (200 distinct episodes, 2000 steps, 27.8 MB of TFRecords; about
// 27 KB per step on the wire: four 64x64 JPEGs and a 512-d language
// embedding). The daemon runs with its default configuration. The
// sub-benchmarks send one step a message and an episode's ten steps in
// one steps message (--steps-per-message 10).
func BenchmarkImportRLDS(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("steps_per_message=%d", n), func(b *testing.B) { benchmarkImportRLDS(b, n) })
	}
}

func benchmarkImportRLDS(b *testing.B, stepsPerMessage int) {
	src, err := os.ReadFile(sample(bridgeDir + "/" + bridgeShard))
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "bridge_dataset", "1.0.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	features, err := os.ReadFile(sample(bridgeDir + "/features.json"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "features.json"), features, 0o644); err != nil {
		b.Fatal(err)
	}
	const shards = 8
	for i := range shards {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("bridge_dataset-train.tfrecord-%05d-of-%05d", i, shards)), src, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var steps, wire int64
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		d := testDaemon(b)
		nc, js, err := client.Connect(d.NATSURL(), "bench")
		if err != nil {
			b.Fatal(err)
		}
		ds, err := client.OpenRLDS([]string{dir}, client.ImportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		st, err := client.ImportRLDS(context.Background(), nc, js, ds, client.ImportOptions{SkipStored: true, StepsPerMessage: stepsPerMessage})
		if err != nil {
			b.Fatal(err)
		}
		if err := client.WaitApplied(context.Background(), js, time.Minute, map[string]string{daemon.StreamRLDS: daemon.DurableRLDS}); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		if c := d.Store().Counts(); c.Steps != 10*25*shards {
			b.Fatalf("%d steps stored", c.Steps)
		}
		steps += st.Steps
		wire += st.Bytes
		nc.Close()
		d.Shutdown(context.Background())
		b.StartTimer()
	}
	b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
	b.ReportMetric(float64(wire)/1e6/elapsed.Seconds(), "wireMB/s")
	b.ReportMetric(float64(int64(len(src))*shards*int64(b.N))/1e6/elapsed.Seconds(), "fileMB/s")
}

// streamMessages is how many messages the daemon's stream holds.
func streamMessages(t testing.TB, d *daemon.Daemon, stream string) uint64 {
	t.Helper()
	nc, js, err := client.Connect(d.NATSURL(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	st, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// Imported with several steps a message, the dataset is stored as it is
// one step a message, in fewer messages; a steps message over the
// daemon's size limit is sent in parts that fit.
func TestImportRLDSStepsPerMessage(t *testing.T) {
	eps := readDataset(t, rlds.DatasetOptions{Dir: sample(bridgeDir), Splits: []string{"train"}})
	largest := 0
	for _, e := range eps {
		largest = max(largest, slices.Max(stepSizes(t, e)))
	}
	// Room for about three of the largest steps: a message of an
	// episode's 10 steps must be halved, once or twice.
	d := testDaemon(t, func(c *daemon.Config) { c.Ingest.MaxMessageBytes = 3 * largest })
	mustImport(t, d, "--split", "train", "--steps-per-message", "10", sample(bridgeDir))
	if c := d.Store().Counts(); c.Episodes != 25 || c.Steps != 250 {
		t.Fatalf("stored %d episodes, %d steps; want 25, 250", c.Episodes, c.Steps)
	}
	checkStored(t, d.Store(), eps)
	for _, e := range eps[:3] {
		got := storedSteps(t, d.Store(), e.ID)
		for i, st := range got {
			if !slices.Equal(st.Action[""].Data, e.Steps[i].Action[""].Data) {
				t.Errorf("episode %s step %d: action %v, want %v", e.ID, i, st.Action[""].Data, e.Steps[i].Action[""].Data)
			}
		}
	}
	// One step a message is 12 messages an episode; one message of all
	// ten steps would be 3.
	if n := streamMessages(t, d, daemon.StreamRLDS); n >= 25*12 || n <= 25*3 {
		t.Errorf("%d messages in the stream, want between %d and %d", n, 25*3, 25*12)
	}
	if n := deadLetters(t, d); n != 0 {
		t.Errorf("%d dead letters", n)
	}
	if _, err := importRLDSInto(t, d, "--steps-per-message", "0", sample(bridgeDir)); err == nil || !strings.Contains(err.Error(), "--steps-per-message 0") {
		t.Errorf("--steps-per-message 0: %v", err)
	}
}
