package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"
)

// compareSpec is the default comparison (passbench with no command).
type compareSpec struct {
	Duration time.Duration // per throughput run; 0 if Messages is set
	Messages int64         // per throughput run, instead of Duration
	Options                // rtt rounds (0: each transport's default), warm-up, timeout per run
	Payload  int
	Capacity int
	Repeat   int // runs of every row, the rows taking turns
	Batch    int // messages per batch call of the batch rows
	Hogs     int // CPU hogs of the busy-machine section; 0: no such section
}

// Defaults of the comparison: fourteen throughput rows and seven round
// trips, five turns each, take about a minute and forty seconds (an
// estimate: a minute and a half before the deque's two batch rows).
const (
	defaultCompareDuration = time.Second
	defaultCompareRepeat   = 5
	defaultCompareBatch    = 32
)

// tputRun is one throughput row of the comparison: one producer process
// and Consumers consumer processes; Batched rows use the ring's or the
// deque's batch calls (compareSpec.Batch), Loan rows the ring's loans.
type tputRun struct {
	Transport, Mode string
	Consumers       int
	Batched, Loan   bool
}

// The comparison's line-up: throughput with one producer and one consumer
// process each (the ring and the deque each also with batches; the deque
// once with two thieves, in block mode: three polling processes on two
// cores mostly measure the scheduler), then round trips, then, with
// --hogs, the busy machine.
var (
	compareThroughput = []tputRun{
		{Transport: "ring", Mode: modePoll, Consumers: 1}, {Transport: "ring", Mode: modeBlock, Consumers: 1},
		{Transport: "ring", Mode: modePoll, Consumers: 1, Batched: true}, {Transport: "ring", Mode: modeBlock, Consumers: 1, Batched: true},
		{Transport: "ring", Mode: modePoll, Consumers: 1, Loan: true},
		{Transport: bareTransport, Mode: modePoll, Consumers: 1},
		{Transport: "deque", Mode: modePoll, Consumers: 1}, {Transport: "deque", Mode: modeBlock, Consumers: 1},
		{Transport: "deque", Mode: modePoll, Consumers: 1, Batched: true}, {Transport: "deque", Mode: modeBlock, Consumers: 1, Batched: true},
		{Transport: "deque", Mode: modeBlock, Consumers: 2},
		{Transport: "uds", Mode: modeBlock, Consumers: 1}, {Transport: "pipe", Mode: modeBlock, Consumers: 1},
		{Transport: "chan", Mode: modeBlock, Consumers: 1},
	}
	compareRTT = [][2]string{{"ring", modePoll}, {"ring", modeBlock}, {bareTransport, modePoll},
		{"uds", modeBlock}, {"pipe", modeBlock}, {"spin", modePoll}, {"futex", modeBlock}}
	busyThroughput = []tputRun{{Transport: "ring", Mode: modeBlock, Consumers: 1},
		{Transport: "chan", Mode: modeBlock, Consumers: 1}, {Transport: "uds", Mode: modeBlock, Consumers: 1}}
)

// CompareReport is what the default comparison prints with --json.
type CompareReport struct {
	Envelope
	Repeat  int          `json:"repeat"`
	Hogs    int          `json:"hogs"`
	Rows    []CompareRow `json:"rows"`
	Runs    []Result     `json:"runs"`     // each row's median run
	AllRuns []Result     `json:"all_runs"` // every run, in the order made
	Ratios  []PairRatio  `json:"ratios"`
	Verdict []string     `json:"verdict"`
	CPU     CPUUse       `json:"cpu"`
	// Interrupted is set when a signal stopped the comparison: the other
	// fields then hold the runs that finished.
	Interrupted *Interruption `json:"interrupted,omitempty"`
}

// CompareRow summarizes one row's runs.
type CompareRow struct {
	Label      string  `json:"label"` // as in the tables: "ring/poll batch 32", "deque/block 1×2"
	Kind       string  `json:"kind"`  // throughput or rtt
	Transport  string  `json:"transport"`
	Mode       string  `json:"mode"`
	Hogs       int     `json:"hogs,omitempty"`         // the busy-machine section
	MsgsPerSec *Spread `json:"msgs_per_sec,omitempty"` // throughput
	P50Ns      *Spread `json:"p50_ns,omitempty"`       // rtt
	Lost       int64   `json:"lost"`                   // summed over the row's runs
	Duplicated int64   `json:"duplicated"`
	Corrupt    int64   `json:"corrupt"`
}

// runCompare runs the line-up Repeat times, the rows taking turns; it
// stops at the first failure. When ctx ends (Ctrl-C, SIGTERM) it stops
// too, but returns the report of the runs that finished, marked
// Interrupted, with an error wrapping errInterrupted: the caller prints
// both. When stdout is not a terminal, each run is announced on stderr
// (ui.stage): a piped comparison says what it is doing.
func runCompare(ctx context.Context, s compareSpec, u *ui) (rep CompareReport, err error) {
	if err := s.check(); err != nil {
		return rep, err
	}
	rep = CompareReport{Envelope: newEnvelope(compareFormat), Repeat: s.Repeat, Hogs: s.Hogs}
	before := sampleCPU()
	total := s.Repeat * (len(compareThroughput) + len(compareRTT))
	if s.Hogs > 0 {
		total += s.Repeat * len(busyThroughput)
	}
	runs := u.inSeries() // the runs' own stage lines would repeat ours
	n := 0
	stage := func(kind, label string, round, hogs int, length string) {
		n++
		busy := ""
		if hogs > 0 {
			busy = fmt.Sprintf(", %s beside", count(hogs, "CPU hog"))
		}
		u.stage("run %d/%d, round %d of %d: %s %s (%s%s)", n, total, round, s.Repeat, kind, label, length, busy)
	}
	// stopped ends the comparison at a failed run: an interruption keeps
	// the finished runs, anything else fails the comparison.
	stopped := func(kind, label string, round int, err error) error {
		if ctx.Err() == nil {
			return err
		}
		rep.Interrupted = &Interruption{Round: round, Kind: kind, Row: label, Cause: context.Cause(ctx).Error()}
		return fmt.Errorf("%w (%s) in run %d/%d, round %d of %d, %s %s: %s", errInterrupted, rep.Interrupted.Cause,
			n, total, round, s.Repeat, kind, label, finishedRuns(len(rep.AllRuns)))
	}
	tput := func(tm tputRun, round, hogs int) error {
		rs := s.runSpecOf(tm)
		label := (&Result{Kind: kindThroughput, Transport: tm.Transport, Mode: tm.Mode, Producers: 1,
			Consumers: tm.Consumers, Batch: rs.Batch, Loan: tm.Loan}).label()
		stage(kindThroughput, label, round, hogs, s.stageLength())
		r, err := runThroughput(ctx, rs, runs)
		if err == nil {
			err = failure(&r)
		}
		if err != nil {
			return stopped(kindThroughput, label, round, fmt.Errorf("%s/%s 1×%d: %w", tm.Transport, tm.Mode, tm.Consumers, err))
		}
		r.Round, r.Hogs = round, hogs
		rep.AllRuns = append(rep.AllRuns, r)
		return nil
	}
	// finish summarizes what was measured, all of it or up to an
	// interruption.
	finish := func(err error) (CompareReport, error) {
		if err != nil && (rep.Interrupted == nil || len(rep.AllRuns) == 0) {
			return rep, err
		}
		rep.CPU = cpuUseBetween(before, sampleCPU(), runtime.NumCPU())
		rep.summarize()
		return rep, err
	}
	for round := 1; round <= s.Repeat; round++ {
		for _, tm := range compareThroughput {
			if err := tput(tm, round, 0); err != nil {
				return finish(err)
			}
		}
		for _, tm := range compareRTT {
			rs := s.rttSpecOf(tm)
			label := (&Result{Kind: kindRTT, Transport: tm[0], Mode: tm[1]}).label()
			stage(kindRTT, label, round, 0, rttLength(rs))
			r, err := measureRTT(ctx, rs, runs)
			if err != nil {
				return finish(stopped(kindRTT, label, round, fmt.Errorf("rtt %s/%s: %w", tm[0], tm[1], err)))
			}
			r.Round = round
			rep.AllRuns = append(rep.AllRuns, r)
		}
	}
	if s.Hogs > 0 {
		// The hogs' own limit only matters if passbench dies without
		// killing them (they also watch their parent): every run of the
		// section may take its full timeout.
		h, err := startHogs(ctx, s.Hogs, s.Timeout*time.Duration(s.Repeat*len(busyThroughput)+1))
		if err != nil {
			return finish(stopped("busy machine", "starting the hogs", 1, err))
		}
		defer func() {
			// An interruption has killed the hogs already (their context
			// ended): that they "exited early" is no news then.
			if serr := h.stop(); rep.Interrupted == nil {
				err = errors.Join(err, serr)
			}
		}()
		for round := 1; round <= s.Repeat; round++ {
			for _, tm := range busyThroughput {
				if err := tput(tm, round, s.Hogs); err != nil {
					if rep.Interrupted == nil {
						err = fmt.Errorf("with %d hogs: %w", s.Hogs, err)
					}
					return finish(err)
				}
			}
		}
		if err := h.stop(); err != nil {
			return rep, err
		}
	}
	return finish(nil)
}

// errInterrupted says the comparison was stopped by a signal; the report
// beside it holds the runs that finished.
var errInterrupted = errors.New("interrupted")

// Interruption says where a comparison was stopped (CompareReport).
type Interruption struct {
	Round int    `json:"round"` // the round of the run that was cut short
	Kind  string `json:"kind"`  // its kind: throughput, rtt, or "busy machine" while starting the hogs
	Row   string `json:"row"`   // its row's label
	Cause string `json:"cause"` // "interrupt signal received", "terminated signal received"
}

// finishedRuns is "kept the 14 finished runs", or that there were none.
func finishedRuns(n int) string {
	switch n {
	case 0:
		return "no run had finished"
	case 1:
		return "printed the 1 finished run"
	}
	return fmt.Sprintf("printed the %d finished runs", n)
}

// rttLength says how long a round-trip row runs: "100000 round trips".
func rttLength(rs rttSpec) string {
	if _, rounds, err := rs.check(); err == nil {
		return fmt.Sprintf("%d round trips", rounds)
	}
	return "round trips"
}

// rowKey tells the comparison's rows apart.
type rowKey struct {
	kind, label string
	hogs        int
}

func keyOf(r *Result) rowKey { return rowKey{r.Kind, r.label(), r.Hogs} }

// figure is a run's main figure: msgs/s, or the round trip's p50.
func figure(r *Result) float64 {
	if r.Kind == kindRTT {
		return float64(r.Latency.P50)
	}
	return r.MsgsPerSec
}

// summarize fills Rows, Runs, Ratios and Verdict from AllRuns.
func (rep *CompareReport) summarize() {
	var keys []rowKey
	runs := map[rowKey][]*Result{}
	for i := range rep.AllRuns {
		r := &rep.AllRuns[i]
		k := keyOf(r)
		if _, ok := runs[k]; !ok {
			keys = append(keys, k)
		}
		runs[k] = append(runs[k], r)
	}
	rep.Rows, rep.Runs = nil, nil
	for _, k := range keys {
		rs := runs[k]
		vals := make([]float64, len(rs))
		row := CompareRow{Label: k.label, Kind: k.kind, Transport: rs[0].Transport, Mode: rs[0].Mode, Hogs: k.hogs}
		for i, r := range rs {
			vals[i] = figure(r)
			row.Lost += r.Lost
			row.Duplicated += r.Duplicated
			row.Corrupt += r.Corrupt
		}
		sp := spreadOf(vals)
		if k.kind == kindRTT {
			row.P50Ns = &sp
		} else {
			row.MsgsPerSec = &sp
		}
		rep.Rows = append(rep.Rows, row)
		rep.Runs = append(rep.Runs, *medianRun(rs))
	}
	rep.Ratios = compareRatios(rep)
	rep.Verdict = compareVerdict(rep)
}

// medianRun is the run whose figure is the median (the lower middle one
// of an even count): the row's representative in the tables and plots.
func medianRun(rs []*Result) *Result {
	s := slices.Clone(rs)
	slices.SortStableFunc(s, func(a, b *Result) int {
		switch fa, fb := figure(a), figure(b); {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	})
	return s[(len(s)-1)/2]
}

// series is a row's figure per round (NaN where the round has none).
func (rep *CompareReport) series(kind, label string, hogs int) []float64 {
	out := make([]float64, rep.Repeat)
	for i := range out {
		out[i] = math.NaN()
	}
	for i := range rep.AllRuns {
		r := &rep.AllRuns[i]
		if keyOf(r) == (rowKey{kind, label, hogs}) && r.Round >= 1 && r.Round <= rep.Repeat {
			out[r.Round-1] = figure(r)
		}
	}
	return out
}

// row returns the summary of a row, or nil.
func (rep *CompareReport) row(kind, label string, hogs int) *CompareRow {
	for i := range rep.Rows {
		if r := &rep.Rows[i]; r.Kind == kind && r.Label == label && r.Hogs == hogs {
			return r
		}
	}
	return nil
}

// Labels of the rows the ratios and the verdict name.
const (
	labelRingPoll  = "ring/poll"
	labelRingBlock = "ring/block"
	labelDequePoll = "deque/poll"
	labelBare      = "bare ring (reference, no crash safety)"
	labelFutex     = "futex ping-pong (sleeps every round)"
)

// ratioName is how ratios are named: "throughput ring/poll ÷ uds",
// "rtt p50 ring/poll ÷ spin", "busy (2 hogs) throughput ring/block ÷ chan".
func ratioName(kind, a, b string, hogs int) string {
	what := "throughput"
	if kind == kindRTT {
		what = "rtt p50"
	}
	if hogs > 0 {
		what = fmt.Sprintf("busy (%s) %s", count(hogs, "CPU hog"), what)
	}
	return fmt.Sprintf("%s %s ÷ %s", what, a, b)
}

// compareRatios sets the ring (poll) against every other row of its kind,
// each as the median of the rounds' ratios; the busy section sets
// ring/block against chan and uds, with the targets docs/bench.md states.
func compareRatios(rep *CompareReport) []PairRatio {
	var out []PairRatio
	ratio := func(kind, a, b string, hogs int) PairRatio {
		return PairRatio{Name: ratioName(kind, a, b, hogs),
			Ratio: spreadRatio(rep.series(kind, a, hogs), rep.series(kind, b, hogs))}
	}
	// The ring's other modes and calls against ring/poll; ring/poll
	// against everything else.
	for _, kind := range []string{kindThroughput, kindRTT} {
		for _, r := range rep.Rows {
			switch {
			case r.Kind != kind || r.Hogs != 0 || r.Label == labelRingPoll:
			case r.Transport == "ring":
				out = append(out, ratio(kind, r.Label, labelRingPoll, 0))
			default:
				out = append(out, ratio(kind, labelRingPoll, r.Label, 0))
			}
		}
	}
	// The deque's batch rows also against the deque one message at a
	// time, in the same mode: what its batch calls gain.
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if r.Kind != kindThroughput || r.Hogs != 0 || r.Transport != "deque" {
			continue
		}
		if single, ok := rep.singleOf(r); ok {
			out = append(out, ratio(kindThroughput, r.Label, single, 0))
		}
	}
	if rep.row(kindRTT, labelRingBlock, 0) != nil && rep.row(kindRTT, labelFutex, 0) != nil {
		out = append(out, ratio(kindRTT, labelRingBlock, labelFutex, 0))
	}
	if h := rep.Hogs; h > 0 {
		out = append(out,
			ratio(kindThroughput, labelRingBlock, "chan", h).withGoal(">=", 0.8),
			ratio(kindThroughput, labelRingBlock, "uds", h).withGoal(">=", 10))
	}
	return out
}

// singleOf is the label of the row that is row without batches (the same
// transport, mode and consumers, one message per call), if row is a batch
// row and that row was measured.
func (rep *CompareReport) singleOf(row *CompareRow) (string, bool) {
	m := rep.medianRunOf(row)
	if m == nil || m.Batch <= 1 {
		return "", false
	}
	single := *m
	single.Batch = 0
	label := single.label()
	return label, rep.row(row.Kind, label, row.Hogs) != nil
}

// ratioOf finds a ratio by name.
func ratioOf(ratios []PairRatio, name string) (Spread, bool) {
	for _, r := range ratios {
		if r.Name == name && r.Ratio.N > 0 {
			return r.Ratio, true
		}
	}
	return Spread{}, false
}
