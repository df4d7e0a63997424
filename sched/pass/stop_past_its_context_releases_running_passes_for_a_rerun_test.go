package pass

import (
	"context"
	"errors"
	"testing"
)

// When Stop's context ends while a closure runs, the closure's context is
// cancelled, Stop returns (its error wraps the context's), the pass is
// released, and a worker in another process runs it again to a result:
// the one result its submitter receives. What the cut-short run returned
// (its context's error) is dropped, never answered.
func TestStopPastItsContextEndsRunningClosuresAndReleasesTheirPasses(t *testing.T) {
	f := newSchedFiles(t)
	c := startClient(t, f.client())
	started, sawEnd := make(chan struct{}), make(chan error, 1)
	stalling := stallingPool(t, f, func(ctx context.Context, a []byte) ([]byte, error) {
		close(started)
		<-ctx.Done() // blocks until cancelled
		sawEnd <- ctx.Err()
		return nil, ctx.Err()
	})
	h, err := c.Submit(context.Background(), closureStall, []byte("run me again"))
	if err != nil {
		t.Fatal(err)
	}
	await(t, started, "the closure started")

	if err := stalling.Stop(stopped()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop after its context ended: %v, want an error wrapping context.Canceled", err)
	}
	if err := await(t, sawEnd, "the closure saw its context cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the closure's context ended with %v", err)
	}
	if st := stalling.Stats(); st.Released != 1 {
		t.Fatalf("stats after Stop: %+v, want the one pass released", st)
	}
	// What the cancelled run returned is dropped, whether Stop or the
	// worker noticed first.
	eventually(t, "the cancelled run's result counted as late", func() bool { return stalling.Stats().LateResults == 1 })
	select {
	case <-h.Done():
		v, err := h.Wait(context.Background())
		t.Fatalf("the pass settled from the cut-short run: %q, %v", v, err)
	default:
	}

	startWorkers(t, f, 1)
	if got := awaitAll(t, []*Handle{h}); string(got[0]) != "run me again" {
		t.Fatalf("the re-run's result: %q", got[0])
	}
	if st := settled(t, f, c, 1); st.Resolved != 1 || st.Unmatched != 0 || st.Late != 0 {
		t.Fatalf("client stats %+v: want the re-run's result alone", st)
	}
	if st := stalling.Stats(); st.Executed != 1 || st.Released != 1 || st.LateResults != 1 {
		t.Fatalf("stalling pool stats %+v", st)
	}
}
