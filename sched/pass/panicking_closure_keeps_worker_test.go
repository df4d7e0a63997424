package pass

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/sched/heartbeat"
)

// A closure that panics becomes an error result (its message, with the
// first lines of the stack, may be truncated), and the worker goes on:
// the worker process (one worker goroutine) survives, keeps its
// registration, and runs the next pass to a result.
func TestPanickingClosureBecomesErrorAndWorkerGoesOn(t *testing.T) {
	f := newSchedFiles(t)
	s, err := Start(f.config(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	worker := startBenchChild(t, f) // WORKERS=1
	before := workerSlot(t, s, worker.PID())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := s.Submitter().Submit(ctx, closurePanic, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Collector().Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Token != tok || r.Status&^StatusTruncated != StatusError || !errors.Is(r.Err(), ErrFailed) ||
		!strings.Contains(r.Err().Error(), "closure panicked: kaboom: first") {
		t.Fatalf("panicking pass: %+v (%v)", r, r.Err())
	}

	tok, err = s.Submitter().Submit(ctx, closureEcho, []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err = s.Collector().Recv(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Token != tok || r.Err() != nil || string(r.Data) != "second" {
		t.Fatalf("the pass after the panic: %+v (%v)", r, r.Err())
	}
	select {
	case <-worker.Done():
		t.Fatalf("the worker process exited: %v", worker.Wait())
	default:
	}
	if after := workerSlot(t, s, worker.PID()); after.Slot != before.Slot || after.Gen != before.Gen {
		t.Fatalf("the worker's registration changed: %+v, then %+v", before, after)
	}
	worker.Stop(t)
}

// workerSlot is the live heartbeat slot of the process pid.
func workerSlot(t *testing.T, s *Scheduler, pid int) heartbeat.Participant {
	t.Helper()
	for _, p := range s.Heartbeat().Snapshots() {
		if p.State == "active" && int(p.ID.PID) == pid {
			return p
		}
	}
	t.Fatalf("pid %d is not registered", pid)
	return heartbeat.Participant{}
}
