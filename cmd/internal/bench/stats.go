package bench

import (
	"math"
	"slices"
	"time"
)

// dist collects samples of one figure.
type dist struct {
	v      []float64
	sorted bool
}

func (d *dist) add(x float64) { d.v = append(d.v, x); d.sorted = false }

func (d *dist) addDur(x time.Duration, unit time.Duration) { d.add(float64(x) / float64(unit)) }

func (d *dist) n() int { return len(d.v) }

// pct is the nearest-rank percentile p (0-100); NaN without samples.
func (d *dist) pct(p float64) float64 {
	if len(d.v) == 0 {
		return math.NaN()
	}
	if !d.sorted {
		slices.Sort(d.v)
		d.sorted = true
	}
	i := int(math.Ceil(p/100*float64(len(d.v)))) - 1
	return d.v[min(max(i, 0), len(d.v)-1)]
}

func (d *dist) mean() float64 {
	if len(d.v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range d.v {
		s += x
	}
	return s / float64(len(d.v))
}

// put records the p50, p95 and p99 (and max) of d under prefix.
func (f figures) put(prefix string, d *dist, unit string) {
	f[prefix+"p50_"+unit] = d.pct(50)
	f[prefix+"p95_"+unit] = d.pct(95)
	f[prefix+"p99_"+unit] = d.pct(99)
	f[prefix+"max_"+unit] = d.pct(100)
}

// figures are a run's results by plain name (see the package doc).
type figures map[string]float64
