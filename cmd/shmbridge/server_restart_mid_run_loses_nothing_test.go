package main

import (
	"testing"
)

// Both bridges running while the server is stopped and started again on
// the same store: they reconnect, the out bridge republishes what lost
// its PubAck (the window, rebuilt from the stored messages, drops the
// copies) and ring B gets every message.
func TestServerRestartMidRunLosesNothing(t *testing.T) {
	const n = 20000
	srv := startServer(t)
	js := srv.client(t)
	a, b := newRing(t, 1024), newRing(t, 1024)
	ra, rb := openRing(t, a), openRing(t, b)
	out := startBridge(t, nil, outArgs(srv, a, "RS", "rs.msgs")...)
	out.waitLine(t, "bridging out:")
	in := startBridge(t, nil, inArgs(srv, b, "RS", "rs.msgs")...)
	in.waitLine(t, "bridging in:")

	produceAsync(t, ra, 0, n)
	got := newTally()
	drainRing(t, rb, got, n/4)
	srv.restart()
	drainRing(t, rb, got, n)
	got.check(t, n)
	ost, ist := out.stop(t), in.stop(t)
	if dups := readStream(t, js, "RS").check(t, n); dups != 0 {
		t.Fatalf("the stream stores %d duplicates after the restart", dups)
	}
	if ost.Counters["reconnects"] == 0 || ist.Counters["reconnects"] == 0 {
		t.Fatalf("a bridge did not reconnect: out %v, in %v", ost.Counters, ist.Counters)
	}
	if ost.Counters["late_duplicates"] != 0 {
		t.Fatalf("late duplicates inside the window: %v", ost.Counters)
	}
}
