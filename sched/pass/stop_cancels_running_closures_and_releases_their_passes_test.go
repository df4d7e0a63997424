package pass

import (
	"context"
	"errors"
	"testing"

	"github.com/shmkit/shmkit/transport"
)

// When Stop's context ends while a closure runs, the closure's context is
// cancelled, Stop returns (its error wraps the context's), the pass is
// released, and a worker in another process runs it again to a result:
// the one result its submitter receives.
func TestStopCancelsRunningClosureAndReleasesItsPass(t *testing.T) {
	f := newSchedFiles(t)
	s := startSched(t, f.config(0)) // submits and collects
	started, sawCancel := make(chan struct{}), make(chan error, 1)
	stalling := stallingScheduler(t, f, func(ctx context.Context, a []byte) ([]byte, error) {
		close(started)
		<-ctx.Done() // blocks until cancelled
		sawCancel <- ctx.Err()
		return nil, ctx.Err()
	})
	tok, err := s.Submitter().Submit(context.Background(), closureStall, []byte("run me again"))
	if err != nil {
		t.Fatal(err)
	}
	await(t, started, "the closure started")

	if err := stalling.Stop(stopped()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop after its context ended: %v, want an error wrapping context.Canceled", err)
	}
	if err := await(t, sawCancel, "the closure saw its context cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the closure's context ended with %v", err)
	}
	if st := stalling.Stats(); st.Released != 1 {
		t.Fatalf("stats after Stop: %+v, want the one pass released", st)
	}
	// What the cancelled run returned (its context's error) is dropped,
	// whether Stop or the worker noticed first.
	eventually(t, "the cancelled run's result counted as late", func() bool { return stalling.Stats().LateResults == 1 })

	startWorkers(t, f, 1)
	res := recvAll(t, s.Collector(), 1)
	if r, ok := res[tok]; !ok || r.Err() != nil || string(r.Data) != "run me again" {
		t.Fatalf("the re-run's result: %+v", res)
	}
	if r, err := s.Collector().TryRecv(); !errors.Is(err, transport.ErrEmpty) {
		t.Fatalf("a second result: %+v (%v)", r, err)
	}
}
