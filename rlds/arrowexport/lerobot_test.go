package arrowexport_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/parquet/file"

	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport/arrowexporttest"
)

func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// exportLeRobot exports st's steps to a LeRobot directory.
func exportLeRobot(t *testing.T, fx *fixture, o arrowexport.Options) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lerobot")
	w := &arrowexport.LeRobotWriter{Dir: dir}
	o.Table = arrowexport.TableSteps
	if _, err := arrowexport.Run(context.Background(), fx.st, o, w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLeRobotLayout(t *testing.T) {
	fx := newFixture(t)
	dir := exportLeRobot(t, fx, arrowexport.Options{BatchRows: 3})
	want := arrowexporttest.WantSteps(arrow.NewSchema(nil, nil), fx.msgs)

	info := readJSON(t, filepath.Join(dir, "meta", "info.json"))
	if info["codebase_version"] != arrowexport.LeRobotVersion || info["total_episodes"] != 4.0 || info["total_frames"] != 32.0 || info["fps"] != 2.0 {
		t.Errorf("info.json: %v", info)
	}
	feats := info["features"].(map[string]any)
	state := feats["observation.state"].(map[string]any)
	if !slices.Equal(state["names"].([]any), []any{"gripper", "state_0", "state_1", "state_2", "state_3", "state_4", "state_5", "state_6"}) {
		t.Errorf("observation.state names %v", state["names"])
	}
	for _, name := range []string{"action", "timestamp", "frame_index", "episode_index", "index", "task_index"} {
		if feats[name] == nil {
			t.Errorf("info.json lacks feature %s", name)
		}
	}
	tasks := readJSONL(t, filepath.Join(dir, "meta", "tasks.jsonl"))
	eps := readJSONL(t, filepath.Join(dir, "meta", "episodes.jsonl"))
	if len(eps) != 4 || len(tasks) == 0 {
		t.Fatalf("%d episodes, %d tasks", len(eps), len(tasks))
	}
	if n := len(readJSONL(t, filepath.Join(dir, "meta", "episodes_stats.jsonl"))); n != 4 {
		t.Errorf("%d episode stats, want 4", n)
	}
	stats := readJSON(t, filepath.Join(dir, "meta", "stats.json"))
	if c := stats["frame_index"].(map[string]any)["count"].([]any)[0]; c != 32.0 {
		t.Errorf("stats count %v, want 32", c)
	}

	index := int64(0)
	for i, ep := range eps {
		epID := ep["ctxgraph_episode_id"].(string)
		path := filepath.Join(dir, "data", "chunk-000", "episode_"+pad6(i)+".parquet")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, recs := arrowexporttest.Read(t, arrowexport.FormatParquet, b)
		rec := recs[0]
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		if rec.NumRows() != int64(ep["length"].(float64)) {
			t.Errorf("episode %d: %d rows, length %v", i, rec.NumRows(), ep["length"])
		}
		st, act := col("observation.state").(*array.FixedSizeList), col("action").(*array.FixedSizeList)
		fi, ei, ix, ti := col("frame_index").(*array.Int64), col("episode_index").(*array.Int64), col("index").(*array.Int64), col("task_index").(*array.Int64)
		ts := col("timestamp").(*array.Float32)
		for r := 0; r < int(rec.NumRows()); r++ {
			w := want[arrowexporttest.StepKey(epID, r)]
			gotState := st.ListValues().(*array.Float32).Float32Values()[r*8 : r*8+8]
			wantState := append(f32s(w.Observation["gripper"].Data), f32s(w.Observation["state"].Data)...)
			if !slices.Equal(gotState, wantState) {
				t.Errorf("episode %s frame %d state %v, want %v", epID, r, gotState, wantState)
			}
			if got := act.ListValues().(*array.Float32).Float32Values()[r*7 : r*7+7]; !slices.Equal(got, f32s(w.Action[""].Data)) {
				t.Errorf("episode %s frame %d action %v", epID, r, got)
			}
			if fi.Value(r) != int64(r) || ei.Value(r) != int64(i) || ix.Value(r) != index || ts.Value(r) != float32(float64(r)/2) {
				t.Errorf("episode %d frame %d: frame_index %d episode_index %d index %d timestamp %v", i, r, fi.Value(r), ei.Value(r), ix.Value(r), ts.Value(r))
			}
			if task := tasks[ti.Value(r)]["task"]; task != w.LanguageInstruction {
				t.Errorf("frame %d task %v, want %q", r, task, w.LanguageInstruction)
			}
			index++
		}
		pf, err := file.NewParquetReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if md := pf.MetaData().KeyValueMetadata().FindValue("huggingface"); md == nil || !json.Valid([]byte(*md)) {
			t.Errorf("episode %d: no Hugging Face features metadata", i)
		}
		pf.Close()
	}
}

func pad6(i int) string {
	s := "000000" + itoa(i)
	return s[len(s)-6:]
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
