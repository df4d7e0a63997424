package main

import (
	"context"
	"fmt"
	"time"
)

// compareSpec is the default comparison (passbench with no command).
type compareSpec struct {
	Duration time.Duration // per throughput run; 0 if Messages is set
	Messages int64         // per throughput run, instead of Duration
	Options                // rtt rounds (0: each transport's default), warm-up, timeout per run
	Payload  int
	Capacity int
}

// defaultCompareDuration keeps the whole comparison near 30 s: eight
// throughput runs of 3 s, then round trips.
const defaultCompareDuration = 3 * time.Second

// tputRun is one throughput run of the comparison: one producer process
// and Consumers consumer processes.
type tputRun struct {
	Transport, Mode string
	Consumers       int
}

// The comparison's line-up: throughput with one producer and one consumer
// process each (and the deque once with two thieves, in block mode: three
// polling processes on two cores mostly measure the scheduler), then
// round trips.
var (
	compareThroughput = []tputRun{{"ring", modePoll, 1}, {"ring", modeBlock, 1},
		{"deque", modePoll, 1}, {"deque", modeBlock, 1}, {"deque", modeBlock, 2},
		{"uds", modeBlock, 1}, {"pipe", modeBlock, 1}, {"chan", modeBlock, 1}}
	compareRTT = [][2]string{{"ring", modePoll}, {"ring", modeBlock}, {"uds", modeBlock}, {"pipe", modeBlock}, {"spin", modePoll}, {"futex", modeBlock}}
)

// CompareReport is what the default comparison prints with --json.
type CompareReport struct {
	Envelope
	Runs   []Result `json:"runs"`
	Ratios []Ratio  `json:"ratios"`
}

// Ratio compares two results. Goals are those the ring issue sets.
type Ratio struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal,omitempty"` // e.g. ">= 30"
	Met   *bool   `json:"met,omitempty"`  // present with a goal
}

// runCompare runs the line-up in order; it stops at the first failure.
func runCompare(ctx context.Context, s compareSpec, u *ui) (CompareReport, error) {
	rep := CompareReport{Envelope: newEnvelope(compareFormat)}
	for _, tm := range compareThroughput {
		r, err := runThroughput(ctx, runSpec{
			Transport: tm.Transport, Mode: tm.Mode, Producers: 1, Consumers: tm.Consumers,
			Messages: s.Messages, Duration: s.Duration, Payload: s.Payload, Capacity: s.Capacity,
			Timeout: s.Timeout,
		}, u)
		if err == nil {
			err = failure(&r)
		}
		if err != nil {
			return rep, fmt.Errorf("%s/%s 1×%d: %w", tm.Transport, tm.Mode, tm.Consumers, err)
		}
		rep.Runs = append(rep.Runs, r)
	}
	for _, tm := range compareRTT {
		r, err := measureRTT(ctx, rttSpec{Transport: tm[0], Mode: tm[1], Options: s.Options, Payload: s.Payload, Capacity: s.Capacity}, u)
		if err != nil {
			return rep, fmt.Errorf("rtt %s/%s: %w", tm[0], tm[1], err)
		}
		rep.Runs = append(rep.Runs, r)
	}
	rep.Ratios = ratios(rep.Runs)
	return rep, nil
}

// find returns the run of kind for transport/mode, or nil.
func find(runs []Result, kind, transport, mode string) *Result {
	for i := range runs {
		r := &runs[i]
		if r.Kind == kind && r.Transport == transport && r.Mode == mode {
			return r
		}
	}
	return nil
}

// ratios are the ring issue's goals, then how the ring compares with each
// other transport: throughput as ring (poll) ÷ other, round trips as
// other's p50 ÷ ring (poll) p50.
func ratios(runs []Result) []Ratio {
	var out []Ratio
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	goal := func(name string, v float64, op string, limit float64) {
		met := (op == ">=" && v >= limit) || (op == "<=" && v <= limit && v > 0)
		out = append(out, Ratio{Name: name, Value: v, Goal: fmt.Sprintf("%s %g", op, limit), Met: &met})
	}
	tput := func(t, m string) float64 {
		if r := find(runs, kindThroughput, t, m); r != nil {
			return r.MsgsPerSec
		}
		return 0
	}
	p50 := func(t, m string) float64 {
		if r := find(runs, kindRTT, t, m); r != nil {
			return float64(r.Latency.P50)
		}
		return 0
	}
	ring := tput("ring", modePoll)
	goal("throughput ring/poll ÷ uds", div(ring, tput("uds", modeBlock)), ">=", 30)
	goal("throughput ring/poll ÷ chan", div(ring, tput("chan", modeBlock)), ">=", 1)
	goal("rtt p50 ring/poll ÷ spin", div(p50("ring", modePoll), p50("spin", modePoll)), "<=", 2)
	goal("rtt p50 ring/block ÷ futex", div(p50("ring", modeBlock), p50("futex", modeBlock)), "<=", 1.25)

	ringRTT := p50("ring", modePoll)
	for i := range runs {
		r := &runs[i]
		if r.Transport == "ring" && r.Mode == modePoll {
			continue
		}
		switch r.Kind {
		case kindThroughput:
			out = append(out, Ratio{Name: "throughput ring/poll ÷ " + r.label(), Value: div(ring, r.MsgsPerSec)})
		case kindRTT:
			out = append(out, Ratio{Name: "rtt p50 " + r.name() + " ÷ ring/poll", Value: div(float64(r.Latency.P50), ringRTT)})
		}
	}
	return out
}
