package main

import "testing"

// With at most 2 PubAcks outstanding and a stall wait of a nanosecond,
// nearly every publish finds the client stalled (ErrTooManyStalledMsgs):
// the bridge waits and tries again, and the stream still gets every
// message once.
func TestStalledPublisherWaitsAndNeverDrops(t *testing.T) {
	const n = 2000
	srv := startServer(t)
	js := srv.client(t)
	a := newRing(t, 2048)
	ra := openRing(t, a)
	produce(t, ra, 0, n)
	out := startBridge(t, nil, outArgs(srv, a, "ST", "st.msgs", "--max-pending", "2", "--stall-wait", "1ns", "--batch", "64")...)
	waitFor(t, "every lease acked", func() bool { return ra.Counters().Acked >= n })
	st := out.stop(t)
	if dups := readStream(t, js, "ST").check(t, n); dups != 0 {
		t.Fatalf("%d duplicates stored", dups)
	}
	if st.Counters["stalls"] == 0 {
		t.Fatalf("no publish stalled with 2 PubAcks outstanding at most: %v", st.Counters)
	}
	if st.Counters["published"] != n {
		t.Fatalf("published %d, want %d: %v", st.Counters["published"], n, st.Counters)
	}
}
