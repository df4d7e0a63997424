package main

import (
	"math"
	"testing"
)

var nan = math.NaN()

// A row is its median and spread, over the runs that produced a figure.
func TestSpreadIsMedianMinMaxOfTheFigures(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []float64
		want Spread
	}{
		{"none", nil, Spread{}},
		{"one", []float64{3}, Spread{Median: 3, Min: 3, Max: 3, N: 1}},
		{"odd, unsorted", []float64{5, 1, 4, 2, 3}, Spread{Median: 3, Min: 1, Max: 5, N: 5}},
		{"even: mean of the middle two", []float64{4, 1, 3, 2}, Spread{Median: 2.5, Min: 1, Max: 4, N: 4}},
		{"missing figures left out", []float64{nan, 7, nan, 9, 8}, Spread{Median: 8, Min: 7, Max: 9, N: 3}},
		{"all missing", []float64{nan, nan}, Spread{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := spreadOf(c.in); got != c.want {
				t.Errorf("spreadOf(%v) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

// A ratio is the median of the ratios of runs in the same round, not the
// ratio of the medians: a slow round slows both of its runs.
func TestRatioIsTheMedianOfSameRoundRatios(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b []float64
		want Spread
	}{
		{"same round pairs", []float64{10, 20, 30}, []float64{5, 10, 10}, Spread{Median: 2, Min: 2, Max: 3, N: 3}},
		// Medians 20 and 10 would say 2; the rounds say 1 each.
		{"not the ratio of medians", []float64{10, 20, 40}, []float64{10, 20, 40}, Spread{Median: 1, Min: 1, Max: 1, N: 3}},
		{"a round without one figure is skipped", []float64{10, nan, 30}, []float64{10, 10, 10}, Spread{Median: 2, Min: 1, Max: 3, N: 2}},
		{"a zero divisor is skipped", []float64{10, 10}, []float64{0, 5}, Spread{Median: 2, Min: 2, Max: 2, N: 1}},
		{"lengths differ: the common rounds", []float64{4, 6, 8}, []float64{2, 2}, Spread{Median: 2.5, Min: 2, Max: 3, N: 2}},
		{"nothing to compare", []float64{1}, nil, Spread{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := spreadRatio(c.a, c.b); got != c.want {
				t.Errorf("spreadRatio(%v, %v) = %+v, want %+v", c.a, c.b, got, c.want)
			}
		})
	}
}

// A goal is met by the median, and never by a ratio without figures.
func TestGoalIsJudgedOnTheMedian(t *testing.T) {
	for _, c := range []struct {
		s     Spread
		op    string
		limit float64
		met   bool
	}{
		{Spread{Median: 0.8, Min: 0.5, Max: 0.9, N: 5}, ">=", 0.8, true},
		{Spread{Median: 0.79, Min: 0.5, Max: 2, N: 5}, ">=", 0.8, false},
		{Spread{Median: 1.5, Min: 1, Max: 3, N: 5}, "<=", 1.5, true},
		{Spread{Median: 1.6, Min: 1, Max: 3, N: 5}, "<=", 1.5, false},
		{Spread{}, "<=", 1.5, false},
	} {
		p := PairRatio{Name: "x", Ratio: c.s}.withGoal(c.op, c.limit)
		if p.Met == nil || *p.Met != c.met || p.Goal == "" {
			t.Errorf("%+v %s %g: met %v, goal %q; want met %v", c.s, c.op, c.limit, p.Met, p.Goal, c.met)
		}
	}
}
