package main

import (
	"strings"
	"syscall"
	"testing"
)

// SIGTERM while the server is gone: the out bridge cannot finish its
// batch, so after --drain-timeout it exits 1 with one line, handing its
// leases back to the ring (Close); a bridge started once the server is
// back publishes them under the same ids and nothing is lost or stored
// twice.
func TestDrainTimeoutHandsTheLeasesBack(t *testing.T) {
	const n = 500
	srv := startServer(t)
	js := srv.client(t)
	a := newRing(t, 1024)
	ra := openRing(t, a)
	args := outArgs(srv, a, "DT", "dt.msgs", "--drain-timeout", "1s")
	first := startBridge(t, nil, args...)
	first.waitLine(t, "bridging out:")
	produce(t, ra, 0, n/2)
	waitFor(t, "the first half acked", func() bool { return ra.Counters().Acked >= n/2 })
	srv.stop()
	produce(t, ra, n/2, n/2)
	waitFor(t, "leases held with the server gone", func() bool { c := ra.Counters(); return c.Claimed > c.Acked })
	_ = first.cmd.Process.Signal(syscall.SIGTERM)
	if code := first.code(); code != 1 {
		t.Fatalf("exit %d after a drain that cannot finish, want 1: %s", code, first.describe())
	}
	if _, errOut := first.output(); strings.Count(errOut, "\n") < 1 || !strings.Contains(errOut, "shmbridge: in-flight messages not finished before the drain timeout (1s)\n") {
		t.Fatalf("stderr %q: want the drain-timeout line", errOut)
	}
	if c := ra.Counters(); c.Requeued == 0 {
		t.Fatalf("the bridge exited without handing its leases back: %+v", c)
	}
	srv.start()
	next := startBridge(t, nil, args...)
	waitFor(t, "every lease acked", func() bool { return ra.Counters().Acked >= n })
	next.stop(t)
	if dups := readStream(t, js, "DT").check(t, n); dups != 0 {
		t.Fatalf("%d duplicates stored", dups)
	}
}
