package main

import (
	"fmt"
	"io"
	"slices"
)

// writeCompareText prints the default comparison: each row's median and
// spread, the median run's latencies, ratios against ring/poll (medians
// of the rounds' ratios), the busy-machine section, the verdict, and what
// else used the CPUs.
func writeCompareText(w io.Writer, rep CompareReport) error {
	payload := defaultPayload
	if len(rep.Runs) > 0 {
		payload = rep.Runs[0].PayloadBytes
	}
	fmt.Fprintf(w, "passbench: the shmkit ring (and deque) against other ways to pass %d-byte messages between processes\n", payload)
	writeHeader(w, rep.Envelope)
	if rep.Interrupted != nil {
		fmt.Fprintln(w, rep.Interrupted.describe(len(rep.AllRuns)))
	}
	fmt.Fprintf(w, "runs:      every row %d times, the rows taking turns; msgs/s and p50 are the median [min – max] of the runs,\n"+
		"           other latencies those of the median run, ratios the median of the ratios of runs in the same turn\n", rep.Repeat)

	fmt.Fprintln(w, "\nthroughput: 1 producer, 1 consumer unless P×C says otherwise; latency is one way, send to receive, queueing included")
	if err := writeCompareTput(w, rep, 0); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nround trip: one message there and back")
	if rep.Interrupted != nil && !slices.ContainsFunc(rep.Rows, func(r CompareRow) bool { return r.Kind == kindRTT }) {
		fmt.Fprintln(w, "  none measured before the interruption")
	} else if err := writeCompareRTT(w, rep); err != nil {
		return err
	}
	if rep.Hogs > 0 {
		fmt.Fprintf(w, "\nbusy machine: the same with %s (children of passbench) running beside\n", count(rep.Hogs, "CPU hog"))
		if err := writeCompareTput(w, rep, rep.Hogs); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nratios")
	if err := writePairRatios(w, rep.Ratios); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nverdict:")
	for _, v := range rep.Verdict {
		fmt.Fprintln(w, "  - "+v)
	}
	fmt.Fprintln(w, "\n"+rep.CPU.describe())
	if rep.Interrupted != nil {
		fmt.Fprintln(w, rep.Interrupted.describe(len(rep.AllRuns)))
	}
	return nil
}

// describe is the line that heads and ends the text of an interrupted
// comparison.
func (in *Interruption) describe(finished int) string {
	return fmt.Sprintf("INTERRUPTED (%s) in round %d at %s %s: the tables hold only the %s that finished, fewer than asked for",
		in.Cause, in.Round, in.Kind, in.Row, count(finished, "run"))
}

// medianRunOf is the representative run of a row.
func (rep *CompareReport) medianRunOf(row *CompareRow) *Result {
	for i := range rep.Runs {
		if r := &rep.Runs[i]; keyOf(r) == (rowKey{row.Kind, row.Label, row.Hogs}) {
			return r
		}
	}
	return nil
}

func writeCompareTput(w io.Writer, rep CompareReport, hogs int) error {
	ring := rep.series(kindThroughput, labelRingPoll, 0)
	if hogs > 0 {
		ring = rep.series(kindThroughput, labelRingBlock, hogs)
	}
	against := "÷ ring/poll"
	if hogs > 0 {
		against = "÷ ring/block"
	}
	head := []string{"transport", "P×C", "msgs/s median", "[min – max]", against, "p50 µs", "p99 µs", "max µs", "lost", "dup", "corrupt"}
	t := newTable(w, len(head))
	t.Header(toAny(head)...)
	for i := range rep.Rows {
		row := &rep.Rows[i]
		if row.Kind != kindThroughput || row.Hogs != hogs {
			continue
		}
		m := rep.medianRunOf(row)
		s := *row.MsgsPerSec
		rel := spreadRatio(rep.series(kindThroughput, row.Label, hogs), ring)
		l := m.Latency
		if err := t.Append(toAny([]string{row.Label, fmt.Sprintf("%d×%d", m.Producers, m.Consumers), rate(s.Median),
			"[" + rate(s.Min) + " – " + rate(s.Max) + "]", shortRatio(rel),
			micros(float64(l.P50)), micros(float64(l.P99)), micros(float64(l.Max)),
			fmt.Sprint(row.Lost), fmt.Sprint(row.Duplicated), fmt.Sprint(row.Corrupt)})...); err != nil {
			return err
		}
	}
	return t.Render()
}

func writeCompareRTT(w io.Writer, rep CompareReport) error {
	ring := rep.series(kindRTT, labelRingPoll, 0)
	head := []string{"transport", "rounds", "p50 µs median", "[min – max]", "÷ ring/poll", "p90 µs", "p99 µs", "max µs", "mean µs"}
	t := newTable(w, len(head))
	t.Header(toAny(head)...)
	for i := range rep.Rows {
		row := &rep.Rows[i]
		if row.Kind != kindRTT {
			continue
		}
		m := rep.medianRunOf(row)
		s := *row.P50Ns
		rel := spreadRatio(rep.series(kindRTT, row.Label, 0), ring)
		l := m.Latency
		if err := t.Append(toAny([]string{row.Label, fmt.Sprint(m.Messages), micros(s.Median),
			"[" + micros(s.Min) + " – " + micros(s.Max) + "]", shortRatio(rel),
			micros(float64(l.P90)), micros(float64(l.P99)), micros(float64(l.Max)), micros(l.Mean)})...); err != nil {
			return err
		}
	}
	return t.Render()
}

// shortRatio is a ratio's median alone, "1.05×", or "-".
func shortRatio(s Spread) string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3g×", s.Median)
}
