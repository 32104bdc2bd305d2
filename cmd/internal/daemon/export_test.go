package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/rlds"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
	"github.com/ctxgraph/ctxgraph/rlds/arrowexport/arrowexporttest"
)

// getExport fetches GET /v1/export and returns the body, checking the
// status and that the trailer's row count arrived.
func getExport(t *testing.T, d *Daemon, q url.Values) []byte {
	t.Helper()
	resp, body := get(t, d, "", "/v1/export?"+q.Encode())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/export?%s: %s: %s", q.Encode(), resp.Status, body)
	}
	if _, err := strconv.Atoi(resp.Trailer.Get(HeaderExportRows)); err != nil {
		t.Errorf("no %s trailer: %v", HeaderExportRows, resp.Trailer)
	}
	return body
}

func exportQuery(table arrowexport.Table, f arrowexport.Format, extra ...string) url.Values {
	q := url.Values{"table": {string(table)}, "format": {string(f)}, "batch_rows": {"5"}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Add(extra[i], extra[i+1])
	}
	return q
}

// TestExportRoundTripOverHTTP ingests the testdata episodes through
// NATS, exports every table in every single-file format over HTTP, reads
// each back with arrow/go and compares every value with the store and
// the messages the robots sent.
func TestExportRoundTripOverHTTP(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	msgs := readMessages(t, "episodes.jsonl")
	c.publishAll(msgs)
	c.waitApplied()
	want := arrowexporttest.StoreRecords(t, d.Store(), particle.DefaultNamespace)
	for _, f := range arrowexporttest.SingleFileFormats {
		for _, table := range arrowexport.Tables {
			t.Run(string(f)+"/"+string(table), func(t *testing.T) {
				schema, recs := arrowexporttest.Read(t, f, getExport(t, d, exportQuery(table, f)))
				if table == arrowexport.TableSteps {
					if n := arrowexporttest.CheckSteps(t, schema, recs, msgs, want.Edges); n == 0 {
						t.Error("no step has graph context")
					}
					return
				}
				arrowexporttest.CheckGraph(t, table, schema, recs, want)
			})
		}
	}
	// Filters: one agent's steps, one episode's.
	_, recs := arrowexporttest.Read(t, arrowexport.FormatArrowStream, getExport(t, d,
		exportQuery(arrowexport.TableSteps, arrowexport.FormatArrowStream, "agent", "ur5-alpha")))
	for _, r := range arrowexporttest.Decode(t, recs, arrowexport.DecodeSteps) {
		if r.Agent != "ur5-alpha" {
			t.Errorf("agent filter let %s through", r.Agent)
		}
	}
	_, recs = arrowexporttest.Read(t, arrowexport.FormatArrowStream, getExport(t, d,
		exportQuery(arrowexport.TableSteps, arrowexport.FormatArrowStream, "episode", "ep-beta-0001", "since", "2026-01-01T10:20:01Z")))
	if n := arrowexporttest.Rows(recs); n != 6 {
		t.Errorf("ep-beta-0001 since its third step: %d rows, want 6", n)
	}

	// Bad requests are JSON errors, before any Arrow byte.
	for _, q := range []string{"table=cats", "format=csv", "since=yesterday-ish", "min_salience=2", "since=2026-02-01&until=2026-01-01"} {
		resp, err := http.Get("http://" + d.HTTPAddr() + "/v1/export?" + q)
		if err != nil {
			t.Fatal(err)
		}
		var eb ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || err != nil || eb.Error.Code != "invalid_request" {
			t.Errorf("%s: %s %+v %v, want 400 invalid_request", q, resp.Status, eb, err)
		}
	}
}

// TestExportOmitsWhatARoleIsDenied exports as the visitor role, denied
// the fixture -calibration_offset-> hole edge: no table holds it, no
// step's context and no episode's edge list names it; an operator's
// export has it.
func TestExportOmitsWhatARoleIsDenied(t *testing.T) {
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	c.publishAll(readMessages(t, "episodes.jsonl"))
	c.waitApplied()
	var denied string
	d.Store().Read(func(r particle.Reader) {
		r.Edges(func(e *particle.Edge) bool {
			if e.Assertion != nil && e.Assertion.Predicate == "calibration_offset" {
				denied = e.ID
			}
			return true
		})
	})
	if denied == "" {
		t.Fatal("testdata lacks the fixture -calibration_offset-> hole edge")
	}
	stream := arrowexport.FormatArrowStream
	for _, role := range []string{"visitor", "operator"} {
		f := arrowexport.FormatParquet
		_, recs := arrowexporttest.Read(t, f, getExport(t, d, exportQuery(arrowexport.TableEdges, f, "role", role)))
		edges := arrowexporttest.Decode(t, recs, arrowexport.DecodeEdges)
		has := slices.ContainsFunc(edges, func(e arrowexport.EdgeRow) bool { return e.ID == denied })
		if has != (role == "operator") {
			t.Errorf("role %s: edges export holds the denied edge: %v", role, has)
		}
		if role == "visitor" && len(edges) == 0 {
			t.Error("the visitor sees no edge at all")
		}

		_, recs = arrowexporttest.Read(t, stream, getExport(t, d, exportQuery(arrowexport.TableSteps, stream, "role", role)))
		inContext := false
		for _, r := range arrowexporttest.Decode(t, recs, arrowexport.DecodeSteps) {
			inContext = inContext || slices.Contains(r.EdgeIDs, denied)
		}
		if inContext != (role == "operator") {
			t.Errorf("role %s: a step's context names the denied edge: %v", role, inContext)
		}

		_, recs = arrowexporttest.Read(t, stream, getExport(t, d, exportQuery(arrowexport.TableEpisodes, stream, "role", role)))
		inEpisode := false
		for _, e := range arrowexporttest.Decode(t, recs, arrowexport.DecodeEpisodes) {
			inEpisode = inEpisode || slices.Contains(e.Edges, denied)
		}
		if inEpisode != (role == "operator") {
			t.Errorf("role %s: an episode's edge list names the denied edge: %v", role, inEpisode)
		}
	}
}

// samplesDir holds the RLDS sample datasets (../shared beside the repo).
func samplesDir() string { return filepath.Join(testdataDir(), "..", "..", "shared", "rlds-samples") }

// TestExportRoundTripRLDSSamples reads the RLDS sample datasets with the
// TFRecord reader, publishes their episodes as a controller would, and
// checks that the steps export holds every step with every feature
// (images as their JPEG or PNG bytes) as the dataset has it.
func TestExportRoundTripRLDSSamples(t *testing.T) {
	if _, err := os.Stat(samplesDir()); err != nil {
		t.Skipf("no RLDS samples: %v", err)
	}
	d := startDaemon(t, testConfig(t.TempDir()))
	c := connect(t, d)
	var msgs []*rlds.Message
	for _, dir := range []string{"bridge_dataset/1.0.0", "bridge/1.0.0"} {
		ds, err := rlds.OpenDatasetOptions(rlds.DatasetOptions{Dir: filepath.Join(samplesDir(), dir), Splits: []string{"train"}})
		if err != nil {
			t.Fatal(err)
		}
		err = ds.Episodes(context.Background(), func(e *rlds.Episode) error {
			msgs = append(msgs, e.Messages()...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	c.publishAll(msgs)
	c.waitApplied()
	for _, f := range arrowexporttest.SingleFileFormats {
		schema, recs := arrowexporttest.Read(t, f, getExport(t, d, exportQuery(arrowexport.TableSteps, f, "batch_rows", "64")))
		// The two datasets share no schema: each feature is a column, null
		// in the other dataset's steps; images are binary.
		images := 0
		for _, fl := range schema.Fields() {
			if dt, _ := fl.Metadata.GetValue(arrowexport.MetaDType); dt == string(rlds.Image) {
				images++
			}
		}
		if images == 0 {
			t.Errorf("%s: no image column in %v", f, schema)
		}
		arrowexporttest.CheckSteps(t, schema, recs, msgs, nil)
	}
}
