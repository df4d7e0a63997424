package main

import "fmt"

// The verdict: what the comparison's figures say about the ring on this
// machine, in sentences a user can read without knowing how shmkit came
// to be. Each sentence names the alternative, the ratio (the median of
// the rounds' ratios, with its spread), and what it means.

// parity is how close to 1 a ratio must be to count as "about the same":
// runs on a shared machine spread by more than that.
const parity = 0.1

// relation says how the ring compares in rate, from ring ÷ other.
func relation(s Spread) string {
	switch {
	case s.N == 0:
		return "not measured"
	case s.Median >= 1-parity && s.Median <= 1+parity:
		return "about as fast as"
	case s.Median > 1:
		return fmt.Sprintf("%.3g times as fast as", s.Median)
	default:
		return fmt.Sprintf("%.0f%% of the rate of", 100*s.Median)
	}
}

// steady adds a warning when the rounds disagree about which side is
// faster: the spread crosses parity.
func steady(s Spread) string {
	if s.N > 1 && s.Min < 1-parity && s.Max > 1+parity {
		return " (the runs disagree: some had it ahead, some behind)"
	}
	return ""
}

// spreadText is "1.05× [0.98 – 1.10]".
func spreadText(s Spread) string { return ratioText(s) }

// compareVerdict builds the verdict from the ratios.
func compareVerdict(rep *CompareReport) []string {
	var out []string
	get := func(kind, a, b string, hogs int) (Spread, bool) {
		return ratioOf(rep.Ratios, ratioName(kind, a, b, hogs))
	}
	if s, ok := get(kindThroughput, labelRingPoll, "chan", 0); ok {
		out = append(out, fmt.Sprintf("Go channel: the ring, between two processes, is %s a buffered channel between two goroutines of one process (%s)%s. "+
			"Crossing a process boundary through the ring costs about what a channel costs inside one.", relation(s), spreadText(s), steady(s)))
		if s.Median < 1-parity {
			out[len(out)-1] = fmt.Sprintf("Go channel: the ring, between two processes, is %s a buffered channel between two goroutines of one process (%s)%s. "+
				"Inside one process a channel is the faster choice here; the ring is for messages that cross processes and must survive one dying.", relation(s), spreadText(s), steady(s))
		}
	}
	for _, k := range []struct{ label, name, what string }{
		{"uds", "Unix socket", "a socket costs a system call on each side per message, and a wake-up when the reader sleeps"},
		{"pipe", "pipe", "a pipe costs a system call on each side per message"},
	} {
		if s, ok := get(kindThroughput, labelRingPoll, k.label, 0); ok {
			out = append(out, fmt.Sprintf("%s: the ring is %s a %s (%s): %s, the ring a few stores to shared memory.",
				k.name, relation(s), k.name, spreadText(s), k.what))
		}
	}
	if s, ok := get(kindThroughput, labelRingPoll, labelBare, 0); ok {
		meaning := "The difference is what recording each slot's owner, so that a repair can prove whose death it acts on, costs on this machine."
		if s.Median >= 1-parity {
			meaning = "Crash safety cost nothing measurable in this run."
		}
		out = append(out, fmt.Sprintf("Crash safety: the ring is %s the reference ring without any crash safety in the same harness (%s)%s. %s",
			relation(s), spreadText(s), steady(s), meaning))
	}
	// Batches, polling, against the same transport one message at a
	// time: the ring's against ring/poll, the deque's against deque/poll.
	for _, b := range []struct{ transport, single, name, what string }{
		{"ring", labelRingPoll, "Batches", "the ring"},
		{"deque", labelDequePoll, "Deque batches", "the deque"},
	} {
		var batchLabel string
		for i := range rep.Runs {
			if r := &rep.Runs[i]; r.Kind == kindThroughput && r.Hogs == 0 && r.Transport == b.transport && r.Mode == modePoll && r.Consumers == 1 && r.Batch > 1 {
				batchLabel = r.label()
			}
		}
		if batchLabel == "" {
			continue
		}
		if s, ok := get(kindThroughput, batchLabel, b.single, 0); ok {
			advice := "send in batches when messages come in bursts."
			if s.Median <= 1+parity {
				advice = "batches did not pay in this run."
			}
			out = append(out, fmt.Sprintf("%s: %s is %s %s one message at a time (%s)%s; %s",
				b.name, batchLabel, relation(s), b.what, spreadText(s), steady(s), advice))
		}
	}
	if s, ok := get(kindRTT, labelRingPoll, "spin", 0); ok {
		out = append(out, fmt.Sprintf("Round trip: the ring (poll) takes %s the time of a cache-line ping-pong between two processes, the least any round trip through shared memory can take here.",
			spreadText(s)))
	}
	if s, ok := get(kindRTT, labelRingBlock, labelFutex, 0); ok {
		what := "shorter than"
		if s.Median >= 1 {
			what = "no shorter than"
		}
		out = append(out, fmt.Sprintf("Blocking: a ring/block round trip takes %s the time of a futex ping-pong, %s one whose sides sleep and wake every round (ring/block spins briefly before it sleeps).",
			spreadText(s), what))
	}
	if h := rep.Hogs; h > 0 {
		hogs := count(h, "CPU hog")
		c, okc := get(kindThroughput, labelRingBlock, "chan", h)
		d, okd := get(kindThroughput, labelRingBlock, "uds", h)
		if okc && okd {
			out = append(out, fmt.Sprintf("Busy machine (%s beside): ring/block is %s a channel (%s) and %s a Unix socket (%s). "+
				"When the cores are shared, a side that waits takes time from the side it waits for.",
				hogs, relation(c), spreadText(c), relation(d), spreadText(d)))
		}
	}
	if rep.CPU.Disturbed {
		out = append(out, "Other processes used the CPUs during the run (see the last line): every figure above is lower and more spread than on a quiet machine.")
	}
	out = append(out, "What the figures mean, and runs on other machines: docs/bench.md.")
	return out
}
