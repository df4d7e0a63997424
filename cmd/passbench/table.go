package main

import (
	"fmt"
	"io"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// writeHeader prints where and when, which every figure needs.
func writeHeader(w io.Writer, e Envelope) {
	m := e.Machine
	fmt.Fprintf(w, "machine:   %d CPUs, %s\n", m.NProc, m.CPUModel)
	fmt.Fprintf(w, "kernel:    %s (%s)\n", m.Kernel, m.Go)
	fmt.Fprintf(w, "timing:    CLOCK_MONOTONIC (vDSO) shared by all processes; one read costs ~%d ns\n", e.ClockReadNs)
	fmt.Fprintf(w, "date:      %s\n", e.Date)
}

func newTable(w io.Writer, cols int) *tablewriter.Table {
	align := make(tw.Alignment, cols)
	for i := range align {
		align[i] = tw.AlignRight
	}
	align[0] = tw.AlignLeft
	return tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithAlignment(align),
	)
}

// writeThroughput prints throughput runs; with ring set, each run's rate
// as a multiple of the ring's.
func writeThroughput(w io.Writer, runs []*Result, ring *Result) error {
	head := []string{"transport", "P×C", "payload", "messages", "seconds", "msgs/s"}
	if ring != nil {
		head = append(head, "÷ ring/poll")
	}
	head = append(head, "p50 µs", "p99 µs", "p99.9 µs", "max µs", "lost", "dup", "corrupt")
	t := newTable(w, len(head))
	t.Header(toAny(head)...)
	for _, r := range runs {
		row := []string{r.name(), fmt.Sprintf("%d×%d", r.Producers, r.Consumers), fmt.Sprint(r.PayloadBytes),
			fmt.Sprint(r.Messages), fmt.Sprintf("%.2f", r.Seconds), rate(r.MsgsPerSec)}
		if ring != nil {
			row = append(row, times(r.MsgsPerSec, ring.MsgsPerSec))
		}
		l := r.Latency
		row = append(row, micros(float64(l.P50)), micros(float64(l.P99)), micros(float64(l.P999)), micros(float64(l.Max)),
			fmt.Sprint(r.Lost), fmt.Sprint(r.Duplicated), fmt.Sprint(r.Corrupt))
		if err := t.Append(toAny(row)...); err != nil {
			return err
		}
	}
	return t.Render()
}

// writeRTT prints round-trip runs; with ring set, each p50 as a multiple
// of the ring's.
func writeRTT(w io.Writer, runs []*Result, ring *Result) error {
	head := []string{"transport", "rounds", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "mean µs"}
	if ring != nil {
		head = append(head, "p50 ÷ ring/poll")
	}
	t := newTable(w, len(head))
	t.Header(toAny(head)...)
	for _, r := range runs {
		l := r.Latency
		row := []string{r.name(), fmt.Sprint(r.Messages), micros(float64(l.P50)), micros(float64(l.P90)),
			micros(float64(l.P99)), micros(float64(l.P999)), micros(float64(l.Max)), micros(l.Mean)}
		if ring != nil {
			row = append(row, times(float64(l.P50), float64(ring.Latency.P50)))
		}
		if err := t.Append(toAny(row)...); err != nil {
			return err
		}
	}
	return t.Render()
}

// writeRunText prints one run as `run` and `rtt` do without --json.
func writeRunText(w io.Writer, rep RunReport) error {
	title := "passbench: throughput, producers and consumers in separate processes"
	switch {
	case rep.Kind == kindRTT:
		title = "passbench: round trip between two processes"
	case rep.Kind == kindPass:
		title = "passbench: passes through the sched Pass scheduler, submitters and workers in separate processes, each submitter awaiting its own results"
	case rep.Transport == "chan":
		title = "passbench: throughput, producers and consumers as goroutines of one process"
	}
	fmt.Fprintln(w, title)
	writeHeader(w, rep.Envelope)
	r := &rep.Result
	if tr, err := lookupTransport(rep.Transport); err == nil {
		fmt.Fprintf(w, "per message: %s\n", tr.About)
	}
	switch {
	case r.Lease && r.Transport == "deque":
		fmt.Fprintln(w, "consumers:   lease each message (Claim, verify, mark in the shared bitmap, Ack); every 20 ms the parent repairs the deque, which returns a dead thief's lease to be taken again")
	case r.Lease:
		fmt.Fprintln(w, "consumers:   lease each message (Claim, verify, mark in the shared bitmap, Ack), shown in a heartbeat table; the parent's watchdog scans every 20 ms")
	}
	if p := r.Pass; p != nil {
		fmt.Fprintf(w, "per pass:    a submitter goroutine stamps and seals %d argument bytes and calls Submit; a worker claims the pass, records the lease,\n"+
			"             checks the checksum, pushes the echo to that submitter's reply ring and acks; the submitter's Wait returns it, checked\n", r.PayloadBytes)
		fmt.Fprintf(w, "processes:   %s (pass.Client) × %d in flight (a goroutine each: submit, wait, again), %s (pass.Pool) × %s\n",
			count(p.Submitters, "submitter"), p.Inflight, count(p.Workers, "worker"), count(p.Threads, "thread"))
	}
	fmt.Fprintln(w)
	switch {
	case r.Kind == kindRTT:
		return writeRTT(w, []*Result{r}, nil)
	case r.Pass != nil:
		if err := writePassSubmitters(w, r); err != nil {
			return err
		}
	default:
		if err := writeThroughput(w, []*Result{r}, nil); err != nil {
			return err
		}
	}
	if r.Ring != nil {
		fmt.Fprintf(w, "ring: %d slots of %d bytes; pushes that found it full: %d, pops that found it empty: %d",
			r.Capacity, r.Ring.SlotBytes, r.Ring.FullHits, r.Ring.EmptyHits)
		if r.Lease {
			fmt.Fprintf(w, "; requeued: %d, poisoned: %d, positions burned past leases: %d", r.Ring.Requeued, r.Ring.Poisoned, r.Ring.Burned)
		}
		fmt.Fprintln(w)
	}
	if d := r.Deque; d != nil {
		fmt.Fprintf(w, "deque: %d slots of %d bytes; pushes that found it full: %d, steals that found it empty: %d, stolen: %d",
			r.Capacity, d.SlotBytes, d.FullHits, d.EmptyHits, d.Stolen)
		if r.Lease {
			fmt.Fprintf(w, "; claimed: %d, returned: %d, poisoned: %d", d.Claimed, d.Returned, d.Poisoned)
		}
		fmt.Fprintln(w)
	}
	if p := r.Pass; p != nil {
		fmt.Fprintf(w, "pass: a submit ring and %s of %d slots of %d bytes; executed by the workers that finished: %d (failed %d),\n"+
			"      results parked for room in a reply ring: %d, requeued: %d, copies skipped or dropped after their submitter left: %d\n",
			count(p.Submitters, "reply ring"), r.Capacity, p.SlotBytes, p.Executed, p.Failed, p.Backpressure, p.Requeued, p.Orphaned+p.OrphanedResults)
		if p.StoppedEarly {
			fmt.Fprintln(w, "pass: a submitter gave up on missing results once nothing moved and its rings were empty; they count as lost")
		}
	}
	if c := r.Chaos; c != nil {
		fmt.Fprintf(w, "chaos: seed %d; killed %d of %d asked for:", c.Seed, len(c.Kills), c.Requested)
		for _, k := range c.Kills {
			fmt.Fprintf(w, " %s %d at %s (%d in)", k.Role, k.ID, time.Duration(k.AtNs).Round(time.Microsecond), k.Progress)
		}
		fmt.Fprintf(w, "\nwatchdog: %d scans, %d dead participants reclaimed\n", c.WatchdogScans, c.Reclaimed)
	}
	return nil
}

// writePassSubmitters prints a pass run: a row for each submitter, each
// measured on its own (its passes, from its first Submit to its last
// result), and the run's totals.
func writePassSubmitters(w io.Writer, r *Result) error {
	head := []string{"submitter", "passes", "seconds", "passes/s", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "lost", "dup", "corrupt"}
	t := newTable(w, len(head))
	t.Header(toAny(head)...)
	row := func(name string, passes int64, secs, rps float64, l Latency, lost, dup, corrupt int64) error {
		return t.Append(toAny([]string{name, fmt.Sprint(passes), fmt.Sprintf("%.2f", secs), rate(rps),
			micros(float64(l.P50)), micros(float64(l.P99)), micros(float64(l.P999)), micros(float64(l.Max)),
			fmt.Sprint(lost), fmt.Sprint(dup), fmt.Sprint(corrupt)})...)
	}
	for _, p := range r.Pass.PerSubmitter {
		if err := row(fmt.Sprint(p.ID), p.Messages, p.Seconds, p.MsgsPerSec, p.Latency, p.Lost, p.Duplicated, p.Corrupt); err != nil {
			return err
		}
	}
	if err := row("all", r.Messages, r.Seconds, r.MsgsPerSec, r.Latency, r.Lost, r.Duplicated, r.Corrupt); err != nil {
		return err
	}
	return t.Render()
}

// count is "1 worker", "2 workers".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// rate formats messages per second.
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// times formats a ratio a ÷ b.
func times(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3g×", a/b)
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
