package pass

import (
	"context"
	"errors"
	"testing"

	"github.com/shmkit/shmkit/transport"
)

// Stop does not wait for a closure that ignores its context: it releases
// the pass and returns. A worker in another process runs the pass again
// and its result is the only one: when the abandoned run finally returns,
// its result is dropped and counted (Stats.LateResults), never pushed. The
// abandoned closure's arguments stay readable after its lease was
// released and the rings were unmapped.
func TestLateResultOfAbandonedRunIsDroppedAndCounted(t *testing.T) {
	f := newSchedFiles(t)
	s := startSched(t, f.config(0))
	started, unblock, argsAfter := make(chan struct{}), make(chan struct{}), make(chan string, 1)
	stalling := stallingScheduler(t, f, func(_ context.Context, a []byte) ([]byte, error) {
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
	tok, err := s.Submitter().Submit(context.Background(), closureStall, []byte("twice"))
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
	res := recvAll(t, s.Collector(), 1)
	if r, ok := res[tok]; !ok || r.Err() != nil || string(r.Data) != "twice" {
		t.Fatalf("the re-run's result: %+v", res)
	}

	close(unblock)
	if got := await(t, argsAfter, "the abandoned closure returned"); got != "twice" {
		t.Fatalf("the abandoned closure's arguments changed under it: %q", got)
	}
	eventually(t, "the late result counted", func() bool { return stalling.Stats().LateResults == 1 })
	if st := stalling.Stats(); st.Executed != 1 || st.Released != 1 {
		t.Fatalf("stats: %+v", st)
	}
	if r, err := s.Collector().TryRecv(); !errors.Is(err, transport.ErrEmpty) {
		t.Fatalf("the late result reached the result ring: %+v (%v)", r, err)
	}
}
