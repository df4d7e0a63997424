package main

import (
	"strings"
	"testing"
)

// How a ratio reads: parity within 10 %, else times as fast or a share.
func TestRelationWording(t *testing.T) {
	for _, c := range []struct {
		s    Spread
		want string
	}{
		{Spread{}, "not measured"},
		{Spread{Median: 1, N: 1}, "about as fast as"},
		{Spread{Median: 0.91, N: 1}, "about as fast as"},
		{Spread{Median: 1.1, N: 1}, "about as fast as"},
		{Spread{Median: 1.2, N: 1}, "1.2 times as fast as"},
		{Spread{Median: 31.4, N: 1}, "31.4 times as fast as"},
		{Spread{Median: 0.42, N: 1}, "42% of the rate of"},
	} {
		if got := relation(c.s); got != c.want {
			t.Errorf("relation(%v) = %q, want %q", c.s.Median, got, c.want)
		}
	}
	if got := steady(Spread{Median: 1, Min: 0.5, Max: 1.5, N: 3}); got == "" {
		t.Error("a spread across parity is not flagged")
	}
	if got := steady(Spread{Median: 2, Min: 1.5, Max: 2.5, N: 3}); got != "" {
		t.Errorf("a steady spread is flagged: %q", got)
	}
}

// fakeRun is a measured run with a given figure.
func fakeRun(kind, transport, mode string, round, hogs, batch int, fig float64) Result {
	r := Result{Kind: kind, Transport: transport, Mode: mode, Producers: 1, Consumers: 1, Round: round, Hogs: hogs, Batch: batch}
	if kind == kindRTT {
		r.Latency.P50 = int64(fig)
	} else {
		r.MsgsPerSec = fig
	}
	return r
}

// The verdict names every alternative with the ratio the rounds give,
// ring ÷ other for rates and times alike, batch ÷ ring, and the deque's
// batches ÷ the deque one message at a time, in the same mode.
func TestVerdictNamesEachAlternative(t *testing.T) {
	rep := CompareReport{Repeat: 3, Hogs: 2}
	for round := 1; round <= 3; round++ {
		f := float64(round) // a slower machine each round: same-round ratios stay put
		rep.AllRuns = append(rep.AllRuns,
			fakeRun(kindThroughput, "ring", modePoll, round, 0, 0, 6e6/f),
			fakeRun(kindThroughput, "ring", modePoll, round, 0, 32, 18e6/f),
			fakeRun(kindThroughput, bareTransport, modePoll, round, 0, 0, 12e6/f),
			fakeRun(kindThroughput, "deque", modePoll, round, 0, 0, 3e6/f),
			fakeRun(kindThroughput, "deque", modePoll, round, 0, 32, 12e6/f),
			fakeRun(kindThroughput, "deque", modeBlock, round, 0, 0, 2e6/f),
			fakeRun(kindThroughput, "deque", modeBlock, round, 0, 32, 5e6/f),
			fakeRun(kindThroughput, "chan", modeBlock, round, 0, 0, 6.1e6/f),
			fakeRun(kindThroughput, "uds", modeBlock, round, 0, 0, 0.2e6/f),
			fakeRun(kindThroughput, "pipe", modeBlock, round, 0, 0, 2e6/f),
			fakeRun(kindRTT, "ring", modePoll, round, 0, 0, 900*f),
			fakeRun(kindRTT, "ring", modeBlock, round, 0, 0, 1200*f),
			fakeRun(kindRTT, "spin", modePoll, round, 0, 0, 300*f),
			fakeRun(kindRTT, "futex", modeBlock, round, 0, 0, 2400*f),
			fakeRun(kindThroughput, "ring", modeBlock, round, 2, 0, 1.6e6/f),
			fakeRun(kindThroughput, "chan", modeBlock, round, 2, 0, 4e6/f),
			fakeRun(kindThroughput, "uds", modeBlock, round, 2, 0, 0.2e6/f),
		)
	}
	rep.summarize()
	want := map[string]Spread{
		"throughput ring/poll ÷ chan":                                   {Median: 6 / 6.1, N: 3},
		"throughput ring/poll ÷ uds":                                    {Median: 30, N: 3},
		"throughput ring/poll batch 32 ÷ ring/poll":                     {Median: 3, N: 3},
		"throughput deque/poll batch 32 ÷ deque/poll":                   {Median: 4, N: 3},
		"throughput deque/block batch 32 ÷ deque/block":                 {Median: 2.5, N: 3},
		"throughput ring/poll ÷ deque/poll batch 32":                    {Median: 0.5, N: 3},
		"throughput ring/poll ÷ bare ring (reference, no crash safety)": {Median: 0.5, N: 3},
		"rtt p50 ring/poll ÷ spin":                                      {Median: 3, N: 3},
		"rtt p50 ring/block ÷ futex ping-pong (sleeps every round)":     {Median: 0.5, N: 3},
		"busy (2 CPU hogs) throughput ring/block ÷ chan":                {Median: 0.4, N: 3},
		"busy (2 CPU hogs) throughput ring/block ÷ uds":                 {Median: 8, N: 3},
	}
	for name, w := range want {
		got, ok := ratioOf(rep.Ratios, name)
		if !ok || got.N != w.N || got.Median < w.Median*0.999 || got.Median > w.Median*1.001 || got.Max-got.Min > 1e-9*got.Median {
			t.Errorf("%s = %+v (found %v), want median %g over %d rounds, no spread", name, got, ok, w.Median, w.N)
		}
	}
	for _, r := range rep.Ratios {
		if strings.HasPrefix(r.Name, "busy") && (r.Met == nil || *r.Met) {
			t.Errorf("%s: met %v, want a goal not met", r.Name, r.Met)
		}
	}
	text := strings.Join(rep.Verdict, "\n")
	for _, s := range []string{"Go channel: the ring, between two processes, is about as fast as",
		"Unix socket: the ring is 30 times as fast as", "pipe: the ring is 3 times as fast as",
		"Crash safety: the ring is 50% of the rate of", "Batches: ring/poll batch 32 is 3 times as fast as",
		"Deque batches: deque/poll batch 32 is 4 times as fast as the deque one message at a time",
		"Round trip: the ring (poll) takes 3×", "Blocking: a ring/block round trip takes 0.5×",
		"Busy machine (2 CPU hogs beside): ring/block is 40% of the rate of a channel", "docs/bench.md"} {
		if !strings.Contains(text, s) {
			t.Errorf("verdict lacks %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "goal") || strings.Contains(text, "issue") {
		t.Errorf("verdict speaks of our history:\n%s", text)
	}
	// Each row's representative is its median run: round 2 of 3.
	for _, r := range rep.Runs {
		if r.Round != 2 {
			t.Errorf("%s: representative is round %d, want the median, 2", r.label(), r.Round)
		}
	}
}
