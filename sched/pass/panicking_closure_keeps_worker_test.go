package pass

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/sched/heartbeat"
)

// A closure that panics becomes an error result (its message, with the
// first lines of the stack, may be truncated), and the worker goes on:
// the worker process (one worker goroutine) survives, keeps its
// registration, and runs the next pass to a result.
func TestPanickingClosureBecomesErrorAndWorkerGoesOn(t *testing.T) {
	f := newSchedFiles(t)
	c := startClient(t, f.client())
	worker := startBenchChild(t, f) // WORKERS=1
	before := workerSlot(t, c, worker.PID())

	h, err := c.Submit(context.Background(), closurePanic, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	err = waitErr(t, h)
	if !errors.Is(err, ErrFailed) || errors.Is(err, ErrUnknownClosure) || errors.Is(err, ErrMalformed) ||
		!strings.Contains(err.Error(), "closure panicked: kaboom: first") {
		t.Fatalf("panicking pass: %v", err)
	}

	h, err = c.Submit(context.Background(), closureEcho, []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	if got := awaitAll(t, []*Handle{h}); string(got[0]) != "second" {
		t.Fatalf("the pass after the panic: %q", got[0])
	}
	select {
	case <-worker.Done():
		t.Fatalf("the worker process exited: %v", worker.Wait())
	default:
	}
	if after := workerSlot(t, c, worker.PID()); after.Slot != before.Slot || after.Gen != before.Gen {
		t.Fatalf("the worker's registration changed: %+v, then %+v", before, after)
	}
	worker.Stop(t)
}

// workerSlot is the live heartbeat slot of the process pid.
func workerSlot(t *testing.T, c *Client, pid int) heartbeat.Participant {
	t.Helper()
	for _, p := range c.Heartbeat().Snapshots() {
		if p.State == "active" && int(p.ID.PID) == pid {
			return p
		}
	}
	t.Fatalf("pid %d is not registered", pid)
	return heartbeat.Participant{}
}
