package pass

import (
	"context"
	"errors"
	"testing"
)

// Stop does not wait for a closure that ignores its context: it releases
// the pass and returns. A worker in another process runs the pass again
// and its result is the only one its submitter receives: when the
// abandoned run finally returns, its result is dropped and counted
// (Stats.LateResults), never pushed to the submitter's reply ring. The
// abandoned closure's arguments stay readable after its lease was
// released and the queue unmapped.
func TestLateResultOfAbandonedRunIsDroppedAndCounted(t *testing.T) {
	f := newSchedFiles(t)
	c := startClient(t, f.client())
	started, unblock, argsAfter := make(chan struct{}), make(chan struct{}), make(chan string, 1)
	stalling := stallingPool(t, f, func(_ context.Context, a []byte) ([]byte, error) {
		close(started)
		<-unblock // ignores its context
		argsAfter <- string(a)
		return []byte("late"), nil
	})
	defer func() {
		select {
		case <-unblock:
		default:
			close(unblock)
		}
	}()
	h, err := c.Submit(context.Background(), closureStall, []byte("twice"))
	if err != nil {
		t.Fatal(err)
	}
	await(t, started, "the closure started")

	if err := stalling.Stop(stopped()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop: %v, want an error wrapping context.Canceled", err)
	}
	// Stop returned with the closure still blocked: nothing late yet.
	if st := stalling.Stats(); st.Released != 1 || st.LateResults != 0 {
		t.Fatalf("stats after Stop: %+v", st)
	}

	startWorkers(t, f, 1)
	if got := awaitAll(t, []*Handle{h}); string(got[0]) != "twice" {
		t.Fatalf("the re-run's result: %q", got[0])
	}

	close(unblock)
	if got := await(t, argsAfter, "the abandoned closure returned"); got != "twice" {
		t.Fatalf("the abandoned closure's arguments changed under it: %q", got)
	}
	eventually(t, "the late result counted", func() bool { return stalling.Stats().LateResults == 1 })
	if st := stalling.Stats(); st.Executed != 1 || st.Released != 1 {
		t.Fatalf("stats: %+v", st)
	}
	// The abandoned worker exits once it has counted the late result: it
	// pushes nothing after. One result reached the reply ring, the re-run's.
	if st := settled(t, f, c, 1); st.Resolved != 1 || st.Unmatched != 0 {
		t.Fatalf("client stats %+v", st)
	}
	if n := ringView(t, c.ReplyPath()).Counters().Pushed; n != 1 {
		t.Fatalf("%d results reached the reply ring, want the re-run's alone", n)
	}
}
