package main

import (
	"fmt"
	"strings"
	"testing"
)

// Ring A → out bridge → JetStream → in bridge → ring B, no faults: every
// message arrives in B once, the stream stores each once, and the
// counters agree with what happened.
func TestRingToStreamToRingDeliversEveryMessage(t *testing.T) {
	const n = 5000
	srv := startServer(t)
	js := srv.client(t)
	a, b := newRing(t, 256), newRing(t, 256)
	ra, rb := openRing(t, a), openRing(t, b)

	out := startBridge(t, nil, outArgs(srv, a, "E2E", "e2e.msgs")...)
	out.waitLine(t, "bridging out:")
	in := startBridge(t, nil, inArgs(srv, b, "E2E", "e2e.msgs", "--ack-wait", "30s")...) // no redelivery by a slow machine
	in.waitLine(t, "bridging in:")

	produceAsync(t, ra, 0, n)
	got := newTally()
	drainRing(t, rb, got, n)
	if dups := got.check(t, n); dups != 0 {
		t.Fatalf("%d duplicates in ring B with no fault", dups)
	}
	ost, ist := out.stop(t), in.stop(t)
	stream := readStream(t, js, "E2E")
	if dups := stream.check(t, n); dups != 0 {
		t.Fatalf("stream stores %d duplicates", dups)
	}
	stream.idsDistinct(t)
	wantMsgIDsOf(t, stream, ra.FileID())
	got.idsDistinct(t) // B's ids are 1<<63 | the stream sequences
	if c := ost.Counters; c["published"] != n || c["leases_acked"] != n || c["claimed"] != n || c["duplicates"] != 0 || c["late_duplicates"] != 0 {
		t.Fatalf("out counters %v, want %d published, claimed and acked, no duplicates", c, n)
	}
	if c := ist.Counters; c["pushed"] != n || c["acked"] != n {
		t.Fatalf("in counters %v, want %d pushed and acked", c, n)
	}
	// (The in side's gauge is 0 between messages by construction: not
	// checked.)
	if ost.InFlight != 0 {
		t.Fatalf("out holds %d leases after a clean stop", ost.InFlight)
	}
}

// wantMsgIDsOf fails unless every message of ty came with a Nats-Msg-Id
// naming the ring's file id.
func wantMsgIDsOf(t testing.TB, ty *tally, fileID uint64) {
	t.Helper()
	prefix := fmt.Sprintf("%016x-", fileID)
	ty.mu.Lock()
	defer ty.mu.Unlock()
	for n, id := range ty.ids {
		if !strings.HasPrefix(id, prefix) {
			t.Fatalf("message %d published with Nats-Msg-Id %q, want %s...", n, id, prefix)
		}
	}
}
