package main

import (
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
)

// A bridge killed after its PubAcks and before its lease acks, restarted
// only after the stream's duplicate window (1 s here) has passed: the
// server stores the republished batch again, and the bridge, from its
// journal, counts every copy as a late duplicate and says so, one line
// each. Nothing is lost; the copies are visible, never hidden.
func TestRepublishAfterTheWindowIsALateDuplicate(t *testing.T) {
	const n, batch = 640, 64
	srv := startServer(t)
	js := srv.client(t)
	a := newRing(t, 1024)
	ra := openRing(t, a)
	produce(t, ra, 0, n)
	args := outArgs(srv, a, "LATE", "late.msgs", "--batch", "64", "--in-flight", "1", "--dup-window", "1s")
	dead := startBridge(t, proctest.Arm("bridge.out.after-puback", 3), args...)
	dead.waitKilledAt(t, "bridge.out.after-puback")
	// The server forgets an id between one and two windows after it
	// stored it (its purge runs on a timer): wait well past both.
	killed := time.Now()
	waitFor(t, "three windows to pass", func() bool { return time.Since(killed) > 3*time.Second })

	next := startBridge(t, nil, args...)
	waitFor(t, "every lease acked", func() bool { return ra.Counters().Acked >= n })
	st := next.stop(t)
	c := st.Counters
	if c["redelivered"] != batch || c["late_duplicates"] != batch || c["duplicates"] != 0 {
		t.Fatalf("counters %v; want the %d redelivered counted as late duplicates, none as duplicates", c, batch)
	}
	if dups := readStream(t, js, "LATE").check(t, n); dups != batch {
		t.Fatalf("the stream stores %d second copies, want the %d late ones", dups, batch)
	}
	if _, errOut := next.output(); strings.Count(errOut, "late duplicate: ") != batch {
		t.Fatalf("want %d late-duplicate lines on stderr, got:\n%s", batch, errOut)
	}
}
