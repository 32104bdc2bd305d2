// Package plannertest checks planner answers the way an outside
// consumer reads them, for the planner's and the daemon's tests (it
// imports testing, like httptest):
//
//   - [ParseTurtle] parses Turtle with an independent RDF parser,
//     rdflib (Debian's python3-rdflib). Without rdflib it skips, unless
//     CTXGRAPH_REQUIRE_RDFLIB is set (CI and `make test` set it after
//     installing the package), when it fails.
//   - [ParseCypher] lexes and parses the openCypher the cypher format
//     writes, strictly.
package plannertest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
)

//go:embed rdfcheck.py
var script string

// TurtleResult is what rdflib made of one document.
type TurtleResult struct {
	// Error is the parser's complaint; empty when the document parsed.
	Error string `json:"error"`
	// Triples is the number of triples in the graph.
	Triples int `json:"triples"`
	// Facts are the asserted facts, sorted: [node, "type", class],
	// [node, relation IRI, node] and [edge, "contradicts", edge].
	Facts [][3]string `json:"facts"`
	// Edges maps each edge resource's IRI to its ctx: properties and
	// their values (sorted); "provenance" lists each record's fields.
	Edges map[string]map[string][]string `json:"edges"`
	// Names maps each node IRI to its ctx:name values.
	Names map[string][]string `json:"names"`
}

// python returns an interpreter that imports rdflib, or "".
func python() string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import rdflib").Run() == nil {
			return p
		}
	}
	return ""
}

// ParseTurtle parses every document with rdflib, in one interpreter run.
func ParseTurtle(tb testing.TB, docs ...string) []TurtleResult {
	tb.Helper()
	py := python()
	if py == "" {
		if os.Getenv("CTXGRAPH_REQUIRE_RDFLIB") != "" {
			tb.Fatal("rdflib is required (CTXGRAPH_REQUIRE_RDFLIB is set) but no python3 imports it: apt-get install python3-rdflib")
		}
		tb.Skip("python3-rdflib is not installed (apt-get install python3-rdflib; make test does it)")
	}
	in, err := json.Marshal(docs)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("rdflib check: %v\n%s", err, stderr.String())
	}
	var res []TurtleResult
	if err := json.Unmarshal(out, &res); err != nil {
		tb.Fatalf("rdflib check output: %v\n%s", err, out)
	}
	if len(res) != len(docs) {
		tb.Fatalf("rdflib check: %d results for %d documents", len(res), len(docs))
	}
	return res
}
