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
		title = "passbench: passes through the sched Pass scheduler, submitters, workers and collector in separate processes"
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
		inflight := "no limit but the rings"
		if p.Inflight > 0 {
			inflight = fmt.Sprint(p.Inflight)
		}
		fmt.Fprintf(w, "per pass:    a submitter stamps and seals %d argument bytes and calls Submit; a worker claims it, records the lease,\n"+
			"             checks the checksum, pushes the echo as its result and acks; the parent receives and checks it\n", r.PayloadBytes)
		subs := fmt.Sprintf("%d submitters (in flight each: %s)", p.Submitters, inflight)
		if p.Submitters == 0 {
			subs = fmt.Sprintf("the parent submits (in flight: %s)", inflight)
		}
		fmt.Fprintf(w, "processes:   %s, %d workers × %d threads, collector in the parent\n", subs, p.Workers, p.Threads)
	}
	fmt.Fprintln(w)
	if r.Kind == kindRTT {
		return writeRTT(w, []*Result{r}, nil)
	}
	if err := writeThroughput(w, []*Result{r}, nil); err != nil {
		return err
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
		fmt.Fprintf(w, "pass: rings of %d slots of %d bytes; executed by the workers that finished: %d (failed %d), results that waited for room: %d, requeued: %d\n",
			r.Capacity, p.SlotBytes, p.Executed, p.Failed, p.Backpressure, p.Requeued)
		if p.StoppedEarly {
			fmt.Fprintln(w, "pass: results were missing when both rings went quiet; they count as lost")
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

// writeCompareText prints the default comparison.
func writeCompareText(w io.Writer, rep CompareReport) error {
	payload := defaultPayload
	if len(rep.Runs) > 0 {
		payload = rep.Runs[0].PayloadBytes
	}
	fmt.Fprintf(w, "passbench: the shmkit ring (and deque) against other ways to pass %d-byte messages between processes\n", payload)
	writeHeader(w, rep.Envelope)
	var tput, rtt []*Result
	for i := range rep.Runs {
		if r := &rep.Runs[i]; r.Kind == kindThroughput {
			tput = append(tput, r)
		} else {
			rtt = append(rtt, r)
		}
	}
	fmt.Fprintln(w, "\nthroughput: 1 producer, 1 consumer unless P×C says otherwise; latency is one way, send to receive, queueing included")
	if err := writeThroughput(w, tput, find(rep.Runs, kindThroughput, "ring", modePoll)); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nround trip: one message there and back")
	if err := writeRTT(w, rtt, find(rep.Runs, kindRTT, "ring", modePoll)); err != nil {
		return err
	}
	fmt.Fprintln(w, "\ngoals (from the ring issue):")
	for _, r := range rep.Ratios {
		if r.Met == nil {
			continue
		}
		verdict := "met"
		if !*r.Met {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "  %-30s %8.2f   goal %-7s %s\n", r.Name, r.Value, r.Goal, verdict)
	}
	return nil
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
