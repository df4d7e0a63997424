package main

import (
	"testing"

	"github.com/shmkit/shmkit/internal/proctest"
)

// An out bridge SIGKILLed at each of its crash points, then started
// again: the stream ends up with every message exactly once (what the
// dead bridge had published is dropped by the duplicate window when the
// next one republishes it), and the counters say which case it was.
func TestOutBridgeKilledAtEveryStepLosesNothing(t *testing.T) {
	const n, batch = 1500, 64
	cases := []struct {
		point    string
		inFlight string // batches in flight: 1 makes each step's outcome exact
		// dups: the second bridge sees duplicates (the dead one's batch
		// had reached the stream): "none", "some" (at most the
		// redelivered: PubAcks not awaited, or batches pipelined behind
		// the one killed), "all" (every redelivered message).
		dups string
	}{
		{"bridge.out.after-claim", "1", "none"},
		{"bridge.out.after-journal", "1", "none"},
		{"bridge.out.after-publish", "1", "some"},
		{"bridge.out.after-puback", "1", "all"},
		{"bridge.out.after-lease-ack", "1", "none"},
		{"bridge.out.after-publish", "4", "some"},
		{"bridge.out.after-puback", "4", "some"},
	}
	for _, tc := range cases {
		t.Run(tc.point+"/in-flight-"+tc.inFlight, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t)
			js := srv.client(t)
			a := newRing(t, 2048)
			ra := openRing(t, a)
			produce(t, ra, 0, n)
			args := outArgs(srv, a, "KO", "ko.msgs", "--batch", "64", "--in-flight", tc.inFlight)
			dead := startBridge(t, proctest.Arm(tc.point, 3), args...)
			dead.waitKilledAt(t, tc.point)

			next := startBridge(t, nil, args...)
			waitFor(t, "every lease acked", func() bool { return ra.Counters().Acked >= n })
			st := next.stop(t)
			stream := readStream(t, js, "KO")
			if dups := stream.check(t, n); dups != 0 {
				t.Fatalf("the stream stores %d duplicates; the window should have dropped them", dups)
			}
			stream.idsDistinct(t)
			wantMsgIDsOf(t, stream, ra.FileID())
			c := st.Counters
			if c["late_duplicates"] != 0 {
				t.Fatalf("late duplicates %d inside the window: %v", c["late_duplicates"], c)
			}
			redelivered, dups := c["redelivered"], c["duplicates"]
			switch tc.dups {
			case "none":
				if dups != 0 {
					t.Fatalf("%d duplicates reported, want none: %v", dups, c)
				}
			case "some":
				if dups > redelivered {
					t.Fatalf("%d duplicates but only %d redelivered: %v", dups, redelivered, c)
				}
			case "all":
				if redelivered == 0 || dups != redelivered {
					t.Fatalf("%d duplicates, want every one of the %d redelivered (> 0): %v", dups, redelivered, c)
				}
			}
			if tc.point != "bridge.out.after-lease-ack" && redelivered == 0 {
				t.Fatalf("the dead bridge's leases did not come back: %v", c)
			}
			// A clean stop finishes every lease it claimed (publish,
			// PubAck, lease ack): none is left to the next bridge.
			if c["claimed"] != c["leases_acked"] {
				t.Fatalf("claimed %d leases, acked %d at a clean stop: %v", c["claimed"], c["leases_acked"], c)
			}
		})
	}
}

// An in bridge SIGKILLed at each of its crash points, then started
// again: ring B gets every message; a duplicate is only ever a message
// JetStream redelivered (one pushed and not acked, or whose ack the dead
// bridge had not flushed).
func TestInBridgeKilledAtEveryStepLosesNothing(t *testing.T) {
	const n = 1500
	cases := []struct {
		point       string
		after       int  // passes before the kill: fetches, or messages
		wantSomeDup bool // the message pushed at the kill was not acked: it comes twice
	}{
		{"bridge.in.after-fetch", 3, false},
		{"bridge.in.after-push", 100, true},
		{"bridge.in.after-ack", 100, false},
	}
	for _, tc := range cases {
		t.Run(tc.point, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t)
			js := srv.client(t)
			fillStream(t, js, "KI", "ki.msgs", 0, n)
			b := newRing(t, 2048)
			rb := openRing(t, b)
			args := inArgs(srv, b, "KI", "ki.msgs", "--batch", "64")
			dead := startBridge(t, proctest.Arm(tc.point, tc.after), args...)
			dead.waitKilledAt(t, tc.point)

			next := startBridge(t, nil, args...)
			got := newTally()
			drainRing(t, rb, got, n)
			if tc.wantSomeDup {
				// Its redelivery comes after the ack wait, maybe after
				// every message has arrived once: wait for it.
				drainCopies(t, rb, got, n+1)
			}
			st := next.stop(t)
			dups := got.check(t, n) // and every copy of a message carries its one id (tally.add)
			got.idsDistinct(t)
			if uint64(dups) > st.Counters["redelivered"] {
				t.Fatalf("%d duplicates in the ring, but JetStream redelivered only %d: %v", dups, st.Counters["redelivered"], st.Counters)
			}
			if tc.wantSomeDup && dups == 0 {
				t.Fatalf("no duplicate: the message pushed before the kill was not acked, so it must come again")
			}
		})
	}
}
