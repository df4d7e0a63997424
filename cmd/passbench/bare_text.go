package main

import (
	"fmt"
	"io"
)

// writeBareText prints `passbench bare` without --json.
func writeBareText(w io.Writer, rep BareReport) error {
	fmt.Fprintf(w, "passbench bare: the queues alone in the smallest loop, %d-byte messages in %d-byte slots, %d slots,\n"+
		"one producer and one consumer process spinning on the non-blocking calls; per message no clock read,\n"+
		"checksum or histogram: each side reads the clock before and after its loop, round trips once per round\n",
		rep.Payload, rep.SlotSize, rep.Slots)
	writeHeader(w, rep.Envelope)
	fmt.Fprintf(w, "runs:      every row %d times, the rows taking turns; figures are the median [min – max] of the runs,\n"+
		"           ratios the median [min – max] of the ratios of runs in the same turn\n", rep.Repeat)
	fmt.Fprintf(w, "reference: %q is internal/bareref, a Vyukov ring with no crash safety at all,\n"+
		"           measured to show what crash safety costs here; it is not for use\n", bareLabelRef)

	fmt.Fprintln(w, "\nthroughput")
	t := newTable(w, 4)
	t.Header("row", "messages", "msgs/s median", "[min – max]")
	for _, r := range rep.Rows {
		if r.MsgsPerSec == nil {
			continue
		}
		s := *r.MsgsPerSec
		if err := t.Append(r.Label, fmt.Sprint(r.Messages), rate(s.Median), "["+rate(s.Min)+" – "+rate(s.Max)+"]"); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nround trip: one message in flight, both sides spin; µs")
	t = newTable(w, 5)
	t.Header("row", "rounds", "p50 median", "[min – max]", "mean median")
	for _, r := range rep.Rows {
		if r.P50Ns == nil {
			continue
		}
		p := *r.P50Ns
		if err := t.Append(r.Label, fmt.Sprint(r.Rounds), micros(p.Median), "["+micros(p.Min)+" – "+micros(p.Max)+"]", micros(r.MeanNs.Median)); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nratios (targets: docs/bench.md, \"The bare loop\")")
	if err := writePairRatios(w, rep.Ratios); err != nil {
		return err
	}
	fmt.Fprintln(w, "\n"+rep.CPU.describe())
	return nil
}

// writePairRatios prints ratios with their spread and, where set, target.
func writePairRatios(w io.Writer, ratios []PairRatio) error {
	t := newTable(w, 4)
	t.Header("ratio", "median [min – max]", "target", "")
	for _, r := range ratios {
		verdict := ""
		if r.Met != nil {
			verdict = "met"
			if !*r.Met {
				verdict = "NOT met"
			}
		}
		if err := t.Append(r.Name, ratioText(r.Ratio), r.Goal, verdict); err != nil {
			return err
		}
	}
	return t.Render()
}

// ratioText is "0.62× [0.51 – 0.70]", or "-" without figures.
func ratioText(s Spread) string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3g× [%.3g – %.3g]", s.Median, s.Min, s.Max)
}
