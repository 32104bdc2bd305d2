package rlds

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The ground-truth constants in these tests (record offsets, episode_id
// values, instructions, action vectors as float32 bits, image sizes,
// episode UUIDs) were obtained once with an independent reader: a short
// Python 3 script (no TensorFlow) that walks the TFRecord framing with
// struct.unpack('<Q'), parses tf.train.Example by hand from the protobuf
// wire format, and computes IDs with uuid.uuid5(EpisodeNamespace,
// "\x00".join([dataset, version, split, shard, str(record)])).

const samplesDir = "../../shared/rlds-samples"

func samplePath(rel string) string { return filepath.Join(samplesDir, filepath.FromSlash(rel)) }

const (
	bridgeTrain = "bridge_dataset/1.0.0/bridge_dataset-train.tfrecord-00000-of-00001"
	bridgeVal   = "bridge_dataset/1.0.0/bridge_dataset-val.tfrecord-00000-of-00001"
)

// Record offsets in the bridge_dataset train shard.
var bridgeTrainOffsets = []int64{0, 144660, 283789, 420549, 556565, 699654, 838661, 977495, 1115136, 1254687,
	1392293, 1532430, 1671034, 1812277, 1952674, 2093690, 2228696, 2365277, 2507793, 2645830,
	2787359, 2925041, 3059372, 3196957, 3340993}

// copySample copies files of a sample version folder into
// <tmp>/<name>/<version>/ and returns that folder.
func copySample(t testing.TB, name, version string, files ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(samplePath(name + "/" + version + "/" + f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func collect(t testing.TB, ds *Dataset) []*Episode {
	t.Helper()
	var eps []*Episode
	if err := ds.Episodes(context.Background(), func(e *Episode) error {
		eps = append(eps, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return eps
}

func f32bits(v []float64) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(float32(x))
	}
	return out
}

func tensorSig(t Tensor) string { return fmt.Sprintf("%s%v", t.DType, t.Shape) }

func TestBridgeDataset(t *testing.T) {
	ds, err := OpenDatasetOptions(DatasetOptions{Dir: samplePath("bridge_dataset/1.0.0"), Splits: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != "bridge_dataset" || ds.Version != "1.0.0" || ds.Info.Version != "1.0.0" || ds.Schema.Inferred {
		t.Errorf("identity %s %s (info %s), inferred %v", ds.Name, ds.Version, ds.Info.Version, ds.Schema.Inferred)
	}
	if len(ds.Shards) != 1 || ds.Shards[0].Split != "train" || ds.Shards[0].Index != 0 || ds.Shards[0].Count != 1 {
		t.Fatalf("shards %+v", ds.Shards)
	}
	eps := collect(t, ds)
	if len(eps) != 25 {
		t.Fatalf("%d episodes, want 25", len(eps))
	}
	wantObs := map[string]string{
		"image_0": "image[64 64 3]", "image_1": "image[64 64 3]", "image_2": "image[64 64 3]", "image_3": "image[64 64 3]",
		"state": "float32[7]",
	}
	ids := map[string]bool{}
	for i, e := range eps {
		if len(e.Steps) != 10 {
			t.Errorf("episode %d: %d steps, want 10", i, len(e.Steps))
		}
		if ids[e.ID] {
			t.Errorf("episode %d: duplicate ID %s", i, e.ID)
		}
		ids[e.ID] = true
		if e.Source.Record != int64(i) || e.Source.Offset != bridgeTrainOffsets[i] || e.Source.Split != "train" ||
			e.Source.Shard != "bridge_dataset-train.tfrecord-00000-of-00001" || e.Source.Dataset != "bridge_dataset" || e.Source.Version != "1.0.0" {
			t.Errorf("episode %d: source %+v", i, *e.Source)
		}
		if e.Agent != "bridge_dataset" || e.Location != "" || e.Success != nil {
			t.Errorf("episode %d: agent %q location %q success %v", i, e.Agent, e.Location, e.Success)
		}
		for j, s := range e.Steps {
			if s.Index != j || s.IsFirst != (j == 0) || s.IsLast || s.IsTerminal || s.Reward != 0 || s.Discount != 1 {
				t.Errorf("episode %d step %d: index %d first %v last %v terminal %v reward %v discount %v",
					i, j, s.Index, s.IsFirst, s.IsLast, s.IsTerminal, s.Reward, s.Discount)
			}
			if len(s.Observation) != len(wantObs) {
				t.Errorf("episode %d step %d: observation keys %d, want %d", i, j, len(s.Observation), len(wantObs))
			}
			for k, w := range wantObs {
				o := s.Observation[k]
				if got := tensorSig(o); got != w {
					t.Errorf("episode %d step %d: observation %s is %s, want %s", i, j, k, got, w)
				}
				if o.DType == Image && (o.Encoding != "jpeg" || !bytes.HasPrefix(o.Bytes, []byte{0xff, 0xd8, 0xff})) {
					t.Errorf("episode %d step %d: %s encoding %q", i, j, k, o.Encoding)
				}
			}
			if a, ok := s.Action[""]; len(s.Action) != 1 || !ok || tensorSig(a) != "float32[7]" {
				t.Errorf("episode %d step %d: action %v", i, j, s.Action)
			}
			if emb, ok := s.Metadata["language_embedding"].(Tensor); !ok || tensorSig(emb) != "float32[512]" {
				t.Errorf("episode %d step %d: language_embedding %T", i, j, s.Metadata["language_embedding"])
			}
			if s.LanguageInstruction == "" || s.LanguageInstruction != e.LanguageInstruction {
				t.Errorf("episode %d step %d: instruction %q, episode %q", i, j, s.LanguageInstruction, e.LanguageInstruction)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("episode %d step %d: %v", i, j, err)
			}
		}
		for _, k := range []string{"episode_metadata/episode_id", "episode_metadata/file_path", "episode_metadata/has_image_0",
			"episode_metadata/has_image_1", "episode_metadata/has_image_2", "episode_metadata/has_image_3", "episode_metadata/has_language"} {
			if _, ok := e.Metadata[k]; !ok {
				t.Errorf("episode %d: metadata %s missing", i, k)
			}
		}
		for _, m := range e.Messages() {
			if err := m.Validate(); err != nil {
				t.Fatalf("episode %d: message %s: %v", i, m.Kind, err)
			}
		}
	}

	e := eps[0]
	if e.ID != "bcabd5cf-c066-5d0b-895d-67dc8dd9f680" {
		t.Errorf("episode 0 ID %s", e.ID)
	}
	if eps[24].ID != "37e20d3a-ddbd-5469-9de7-d2367e7a6d33" {
		t.Errorf("episode 24 ID %s", eps[24].ID)
	}
	if e.LanguageInstruction != "put cup from counter or drying rack into sink" {
		t.Errorf("instruction %q", e.LanguageInstruction)
	}
	if e.Metadata["episode_metadata/episode_id"] != int64(5) || e.Metadata["episode_metadata/has_language"] != true ||
		e.Metadata["episode_metadata/has_image_0"] != false {
		t.Errorf("metadata %v", e.Metadata)
	}
	if fp := e.Metadata["episode_metadata/file_path"]; fp != "/nfs/kun2/users/homer/datasets/bridge_data_all/numpy_256/bridge_data_v1/berkeley/toysink2_bww/put_cup_from_counter_or_drying_rack_into_sink/val/out.npy" {
		t.Errorf("file_path %v", fp)
	}
	// Action vectors as float32 bit patterns.
	if got, want := f32bits(e.Steps[0].Action[""].Data), []uint32{0x2fc88e20, 0x2e121990, 0x2f588200, 0xb4481bdf, 0xb507279a, 0x33a11f09, 0x3f800000}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("episode 0 step 0 action bits %x, want %x", got, want)
	}
	if got, want := e.Steps[3].Action[""].Data, []float64{-0.004771918524056673, 0.0022340540308505297, -0.004606693517416716, -0.00252490839920938, 0.05806305631995201, -0.15041977167129517, 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("episode 0 step 3 action %v, want %v", got, want)
	}
	if got, want := e.Steps[0].Observation["state"].Data[:3], []float64{0.2338147908449173, 0.11244295537471771, 0.17504854500293732}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("episode 0 step 0 state %v, want %v", got, want)
	}
	if n := len(e.Steps[0].Observation["image_0"].Bytes); n != 3807 {
		t.Errorf("episode 0 step 0 image_0 is %d bytes, want 3807", n)
	}
	last := eps[24]
	if got, want := last.Steps[9].Action[""].Data, []float64{-0.0013441013870760798, 0.012203113175928593, 0.010503994300961494, 0.020340749993920326, -0.027401594445109367, 0.03206317499279976, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("episode 24 step 9 action %v, want %v", got, want)
	}
	if last.LanguageInstruction != "put carrot on plate" || last.Metadata["episode_metadata/episode_id"] != int64(0) {
		t.Errorf("episode 24: %q %v", last.LanguageInstruction, last.Metadata["episode_metadata/episode_id"])
	}
}

// episodeKey summarises an episode's content, not its identity.
func episodeKey(e *Episode) string {
	return fmt.Sprint(e.Metadata["episode_metadata/file_path"], e.Metadata["episode_metadata/episode_id"], e.LanguageInstruction,
		e.Steps[0].Action[""].Data, len(e.Steps[9].Observation["image_3"].Bytes))
}

func TestBridgeDatasetSplits(t *testing.T) {
	// The parent folder resolves to its (only) version folder.
	ds, err := OpenDataset(samplePath("bridge_dataset"))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(ds.Dir) != "1.0.0" || strings.Join(ds.Splits(), ",") != "train,val" || len(ds.Shards) != 2 {
		t.Fatalf("dir %s splits %v shards %d", ds.Dir, ds.Splits(), len(ds.Shards))
	}
	eps := collect(t, ds)
	if len(eps) != 50 {
		t.Fatalf("%d episodes, want 50", len(eps))
	}
	// val holds the same 25 episodes as train, in another order, with
	// other IDs.
	var train, val []string
	ids := map[string]bool{}
	for _, e := range eps {
		ids[e.ID] = true
		if e.Source.Split == "train" {
			train = append(train, episodeKey(e))
		} else {
			val = append(val, episodeKey(e))
		}
	}
	sort.Strings(train)
	sort.Strings(val)
	if len(train) != 25 || strings.Join(train, "\n") != strings.Join(val, "\n") {
		t.Errorf("train and val differ")
	}
	if len(ids) != 50 {
		t.Errorf("%d distinct IDs, want 50", len(ids))
	}
	if eps[25].ID != "86f08e95-55c4-591a-95b9-53f882844c0e" || eps[25].Source.Record != 0 || eps[25].Source.Split != "val" {
		t.Errorf("val record 0: %s %+v", eps[25].ID, *eps[25].Source)
	}
}

func TestBridgeOXEFixture(t *testing.T) {
	ds, err := OpenDataset(samplePath("bridge/1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	// The folder says 1.0.0, dataset_info.json 0.0.1: the folder wins for
	// identity and both are kept.
	if ds.Name != "bridge" || ds.Version != "1.0.0" || ds.Info.Version != "0.0.1" {
		t.Errorf("identity %s %s (info %s)", ds.Name, ds.Version, ds.Info.Version)
	}
	eps := collect(t, ds)
	if len(eps) != 1 || len(eps[0].Steps) != 3 {
		t.Fatalf("%d episodes", len(eps))
	}
	e := eps[0]
	if e.ID != "0a8c5f69-7aad-511a-bced-e0bf510271c6" || e.Agent != "bridge" {
		t.Errorf("ID %s agent %s", e.ID, e.Agent)
	}
	if v, ok := e.Metadata["episode_id"]; !ok || v != "" {
		t.Errorf("episode_id metadata %v", e.Metadata)
	}
	wantAct := map[string]string{"world_vector": "float32[3]", "rotation_delta": "float32[3]", "open_gripper": "bool[]", "terminate_episode": "float32[]"}
	wantObs := map[string]string{"image": "image[480 640 3]", "natural_language_embedding": "float32[512]", "state": "float32[7]", "natural_language_instruction": "string[]"}
	for i, s := range e.Steps {
		if s.IsFirst != (i == 0) || s.IsLast != (i == 2) || s.IsTerminal != (i == 2) {
			t.Errorf("step %d flags %v %v %v", i, s.IsFirst, s.IsLast, s.IsTerminal)
		}
		for _, g := range []struct {
			want map[string]string
			got  Features
		}{{wantAct, s.Action}, {wantObs, s.Observation}} {
			want, got := g.want, g.got
			if len(got) != len(want) {
				t.Errorf("step %d: %d features, want %d", i, len(got), len(want))
			}
			for k, w := range want {
				if g := tensorSig(got[k]); g != w {
					t.Errorf("step %d: %s is %s, want %s", i, k, g, w)
				}
			}
		}
		img := s.Observation["image"]
		if img.Encoding != "png" || len(img.Bytes) != 972 {
			t.Errorf("step %d: image %s, %d bytes", i, img.Encoding, len(img.Bytes))
		}
		if got := s.Action["world_vector"].Data; len(got) != 3 || got[0] != 0 {
			t.Errorf("step %d: world_vector %v", i, got)
		}
		if nli := s.Observation["natural_language_instruction"]; len(nli.Text) != 1 || nli.Text[0] != "" || s.LanguageInstruction != "" {
			t.Errorf("step %d: instruction %q / %q", i, nli.Text, s.LanguageInstruction)
		}
	}
}

func TestOpenFiles(t *testing.T) {
	ds, err := OpenFiles(samplePath(bridgeTrain))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != "bridge_dataset" || ds.Version != "1.0.0" || ds.Schema == nil || ds.Schema.Inferred {
		t.Fatalf("%s %s %+v", ds.Name, ds.Version, ds.Schema)
	}
	eps := collect(t, ds)
	if len(eps) != 25 || eps[0].ID != "bcabd5cf-c066-5d0b-895d-67dc8dd9f680" {
		t.Fatalf("%d episodes, first %s", len(eps), eps[0].ID)
	}
}

func TestOpenDatasetErrors(t *testing.T) {
	// array_record datasets are named as such.
	_, err := OpenDataset(samplePath("_oxe-metadata/kuka/0.1.0"))
	if err == nil || !strings.Contains(err.Error(), "array_record") {
		t.Errorf("kuka metadata only: %v", err)
	}
	if _, err := OpenDataset(t.TempDir()); err == nil {
		t.Error("empty folder: want an error")
	}
	if _, err := OpenFiles(); err == nil {
		t.Error("no files: want an error")
	}
}

func TestInferredSchema(t *testing.T) {
	dir := copySample(t, "bridge_dataset", "1.0.0", "bridge_dataset-train.tfrecord-00000-of-00001")
	var logs bytes.Buffer
	ds, err := OpenDatasetOptions(DatasetOptions{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if !ds.Schema.Inferred || ds.Info != nil || !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "inferred") {
		t.Errorf("inferred %v info %v log %q", ds.Schema.Inferred, ds.Info, logs.String())
	}
	for path, want := range map[string]string{
		"steps/action":                 "tensor float32 [7] step",
		"steps/is_first":               "scalar bool [] step",
		"steps/observation/image_0":    "image uint8 [] step",
		"steps/language_instruction":   "text string [] step",
		"steps/language_embedding":     "tensor float32 [512] step",
		"episode_metadata/file_path":   "text string [] episode",
		"episode_metadata/has_image_0": "scalar int64 [] episode",
	} {
		l, ok := ds.Schema.Leaf(path)
		step := "episode"
		if l.PerStep {
			step = "step"
		}
		if got := fmt.Sprintf("%s %s %v %s", l.Kind, l.DType, l.Shape, step); !ok || got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	eps := collect(t, ds)
	if len(eps) != 25 {
		t.Fatalf("%d episodes", len(eps))
	}
	// Same identity as with features.json.
	if eps[0].ID != "bcabd5cf-c066-5d0b-895d-67dc8dd9f680" {
		t.Errorf("ID %s", eps[0].ID)
	}
	s := eps[0].Steps[3]
	if tensorSig(s.Action[""]) != "float32[7]" || s.Observation["image_1"].Encoding != "jpeg" || s.Observation["image_1"].DType != Image ||
		s.LanguageInstruction != "put cup from counter or drying rack into sink" || eps[0].Steps[0].IsFirst != true {
		t.Errorf("step 3: %+v", s)
	}
}

func TestCorruptCRC(t *testing.T) {
	const shard = "bridge_dataset-train.tfrecord-00000-of-00001"
	tests := []struct {
		name    string
		flipAt  int64 // byte to damage
		errText string
	}{
		{"payload", bridgeTrainOffsets[3] + 12 + 5000, "payload CRC mismatch"},
		{"length", bridgeTrainOffsets[3] + 2, "length CRC mismatch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copySample(t, "bridge_dataset", "1.0.0", shard, "features.json", "dataset_info.json")
			path := filepath.Join(dir, shard)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[tc.flipAt] ^= 0x01
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			ds, err := OpenDataset(dir)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			err = ds.Episodes(context.Background(), func(*Episode) error { n++; return nil })
			var re *RecordError
			if !errors.As(err, &re) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Episodes = %v, want a *RecordError wrapping ErrCorrupt", err)
			}
			if n != 3 || re.File != path || re.Offset != bridgeTrainOffsets[3] || re.Record != 3 {
				t.Errorf("%d episodes before %s offset %d record %d", n, re.File, re.Offset, re.Record)
			}
			for _, want := range []string{path, "offset 420549", "record 3", tc.errText} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}

			// With SkipBad the other 24 come through, with their own IDs.
			ds.SkipBad = true
			var skipped []error
			ds.OnError = func(err error) { skipped = append(skipped, err) }
			eps := collect(t, ds)
			if len(eps) != 24 || len(skipped) != 1 || !errors.Is(skipped[0], ErrCorrupt) {
				t.Fatalf("%d episodes, skipped %v", len(eps), skipped)
			}
			if eps[3].Source.Record != 4 || eps[3].Source.Offset != bridgeTrainOffsets[4] || eps[23].ID != "37e20d3a-ddbd-5469-9de7-d2367e7a6d33" {
				t.Errorf("after the damage: record %d offset %d, last ID %s", eps[3].Source.Record, eps[3].Source.Offset, eps[23].ID)
			}
		})
	}
}

func TestTruncatedFile(t *testing.T) {
	const shard = "bridge_dataset-train.tfrecord-00000-of-00001"
	for _, cut := range []int64{bridgeTrainOffsets[24] + 1000, bridgeTrainOffsets[24] + 7} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir := copySample(t, "bridge_dataset", "1.0.0", shard, "features.json", "dataset_info.json")
			path := filepath.Join(dir, shard)
			if err := os.Truncate(path, cut); err != nil {
				t.Fatal(err)
			}
			ds, err := OpenDataset(dir)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			err = ds.Episodes(context.Background(), func(*Episode) error { n++; return nil })
			var re *RecordError
			if !errors.As(err, &re) || !errors.Is(err, ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("Episodes = %v, want a truncation *RecordError", err)
			}
			if n != 24 || re.Offset != bridgeTrainOffsets[24] || re.Record != 24 || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), path) {
				t.Errorf("%d episodes, error %v", n, err)
			}
			ds.SkipBad = true
			var skipped []error
			ds.OnError = func(err error) { skipped = append(skipped, err) }
			if eps := collect(t, ds); len(eps) != 24 || len(skipped) != 1 {
				t.Errorf("skipping: %d episodes, %d errors", len(eps), len(skipped))
			}
		})
	}
}

// bridgeRecords returns the first n records of the bridge_dataset train
// shard.
func bridgeRecords(t testing.TB, n int) [][]byte {
	t.Helper()
	f, err := os.Open(samplePath(bridgeTrain))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := NewTFRecordReader(f, bridgeTrain)
	var out [][]byte
	for range n {
		b, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]byte(nil), b...))
	}
	return out
}

func TestWrongDType(t *testing.T) {
	recs := bridgeRecords(t, 3)
	ex, err := ParseExample(recs[1])
	if err != nil {
		t.Fatal(err)
	}
	// features.json says steps/action is float32; make it a bytes_list.
	ex["steps/action"] = Feature{Kind: FeatureBytes, Bytes: [][]byte{[]byte("not"), []byte("floats")}}
	recs[1] = encodeExample(ex, false)

	dir := copySample(t, "bridge_dataset", "1.0.0", "features.json", "dataset_info.json")
	const shard = "bridge_dataset-train.tfrecord-00000-of-00001"
	path := filepath.Join(dir, shard)
	if err := os.WriteFile(path, tfrecordStream(recs...), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := OpenDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	err = ds.Episodes(context.Background(), func(*Episode) error { n++; return nil })
	var re *RecordError
	if !errors.As(err, &re) || !errors.Is(err, ErrDType) {
		t.Fatalf("Episodes = %v, want a *RecordError wrapping ErrDType", err)
	}
	wantOff := int64(16 + len(recs[0]))
	if n != 1 || re.File != path || re.Record != 1 || re.Offset != wantOff {
		t.Errorf("%d episodes, error at %s record %d offset %d (want offset %d)", n, re.File, re.Record, re.Offset, wantOff)
	}
	for _, want := range []string{`"steps/action"`, "float32", "bytes_list", "record 1", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	ds.SkipBad = true
	var skipped []error
	ds.OnError = func(err error) { skipped = append(skipped, err) }
	eps := collect(t, ds)
	if len(eps) != 2 || len(skipped) != 1 || !errors.Is(skipped[0], ErrDType) || eps[1].Source.Record != 2 {
		t.Errorf("skipping: %d episodes, errors %v", len(eps), skipped)
	}
}

func TestUnpackedRecordDecodesTheSame(t *testing.T) {
	rec := bridgeRecords(t, 1)[0]
	s := mustSchema(t, "bridge_dataset/1.0.0/features.json")
	src := Source{Dataset: "bridge_dataset", Version: "1.0.0", Split: "train", Shard: "x", Record: 0}
	a, err := DecodeEpisode(rec, s, src)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := ParseExample(rec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeEpisode(encodeExample(ex, true), s, src)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("packed and unpacked encodings decode differently")
	}
}

func zlibBytes(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func float32LE(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func TestKukaZlibTensors(t *testing.T) {
	s := mustSchema(t, "_oxe-metadata/kuka/0.1.0/features.json")
	bounds0 := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	bounds1 := []float32{-1, -2, -3, -4, -5, -6, -7, -8, -9.5}
	ex := Example{
		"steps/is_first": {Kind: FeatureInt64, Ints: []int64{1, 0}},
		"steps/is_last":  {Kind: FeatureInt64, Ints: []int64{0, 1}},
		"steps/observation/clip_function_input/workspace_bounds": {Kind: FeatureBytes, Bytes: [][]byte{
			zlibBytes(t, float32LE(bounds0...)), zlibBytes(t, float32LE(bounds1...))}},
		"steps/observation/gripper_closed":               {Kind: FeatureBytes, Bytes: [][]byte{zlibBytes(t, float32LE(0)), zlibBytes(t, float32LE(1))}},
		"steps/observation/image":                        {Kind: FeatureBytes, Bytes: [][]byte{{0xff, 0xd8, 0xff, 0xe0, 1, 2}, {}}},
		"steps/observation/natural_language_instruction": {Kind: FeatureBytes, Bytes: [][]byte{[]byte("pick anything"), []byte("pick anything")}},
		"steps/action/world_vector":                      {Kind: FeatureFloat, Floats: []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}},
		"steps/action/terminate_episode":                 {Kind: FeatureInt64, Ints: []int64{0, 1, 0, 1, 0, 0}},
		"success":                                        {Kind: FeatureInt64, Ints: []int64{1}},
	}
	e, err := DecodeEpisode(encodeExample(ex, false), s, Source{Dataset: "kuka", Version: "0.1.0", Split: "train"})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Steps) != 2 || e.Success == nil || !*e.Success || e.Agent != "kuka" || e.LanguageInstruction != "pick anything" {
		t.Fatalf("episode %+v", e)
	}
	wb := e.Steps[1].Observation["clip_function_input/workspace_bounds"]
	if tensorSig(wb) != "float32[3 3]" || fmt.Sprint(wb.Data) != "[-1 -2 -3 -4 -5 -6 -7 -8 -9.5]" {
		t.Errorf("workspace_bounds %s %v", tensorSig(wb), wb.Data)
	}
	if g := e.Steps[1].Observation["gripper_closed"]; tensorSig(g) != "float32[1]" || g.Data[0] != 1 {
		t.Errorf("gripper_closed %s %v", tensorSig(g), g.Data)
	}
	if im := e.Steps[0].Observation["image"]; im.Encoding != "jpeg" || len(im.Bytes) != 6 {
		t.Errorf("image 0: %q %d bytes", im.Encoding, len(im.Bytes))
	}
	// An empty image is allowed, with no encoding.
	if im := e.Steps[1].Observation["image"]; im.Encoding != "" || im.Bytes != nil || im.DType != Image {
		t.Errorf("image 1: %+v", im)
	}
	if te := e.Steps[0].Action["terminate_episode"]; tensorSig(te) != "int32[3]" || fmt.Sprint(te.Data) != "[0 1 0]" {
		t.Errorf("terminate_episode %s %v", tensorSig(te), te.Data)
	}

	bad := func(f Feature) []byte {
		c := Example{}
		for k, v := range ex {
			c[k] = v
		}
		c["steps/observation/clip_function_input/workspace_bounds"] = f
		return encodeExample(c, false)
	}
	for _, tc := range []struct {
		name string
		f    Feature
		want error
	}{
		{"8 values for [3,3]", Feature{Kind: FeatureBytes, Bytes: [][]byte{zlibBytes(t, float32LE(bounds0[:8]...)), zlibBytes(t, float32LE(bounds1...))}}, ErrShape},
		{"not zlib", Feature{Kind: FeatureBytes, Bytes: [][]byte{[]byte("garbage"), zlibBytes(t, float32LE(bounds1...))}}, ErrCorrupt},
		{"zlib bomb", Feature{Kind: FeatureBytes, Bytes: [][]byte{zlibBytes(t, make([]byte, 8<<20)), zlibBytes(t, float32LE(bounds1...))}}, ErrShape},
		{"one blob for two steps", Feature{Kind: FeatureBytes, Bytes: [][]byte{zlibBytes(t, float32LE(bounds0...))}}, ErrShape},
		{"floats instead of zlib", Feature{Kind: FeatureFloat, Floats: make([]float32, 18)}, ErrDType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEpisode(bad(tc.f), s, Source{Dataset: "kuka"})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "workspace_bounds") {
				t.Errorf("got %v, want an error wrapping %v naming the feature", err, tc.want)
			}
		})
	}
}

func TestFractalEpisodeKeys(t *testing.T) {
	s := mustSchema(t, "_oxe-metadata/fractal20220817_data/0.1.0/features.json")
	bounds := make([]float32, 18)
	for i := range bounds {
		bounds[i] = float32(i)
	}
	ex := Example{
		// is_last set twice and is_first absent: T comes from is_last and
		// the record is one episode regardless.
		"steps/is_last":                                  {Kind: FeatureInt64, Ints: []int64{1, 1}},
		"steps/observation/workspace_bounds":             {Kind: FeatureFloat, Floats: bounds},
		"steps/observation/natural_language_instruction": {Kind: FeatureBytes, Bytes: [][]byte{[]byte("open drawer"), []byte("open drawer")}},
		"steps/observation/image":                        {Kind: FeatureBytes, Bytes: [][]byte{{0x89, 'P', 'N', 'G', 0x0d}, {0xff, 0xd8, 0xff}}},
		"attributes/location_name":                       {Kind: FeatureBytes, Bytes: [][]byte{[]byte("mv-1")}},
		"attributes/location":                            {Kind: FeatureInt64, Ints: []int64{3}},
		"attributes/collection_mode":                     {Kind: FeatureInt64, Ints: []int64{2}},
		"aspects/success":                                {Kind: FeatureInt64, Ints: []int64{0}},
	}
	e, err := DecodeEpisode(encodeExample(ex, false), s, Source{Dataset: "fractal20220817_data"})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Steps) != 2 || !e.Steps[0].IsLast || !e.Steps[1].IsLast {
		t.Fatalf("steps %+v", e.Steps)
	}
	if wb := e.Steps[1].Observation["workspace_bounds"]; tensorSig(wb) != "float32[3 3]" || wb.Data[0] != 9 {
		t.Errorf("workspace_bounds %s %v", tensorSig(wb), wb.Data)
	}
	// The image encoding comes from the bytes, whatever features.json says.
	if e.Steps[0].Observation["image"].Encoding != "png" || e.Steps[1].Observation["image"].Encoding != "jpeg" {
		t.Errorf("image encodings %q %q", e.Steps[0].Observation["image"].Encoding, e.Steps[1].Observation["image"].Encoding)
	}
	if e.Location != "mv-1" || e.Metadata["attributes/collection_mode"] != int64(2) || e.Metadata["aspects/success"] != false ||
		e.Success == nil || *e.Success || e.Agent != "fractal20220817_data" || e.Steps[0].LanguageInstruction != "open drawer" {
		t.Errorf("episode: location %q success %v agent %q metadata %v", e.Location, e.Success, e.Agent, e.Metadata)
	}
}

func TestTacoDepth(t *testing.T) {
	s := mustSchema(t, "_oxe-metadata/taco_play/0.1.0/features.json")
	depth := make([]float32, 150*200)
	depth[len(depth)-1] = 2.5
	ex := Example{
		"steps/is_first":                 {Kind: FeatureInt64, Ints: []int64{1}},
		"steps/observation/depth_static": {Kind: FeatureFloat, Floats: depth},
		"steps/action/actions":           {Kind: FeatureFloat, Floats: make([]float32, 7)},
	}
	e, err := DecodeEpisode(encodeExample(ex, false), s, Source{Dataset: "taco_play"})
	if err != nil {
		t.Fatal(err)
	}
	d := e.Steps[0].Observation["depth_static"]
	if tensorSig(d) != "float32[150 200]" || len(d.Data) != 30000 || d.Data[29999] != 2.5 {
		t.Errorf("depth_static %s, %d values", tensorSig(d), len(d.Data))
	}
	ex["steps/observation/depth_static"] = Feature{Kind: FeatureFloat, Floats: depth[:29999]}
	if _, err := DecodeEpisode(encodeExample(ex, false), s, Source{Dataset: "taco_play"}); !errors.Is(err, ErrShape) {
		t.Errorf("short depth: %v, want ErrShape", err)
	}
}

func TestDepthImageAndAgent(t *testing.T) {
	// A float32 depth image is stored as a bit-cast PNG: its bytes stay
	// as they are. The metadata names the robot.
	s, err := ParseSchema([]byte(`{"featuresDict":{"features":{
		"steps":{"sequence":{"feature":{"featuresDict":{"features":{
			"is_first":{"tensor":{"shape":{},"dtype":"bool","encoding":"none"}},
			"observation":{"featuresDict":{"features":{
				"depth":{"image":{"shape":{"dimensions":["2","2","1"]},"dtype":"float32","encodingFormat":"png"}}}}},
			"action":{"tensor":{"shape":{"dimensions":["2"]},"dtype":"float64","encoding":"none"}}}}},"length":"-1"}},
		"episode_metadata":{"featuresDict":{"features":{
			"robot_name":{"text":{}},
			"lab":{"text":{}}}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	png := []byte{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 9, 9}
	ex := Example{
		"steps/is_first":              {Kind: FeatureInt64, Ints: []int64{1}},
		"steps/observation/depth":     {Kind: FeatureBytes, Bytes: [][]byte{png}},
		"steps/action":                {Kind: FeatureFloat, Floats: []float32{1, 2}},
		"episode_metadata/robot_name": {Kind: FeatureBytes, Bytes: [][]byte{[]byte("Franka.Panda #2")}},
		"episode_metadata/lab":        {Kind: FeatureBytes, Bytes: [][]byte{[]byte("Berkeley RAIL")}},
	}
	e, err := DecodeEpisode(encodeExample(ex, false), s, Source{Dataset: "my.dataset"})
	if err != nil {
		t.Fatal(err)
	}
	d := e.Steps[0].Observation["depth"]
	if d.DType != Image || d.Encoding != "png" || !bytes.Equal(d.Bytes, png) || fmt.Sprint(d.Shape) != "[2 2 1]" {
		t.Errorf("depth %+v", d)
	}
	if a := e.Steps[0].Action[""]; tensorSig(a) != "float64[2]" {
		t.Errorf("action %s", tensorSig(a))
	}
	if e.Agent != "franka_panda_2" || e.Location != "Berkeley RAIL" {
		t.Errorf("agent %q location %q", e.Agent, e.Location)
	}
	delete(ex, "episode_metadata/robot_name")
	if e, err = DecodeEpisode(encodeExample(ex, false), s, Source{Dataset: "My.Dataset v2"}); err != nil || e.Agent != "my_dataset_v2" {
		t.Errorf("agent from dataset name: %q %v", e.Agent, err)
	}
}

func TestSanitizeAgent(t *testing.T) {
	for in, want := range map[string]string{
		"bridge_dataset":       "bridge_dataset",
		"Franka.Panda #2":      "franka_panda_2",
		"  ..a>b*c  ":          "a_b_c",
		"fractal20220817_data": "fractal20220817_data",
		"UR5-e":                "ur5-e",
		"...":                  "",
	} {
		if got := SanitizeAgent(in); got != want {
			t.Errorf("SanitizeAgent(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStepCount(t *testing.T) {
	bridge := mustSchema(t, "bridge_dataset/1.0.0/features.json")
	for _, tc := range []struct {
		name string
		ex   Example
		s    *Schema
		want int
		err  error
	}{
		{"is_first", Example{"steps/is_first": {Kind: FeatureInt64, Ints: []int64{1, 0, 0}}}, bridge, 3, nil},
		{"reward only", Example{"steps/reward": {Kind: FeatureFloat, Floats: []float32{0, 1}}, "steps/action": {Kind: FeatureFloat, Floats: make([]float32, 14)}}, bridge, 2, nil},
		{"action only", Example{"steps/action": {Kind: FeatureFloat, Floats: make([]float32, 21)}}, bridge, 3, nil},
		{"action not whole steps", Example{"steps/action": {Kind: FeatureFloat, Floats: make([]float32, 20)}}, bridge, 0, ErrShape},
		{"images without schema", Example{"steps/observation/image": {Kind: FeatureBytes, Bytes: [][]byte{{0xff, 0xd8, 0xff}, {}}}}, nil, 2, nil},
		{"floats without schema", Example{"steps/observation/state": {Kind: FeatureFloat, Floats: make([]float32, 4)}}, nil, 0, ErrShape},
		{"no steps", Example{"episode_id": {Kind: FeatureBytes, Bytes: [][]byte{{}}}}, nil, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := stepCount(tc.ex, tc.s)
			if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Errorf("stepCount = %d, %v; want %d, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestDecodeEpisodeLimits(t *testing.T) {
	ex := Example{"steps/is_first": {Kind: FeatureInt64, Ints: make([]int64, DefaultMaxSteps+1)}}
	if _, err := DecodeEpisode(encodeExample(ex, false), nil, Source{Dataset: "x"}); !errors.Is(err, ErrShape) {
		t.Errorf("too many steps: %v", err)
	}
	ex = Example{
		"steps/is_first": {Kind: FeatureInt64, Ints: []int64{1, 0}},
		"steps/reward":   {Kind: FeatureFloat, Floats: []float32{1, 2, 3}},
	}
	if _, err := DecodeEpisode(encodeExample(ex, false), nil, Source{Dataset: "x"}); !errors.Is(err, ErrShape) {
		t.Errorf("3 rewards for 2 steps: %v", err)
	}
}

func TestEpisodesStops(t *testing.T) {
	ds, err := OpenDataset(samplePath("bridge_dataset/1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	n := 0
	if err := ds.Episodes(context.Background(), func(*Episode) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("callback error: %v after %d", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n = 0
	err = ds.Episodes(ctx, func(*Episode) error {
		n++
		if n == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 2 {
		t.Errorf("cancel: %v after %d", err, n)
	}
}

func TestEpisodeID(t *testing.T) {
	got := EpisodeID("bridge_dataset", "1.0.0", "train", "bridge_dataset-train.tfrecord-00000-of-00001", 0)
	if got != "bcabd5cf-c066-5d0b-895d-67dc8dd9f680" {
		t.Errorf("EpisodeID = %s", got)
	}
	if EpisodeNamespace.String() != "4921690f-0527-5589-b7ec-35c9de37fcf0" {
		t.Errorf("namespace changed: %s", EpisodeNamespace)
	}
}

func TestOpenRelativeVersionDir(t *testing.T) {
	abs, err := filepath.Abs(samplePath("bridge/1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(abs)
	ds, err := OpenDataset(".")
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != "bridge" || ds.Version != "1.0.0" {
		t.Errorf("identity %q %q", ds.Name, ds.Version)
	}
	if _, err := OpenDatasetOptions(DatasetOptions{Dir: ".", Splits: []string{"test"}}); err == nil || !strings.Contains(err.Error(), "split test") {
		t.Errorf("unknown split: %v", err)
	}
}

func TestDecodedShapesAreNotTheSchemas(t *testing.T) {
	s := mustSchema(t, "bridge_dataset/1.0.0/features.json")
	e, err := DecodeEpisode(bridgeRecords(t, 1)[0], s, Source{Dataset: "bridge_dataset"})
	if err != nil {
		t.Fatal(err)
	}
	e.Steps[0].Observation["state"].Shape[0] = 99
	e.Steps[0].Observation["image_0"].Shape[0] = 99
	for _, p := range []string{"steps/observation/state", "steps/observation/image_0"} {
		if l, _ := s.Leaf(p); l.Shape[0] == 99 {
			t.Errorf("%s: changing a decoded shape changed the schema", p)
		}
	}
}

func TestEmptyUntypedFeature(t *testing.T) {
	// TensorFlow writes a Feature with no list set for an empty list of
	// unknown type; without a schema it decodes to empty tensors.
	ex := Example{"steps/is_first": {Kind: FeatureInt64, Ints: []int64{1, 0}}, "steps/observation/x": {}}
	e, err := DecodeEpisode(encodeExample(ex, false), nil, Source{Dataset: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if x := e.Steps[1].Observation["x"]; len(x.Data) != 0 || fmt.Sprint(x.Shape) != "[0]" {
		t.Errorf("x = %+v", x)
	}
}

func TestDecodeRaw(t *testing.T) {
	for _, tc := range []struct {
		dtype DType
		in    []byte
		want  string
	}{
		{Bool, []byte{0, 1, 2}, "[0 1 1]"},
		{Uint8, []byte{0, 255}, "[0 255]"},
		{"int8", []byte{0xff, 0x7f}, "[-1 127]"},
		{"int16", []byte{0xfe, 0xff}, "[-2]"},
		{"uint16", []byte{0xff, 0xff}, "[65535]"},
		// float16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), +Inf, -0
		{"float16", []byte{0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00, 0x00, 0x7c, 0x00, 0x80}, "[1 -2 65504 5.960464477539063e-08 +Inf -0]"},
		{"bfloat16", []byte{0x80, 0x3f, 0x20, 0xc0}, "[1 -2.5]"},
		{Float32, float32LE(1.5, -0.25), "[1.5 -0.25]"},
		{Int32, []byte{0xfb, 0xff, 0xff, 0xff}, "[-5]"},
		{"uint32", []byte{0xff, 0xff, 0xff, 0xff}, "[4.294967295e+09]"},
		{Float64, binary.LittleEndian.AppendUint64(nil, math.Float64bits(2.5)), "[2.5]"},
		{Int64, binary.LittleEndian.AppendUint64(nil, uint64(0xfffffffffffffff9)), "[-7]"},
		{"uint64", binary.LittleEndian.AppendUint64(nil, 1<<40), "[1.099511627776e+12]"},
	} {
		got, err := decodeRaw(tc.in, tc.dtype)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("decodeRaw(%s) = %v, %v; want %s", tc.dtype, got, err, tc.want)
		}
	}
	if _, err := decodeRaw([]byte{1, 2, 3}, Float32); !errors.Is(err, ErrShape) {
		t.Errorf("3 bytes of float32: %v", err)
	}
	if _, err := decodeRaw([]byte{1}, "complex64"); !errors.Is(err, ErrDType) {
		t.Errorf("complex64: %v", err)
	}
}

func TestResolveShape(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		n     int
		want  string
	}{
		{nil, 1, "[]"},
		{[]int{7}, 7, "[7]"},
		{[]int{-1, 3}, 12, "[4 3]"},
		{[]int{-1, -1}, 6, "[6]"},
		{[]int{-1, 5}, 7, "[7]"},
	} {
		if got := resolveShape(tc.shape, tc.n); fmt.Sprint(got) != tc.want {
			t.Errorf("resolveShape(%v, %d) = %v, want %s", tc.shape, tc.n, got, tc.want)
		}
	}
}

func TestResolveVersionDir(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"1.0.0", "1.10.0", "1.2.0", "notes"} {
		if err := os.MkdirAll(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := resolveVersionDir(dir)
	if err != nil || filepath.Base(got) != "1.10.0" {
		t.Errorf("resolveVersionDir = %s, %v; want .../1.10.0", got, err)
	}
}

func TestZlibOpenShape(t *testing.T) {
	// A zlib tensor with an unknown dimension takes its size from the data.
	s, err := ParseSchema([]byte(`{"featuresDict":{"features":{"steps":{"sequence":{"feature":{"featuresDict":{"features":{
		"is_first":{"tensor":{"shape":{},"dtype":"bool","encoding":"none"}},
		"observation":{"tensor":{"shape":{"dimensions":["-1","2"]},"dtype":"int16","encoding":"zlib"}}}}},"length":"-1"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ex := Example{
		"steps/is_first":    {Kind: FeatureInt64, Ints: []int64{1}},
		"steps/observation": {Kind: FeatureBytes, Bytes: [][]byte{zlibBytes(t, []byte{1, 0, 2, 0, 3, 0, 0xff, 0xff})}},
	}
	e, err := DecodeEpisode(encodeExample(ex, false), s, Source{Dataset: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if o := e.Steps[0].Observation[""]; tensorSig(o) != "int32[2 2]" || fmt.Sprint(o.Data) != "[1 2 3 -1]" {
		t.Errorf("observation %s %v", tensorSig(o), o.Data)
	}
}
