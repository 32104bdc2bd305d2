package bench

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func reportOf(preset string, f figures) *Report { return &Report{Preset: preset, Figures: f} }

// row returns the table row of figure name (its cells trimmed), failing
// the test if there is none.
func row(t *testing.T, table, name string) []string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) > 1 && strings.HasPrefix(strings.TrimSpace(cells[0]), name) {
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			return cells
		}
	}
	t.Fatalf("no row %s in:\n%s", name, table)
	return nil
}

func TestCompareGroupsByLabel(t *testing.T) {
	runs := []LabeledReport{
		{"before", reportOf("medium", figures{"ingest.steps_per_s": 5000, "reopen_s": 0.8, "x.only_before": 1})},
		{"after", reportOf("medium", figures{"ingest.steps_per_s": 6000, "reopen_s": 0.7})},
		{"before", reportOf("medium", figures{"ingest.steps_per_s": 5400, "reopen_s": 0.8})},
		{"after", reportOf("medium", figures{"ingest.steps_per_s": 6600, "reopen_s": math.NaN()})},
		{"before", reportOf("medium", figures{"ingest.steps_per_s": 4600, "reopen_s": 0.8})},
	}
	var b bytes.Buffer
	if err := Compare(&b, runs, nil); err != nil {
		t.Fatal(err)
	}
	table := b.String()
	if !strings.Contains(table, "| figure | before (3) | after (2) | after against before |") {
		t.Errorf("header:\n%s", table)
	}
	// The median of 5,000, 5,400 and 4,600; of 6,000 and 6,600 the mean
	// of the two; the change between the medians.
	got := row(t, table, "ingest.steps_per_s")
	want := []string{"ingest.steps_per_s (target ≥ 20,000)", "5,000 (4,600–5,400)", "6,300 (6,000–6,600)", "+26.0%"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("steps/s row %q, want %q", got, want)
	}
	// Equal runs show no range; a run that did not measure a figure
	// (NaN) is left out of its group's median.
	got = row(t, table, "reopen_s")
	want = []string{"reopen_s (target ≤ 5)", "0.800", "0.700", "-12.5%"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("reopen row %q, want %q", got, want)
	}
	if strings.Contains(table, "x.only_before") {
		t.Errorf("a figure outside the defaults was shown:\n%s", table)
	}
}

func TestCompareFigurePatterns(t *testing.T) {
	runs := []LabeledReport{
		{"a", reportOf("small", figures{"ingest.paced_writer_apply_us_per_step": 90, "ingest.paced_writer_busy": 0.98, "reopen_s": 1})},
		{"b", reportOf("small", figures{"ingest.paced_writer_apply_us_per_step": 99, "reopen_s": 2})},
	}
	var b bytes.Buffer
	if err := Compare(&b, runs, []string{"reopen_s", "ingest.paced_writer_*", "reopen_s"}); err != nil {
		t.Fatal(err)
	}
	table := b.String()
	for _, name := range []string{"reopen_s", "ingest.paced_writer_apply_us_per_step", "ingest.paced_writer_busy"} {
		if n := strings.Count(table, "| "+name); n != 1 {
			t.Errorf("%s shown %d times:\n%s", name, n, table)
		}
	}
	if !strings.Contains(table, "| ingest.paced_writer_busy | 0.980 | — | — |") {
		t.Errorf("a figure one group lacks:\n%s", table)
	}
	if i, j := strings.Index(table, "| reopen_s"), strings.Index(table, "| ingest.paced_writer_apply"); i > j {
		t.Errorf("rows not in the patterns' order:\n%s", table)
	}
	for _, bad := range []string{"ingest.nothing_*", "["} {
		if err := Compare(&b, runs, []string{bad}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad) {
			t.Errorf("pattern %q: %v", bad, err)
		}
	}
}

func TestCompareRefusesMixedPresets(t *testing.T) {
	runs := []LabeledReport{{"a", reportOf("small", figures{"reopen_s": 1})}, {"b", reportOf("medium", figures{"reopen_s": 2})}}
	err := Compare(&bytes.Buffer{}, runs, nil)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "small") || !strings.Contains(err.Error(), "medium") {
		t.Errorf("mixed presets: %v", err)
	}
	if err := Compare(&bytes.Buffer{}, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("no runs: %v", err)
	}
}

// TestReadReportReadsWriteJSON: a report written by WriteJSON reads back
// with its figures, one the run could not measure (null) as NaN; a file
// that is not a run's JSON is refused, naming it.
func TestReadReportReadsWriteJSON(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "run.json")
	rep := &Report{Preset: "micro", Seed: 3, Figures: figures{"ingest.steps_per_s": 1234.5, "reopen_s": math.NaN()}}
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(file)
	if err != nil {
		t.Fatal(err)
	}
	if got.Preset != "micro" || got.Seed != 3 || got.Figures["ingest.steps_per_s"] != 1234.5 || !math.IsNaN(got.Figures["reopen_s"]) {
		t.Errorf("read back %+v", got)
	}
	for name, body := range map[string]string{"garbage.json": "not json", "other.json": `{"name": "x"}`} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadReport(p); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
