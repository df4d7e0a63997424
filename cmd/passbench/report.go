package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// ReportFormat names the JSON layout; it changes only when fields do.
const ReportFormat = "passbench.rtt/1"

// Report is everything one passbench run prints.
type Report struct {
	Format      string   `json:"format"`
	Date        string   `json:"date"` // RFC 3339, UTC
	Machine     Machine  `json:"machine"`
	ClockReadNs int64    `json:"clock_read_ns"` // cost of the clock read inside every round
	Results     []Result `json:"results"`
}

// Result is one transport's round-trip latency distribution, in nanoseconds.
// Percentiles come from an HDR histogram (3 significant digits); min, max
// and mean are exact.
type Result struct {
	Transport string  `json:"transport"`
	Rounds    int64   `json:"rounds"`
	Warmup    int     `json:"warmup"`
	P50       int64   `json:"p50_ns"`
	P90       int64   `json:"p90_ns"`
	P99       int64   `json:"p99_ns"`
	P999      int64   `json:"p999_ns"`
	Min       int64   `json:"min_ns"`
	Max       int64   `json:"max_ns"`
	Mean      float64 `json:"mean_ns"`

	Hist *hdrhistogram.Histogram `json:"-"`
}

// histMax is the largest latency the histogram tracks; anything longer (a
// minute-long stall) is recorded as histMax and still counted.
const histMax = int64(time.Minute)

// recorder collects round latencies without allocating.
type recorder struct {
	h        *hdrhistogram.Histogram
	min, max int64
	sum      float64
}

func newRecorder() *recorder {
	return &recorder{h: hdrhistogram.New(1, histMax, 3), min: math.MaxInt64}
}

func (r *recorder) record(ns int64) {
	ns = max(1, min(ns, histMax))
	_ = r.h.RecordValue(ns) // cannot fail: ns is within the tracked range
	r.min = min(r.min, ns)
	r.max = max(r.max, ns)
	r.sum += float64(ns)
}

func (r *recorder) result(transport string, warmup int) Result {
	n := r.h.TotalCount()
	res := Result{
		Transport: transport,
		Rounds:    n,
		Warmup:    warmup,
		P50:       r.h.ValueAtPercentile(50),
		P90:       r.h.ValueAtPercentile(90),
		P99:       r.h.ValueAtPercentile(99),
		P999:      r.h.ValueAtPercentile(99.9),
		Hist:      r.h,
	}
	if n > 0 {
		res.Min, res.Max, res.Mean = r.min, r.max, r.sum/float64(n)
		// The histogram reports the top of a value's bucket; never let a
		// percentile exceed the exact maximum.
		res.P50, res.P90, res.P99, res.P999 = min(res.P50, r.max), min(res.P90, r.max), min(res.P99, r.max), min(res.P999, r.max)
	}
	return res
}

// newReport wraps results with the machine and the date.
func newReport(results []Result) Report {
	return Report{
		Format:      ReportFormat,
		Date:        time.Now().UTC().Format(time.RFC3339),
		Machine:     detectMachine(),
		ClockReadNs: clockReadCost(),
		Results:     results,
	}
}

// writeJSON prints the report as one indented JSON object.
func writeJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeTable prints the machine, then one row per transport, in µs.
func writeTable(w io.Writer, rep Report) error {
	m := rep.Machine
	fmt.Fprintf(w, "passbench: round trip between two processes over one shared word\n")
	fmt.Fprintf(w, "machine:   %d CPUs, %s\n", m.NProc, m.CPUModel)
	fmt.Fprintf(w, "kernel:    %s (%s)\n", m.Kernel, m.Go)
	fmt.Fprintf(w, "timing:    CLOCK_MONOTONIC around each round; one clock read costs ~%d ns\n", rep.ClockReadNs)
	fmt.Fprintf(w, "date:      %s\n\n", rep.Date)

	right := tw.AlignRight
	table := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithAlignment(tw.Alignment{tw.AlignLeft, right, right, right, right, right, right, right}),
	)
	table.Header("transport", "rounds", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "mean µs")
	for _, r := range rep.Results {
		if err := table.Append(r.Transport, fmt.Sprint(r.Rounds),
			micros(float64(r.P50)), micros(float64(r.P90)), micros(float64(r.P99)),
			micros(float64(r.P999)), micros(float64(r.Max)), micros(r.Mean)); err != nil {
			return err
		}
	}
	return table.Render()
}

// micros formats nanoseconds as microseconds: to the nanosecond below 1 µs,
// then to three significant digits or so.
func micros(ns float64) string {
	us := ns / 1e3
	switch {
	case us < 1:
		return fmt.Sprintf("%.3f", us)
	case us < 10:
		return fmt.Sprintf("%.2f", us)
	case us < 1000:
		return fmt.Sprintf("%.1f", us)
	default:
		return fmt.Sprintf("%.0f", us)
	}
}
