package arrowexport_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport/arrowexporttest"
)

// jsDir holds the independent reader: check.mjs and its npm packages
// (apache-arrow, hyparquet), installed by `make test` (npm ci).
func jsDir() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "testdata", "js")
}

type jsValue struct {
	Column string `json:"column"`
	Row    int    `json:"row"`
	Value  any    `json:"value"`
}

type jsFile struct {
	Path    string    `json:"path"`
	Format  string    `json:"format"`
	Rows    int64     `json:"rows"`
	Columns []string  `json:"columns"`
	Values  []jsValue `json:"values"`
}

// jsonValue is row i of a as a JSON value both readers agree on, or ok
// false for types the check leaves out (times, maps, structs, binary).
func jsonValue(a arrow.Array, i int) (any, bool) {
	if a.IsNull(i) {
		return nil, true
	}
	switch v := a.(type) {
	case *array.String:
		return v.Value(i), true
	case *array.Float64:
		return v.Value(i), true
	case *array.Float32:
		return float64(v.Value(i)), true
	case *array.Int64:
		return v.Value(i), true
	case *array.Uint64:
		return v.Value(i), true
	case *array.Boolean:
		return v.Value(i), true
	case array.ListLike:
		lo, hi := v.ValueOffsets(i)
		out := []any{}
		for j := lo; j < hi; j++ {
			x, ok := jsonValue(v.ListValues(), int(j))
			if !ok {
				return nil, false
			}
			out = append(out, x)
		}
		return out, true
	}
	return nil, false
}

// TestIndependentReader exports every table in the Arrow IPC file and
// stream formats and Parquet, and has a second implementation of both
// (apache-arrow and hyparquet, on Node.js) check row counts, column
// names and values: the first, a middle and the last row of every column
// of a plain type, as arrow/go reads them.
func TestIndependentReader(t *testing.T) {
	skip := t.Skipf
	if os.Getenv("CI") != "" {
		skip = t.Fatalf // CI installs node and runs `make test`, which runs npm ci: the check must run
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is not installed; `make test` runs this check where it is")
		return
	}
	if _, err := os.Stat(filepath.Join(jsDir(), "node_modules", "hyparquet")); err != nil {
		skip("npm packages missing (run `npm ci` in %s, as `make test` does): %v", jsDir(), err)
		return
	}
	fx := newFixture(t)
	dir := t.TempDir()
	var m struct {
		Files []jsFile `json:"files"`
	}
	for _, table := range arrowexport.Tables {
		for _, f := range arrowexporttest.SingleFileFormats {
			b := arrowexporttest.Export(t, fx.st, arrowexport.Options{Table: table, BatchRows: 7}, f)
			path := filepath.Join(dir, string(table)+f.Ext())
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			schema, recs := arrowexporttest.Read(t, f, b)
			jf := jsFile{Path: path, Format: string(f), Rows: arrowexporttest.Rows(recs)}
			for _, fl := range schema.Fields() {
				jf.Columns = append(jf.Columns, fl.Name)
			}
			// Rows to check, across batches: first, middle, last.
			var base int
			for _, rec := range recs {
				for _, row := range []int{0, int(jf.Rows / 2), int(jf.Rows - 1)} {
					i := row - base
					if i < 0 || i >= int(rec.NumRows()) {
						continue
					}
					for c, col := range rec.Columns() {
						if v, ok := jsonValue(col, i); ok {
							jf.Values = append(jf.Values, jsValue{Column: schema.Field(c).Name, Row: row, Value: v})
						}
					}
				}
				base += int(rec.NumRows())
			}
			if len(jf.Values) == 0 || jf.Rows == 0 {
				t.Fatalf("%s: nothing to check", path)
			}
			m.Files = append(m.Files, jf)
		}
	}
	// And a LeRobot episode file, as a LeRobot loader would open it.
	lr := exportLeRobot(t, fx, arrowexport.Options{})
	ep0 := filepath.Join(lr, "data", "chunk-000", "episode_000000.parquet")
	b, err := os.ReadFile(ep0)
	if err != nil {
		t.Fatal(err)
	}
	schema, recs := arrowexporttest.Read(t, arrowexport.FormatParquet, b)
	jf := jsFile{Path: ep0, Format: string(arrowexport.FormatParquet), Rows: arrowexporttest.Rows(recs)}
	for _, fl := range schema.Fields() {
		jf.Columns = append(jf.Columns, fl.Name)
	}
	for c, col := range recs[0].Columns() {
		for _, row := range []int{0, int(jf.Rows - 1)} {
			if v, ok := jsonValue(col, row); ok {
				jf.Values = append(jf.Values, jsValue{Column: schema.Field(c).Name, Row: row, Value: v})
			}
		}
	}
	m.Files = append(m.Files, jf)

	manifest := filepath.Join(dir, "manifest.json")
	js, _ := json.MarshalIndent(m, "", " ")
	if err := os.WriteFile(manifest, js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join(jsDir(), "check.mjs"), manifest)
	out, err := cmd.CombinedOutput()
	t.Logf("node check.mjs: %s", out)
	if err != nil {
		t.Fatalf("the independent reader disagrees: %v", err)
	}
}
