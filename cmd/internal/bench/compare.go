package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"slices"
	"strings"
)

// ReadReport reads a report that Run's caller wrote with --json (a
// figure the run could not measure is null there, NaN here).
func ReadReport(file string) (*Report, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var r struct {
		Report
		Figures map[string]*float64 `json:"figures"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: not a bench run's JSON: %w", file, err)
	}
	if r.Preset == "" || len(r.Figures) == 0 {
		return nil, fmt.Errorf("%s: not a bench run's JSON: no preset or no figures", file)
	}
	rep := r.Report
	rep.Figures = make(map[string]float64, len(r.Figures))
	for k, v := range r.Figures {
		rep.Figures[k] = math.NaN()
		if v != nil {
			rep.Figures[k] = *v
		}
	}
	return &rep, nil
}

// LabeledReport is one run to compare and the group it belongs to.
type LabeledReport struct {
	Label  string
	Report *Report
}

// compareFigures are the figures Compare shows by default: the
// targets' and what explains them.
var compareFigures = []string{
	"ingest.steps_per_s",
	"ingest.bulk_cpu_us_per_step",
	"ingest.bulk_faults_per_step",
	"ingest.visibility_p50_ms",
	"ingest.visibility_p99_ms",
	"ingest.visibility_clear_of_marking_p99_ms",
	"ingest.paced_writer_busy",
	"ingest.paced_writer_cost_ratio",
	"ingest.paced_written_keys_per_step",
	"planner.in_process.p50_us",
	"planner.in_process.p99_us",
	"planner.in_process.best_of_2.p99_us",
	"planner.in_process.stalled_calls",
	"planner.in_process.hops2.p99_us",
	"planner.nats_msgpack.p99_us",
	"planner.nats_msgpack.overhead_p99_us",
	"planner.nats_msgpack.hops2.overhead_p99_us",
	"planner.nats.overhead_p99_us",
	"planner.nats_s2.overhead_p99_us",
	"planner.nats_s2.hops2.overhead_p99_us",
	"prefilter.recall_at_10",
	"reopen_s",
	"machine.mem_latency_ns",
	"machine.wake_p50_us",
	"machine.page_fault_us",
}

// Compare writes a Markdown table of runs side by side: a column per
// group of runs with the same label (in the order the labels first
// appear), each figure's median over the group and its range, and for
// each group after the first its median's change from the first's.
// patterns are figure names or path.Match patterns over them
// ("ingest.paced_writer_*"); none means compareFigures, as far as the
// runs measured them. Runs of different presets are refused: their
// figures do not compare.
func Compare(w io.Writer, runs []LabeledReport, patterns []string) error {
	if len(runs) == 0 {
		return fmt.Errorf("%w: no runs to compare", ErrInvalid)
	}
	preset := runs[0].Report.Preset
	var labels []string
	byLabel := map[string][]figures{}
	names := map[string]bool{}
	for _, r := range runs {
		if r.Report.Preset != preset {
			return fmt.Errorf("%w: runs of presets %s and %s do not compare", ErrInvalid, preset, r.Report.Preset)
		}
		if _, ok := byLabel[r.Label]; !ok {
			labels = append(labels, r.Label)
		}
		byLabel[r.Label] = append(byLabel[r.Label], r.Report.Figures)
		for k := range r.Report.Figures {
			names[k] = true
		}
	}
	rows, err := compareRows(names, patterns)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "preset %s; the median of each group's runs (min–max)\n\n", preset)
	head := []string{"figure"}
	for _, l := range labels {
		head = append(head, fmt.Sprintf("%s (%d)", l, len(byLabel[l])))
	}
	for _, l := range labels[1:] {
		head = append(head, l+" against "+labels[0])
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, name := range rows {
		groups := make([][]float64, len(labels))
		var all []float64
		for i, l := range labels {
			groups[i] = groupValues(byLabel[l], name)
			all = append(all, groups[i]...)
		}
		prec := precision(all)
		cells := []string{name + targetOf(name)}
		medians := make([]float64, len(labels))
		for i, v := range groups {
			medians[i] = median(v)
			cells = append(cells, groupCell(v, prec))
		}
		for i := range labels[1:] {
			cells = append(cells, change(medians[0], medians[i+1]))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	return nil
}

// compareRows expands patterns over the figures names (in the order
// given, each pattern's matches sorted, none twice). A pattern that
// matches nothing is an error; the defaults are skipped when absent.
func compareRows(names map[string]bool, patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		var rows []string
		for _, f := range compareFigures {
			if names[f] {
				rows = append(rows, f)
			}
		}
		return rows, nil
	}
	all := slices.Sorted(maps.Keys(names))
	var rows []string
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("%w: figure pattern %q: %v", ErrInvalid, p, err)
		}
		n := 0
		for _, k := range all {
			if ok, _ := path.Match(p, k); ok {
				n++
				if !slices.Contains(rows, k) {
					rows = append(rows, k)
				}
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: no figure of these runs is named %q", ErrInvalid, p)
		}
	}
	return rows, nil
}

// groupValues are the values of figure name in a group's runs, sorted
// (a run that did not measure it left out).
func groupValues(group []figures, name string) []float64 {
	var v []float64
	for _, f := range group {
		if x, ok := f[name]; ok && !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	slices.Sort(v)
	return v
}

// median of sorted values (NaN for none).
func median(v []float64) float64 {
	switch n := len(v); {
	case n == 0:
		return math.NaN()
	case n%2 == 0:
		return (v[n/2-1] + v[n/2]) / 2
	default:
		return v[n/2]
	}
}

// groupCell is a group's cell: the median of its sorted values, and
// their range when they differ ("—" for none), with prec decimals.
func groupCell(v []float64, prec int) string {
	if len(v) == 0 {
		return "—"
	}
	cell := commas(median(v), prec)
	if v[0] != v[len(v)-1] {
		cell += " (" + commas(v[0], prec) + "–" + commas(v[len(v)-1], prec) + ")"
	}
	return cell
}

// precision is the decimals a row of values calls for: none for counts
// and for values of 100 or more, one from 10, else three.
func precision(v []float64) int {
	big, counts := 0.0, true
	for _, x := range v {
		big = max(big, math.Abs(x))
		counts = counts && x == math.Trunc(x)
	}
	switch {
	case counts || big >= 100:
		return 0
	case big >= 10:
		return 1
	default:
		return 3
	}
}

// change is b's change from a, in percent.
func change(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || a == 0 {
		return "—"
	}
	return fmt.Sprintf("%+.1f%%", 100*(b-a)/math.Abs(a))
}

// targetOf names the target of figure name, if it has one.
func targetOf(name string) string {
	for _, t := range targets {
		if t.figure == name {
			op := "≤"
			if t.op == ">=" {
				op = "≥"
			}
			return fmt.Sprintf(" (target %s %s)", op, commas(t.want, precision([]float64{t.want})))
		}
	}
	return ""
}
