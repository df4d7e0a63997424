package main

import (
	"math"
	"slices"
)

// Repeated measurements. Every row of `passbench bare` and of the default
// comparison is measured several times, the rows taking turns (round 1 of
// every row, then round 2, ...), so that a slow minute of a shared machine
// lands on all of them alike. A row is reported as the median of its runs
// with their spread; a ratio between two rows as the median of the
// per-round ratios, since two runs of one round saw the same machine.

// Spread summarizes repeated figures of one row.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"` // how many figures (the rounds that produced one)
}

// spreadOf summarizes vals; NaNs (a round without a figure) are left out.
// The median of an even count is the mean of the two middle figures.
func spreadOf(vals []float64) Spread {
	v := make([]float64, 0, len(vals))
	for _, x := range vals {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Spread{}
	}
	slices.Sort(v)
	n := len(v)
	med := v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return Spread{Median: med, Min: v[0], Max: v[n-1], N: n}
}

// pairRatios returns a[i] ÷ b[i] for each round i, NaN where either figure
// is missing (NaN) or b[i] is not positive. a and b are indexed by round.
func pairRatios(a, b []float64) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		if math.IsNaN(a[i]) || math.IsNaN(b[i]) || b[i] <= 0 {
			out[i] = math.NaN()
			continue
		}
		out[i] = a[i] / b[i]
	}
	return out
}

// spreadRatio is the median (and spread) of the per-round ratios a ÷ b.
func spreadRatio(a, b []float64) Spread { return spreadOf(pairRatios(a, b)) }
