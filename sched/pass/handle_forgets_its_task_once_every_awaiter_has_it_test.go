package pass

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/shmkit/shmkit/sched/task"
	"github.com/shmkit/shmkit/transport"
)

func known(c *Client, h *Handle) bool {
	_, err := c.tasks.Status(h.ID())
	return err == nil
}

// The handle's task is forgotten once its Wait has the result and no join
// holds it; the handle keeps the result, and a later join restores it.
func TestHandleForgetsItsTaskOnceEveryAwaiterHasIt(t *testing.T) {
	f := newSchedFiles(t)
	startPool(t, f.pool(2))
	c := startClient(t, f.client())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	h1, err := c.Submit(ctx, closureEcho, []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := h1.Wait(ctx); err != nil || string(v) != "one" {
		t.Fatalf("Wait: %q %v", v, err)
	}
	if known(c, h1) {
		t.Fatal("task still kept after its only awaiter had the result")
	}
	if v, err := h1.Wait(ctx); err != nil || string(v) != "one" {
		t.Fatalf("second Wait: %q %v", v, err)
	}

	// A join holds every handle it includes until it returns, the
	// forgotten one restored with its kept outcome.
	h2, err := c.Submit(ctx, closureAwaitCancel, []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	joined := make(chan error, 1)
	go func() {
		_, err := c.All(ctx, h1, h2)
		joined <- err
	}()
	eventually(t, "the join restored the forgotten task", func() bool { return known(c, h1) })
	time.Sleep(10 * time.Millisecond)
	if !known(c, h1) {
		t.Fatal("task forgotten while a join held it")
	}
	h2.Cancel()
	if err := await(t, joined, "the join to return"); !errors.Is(err, task.ErrCancelled) {
		t.Fatalf("All: %v", err)
	}
	if known(c, h1) {
		t.Fatal("task kept after the join that restored it returned")
	}
	if !known(c, h2) {
		t.Fatal("task forgotten while its handle has not had its result")
	}
	if _, err := h2.Wait(ctx); !errors.Is(err, task.ErrCancelled) {
		t.Fatal(err)
	}
	if known(c, h2) {
		t.Fatal("task kept after every awaiter had it")
	}
}

// A handle dropped without Wait gives up its share when it is collected:
// its task is forgotten once settled.
func TestDroppedHandleIsForgottenOnceSettled(t *testing.T) {
	f := newSchedFiles(t)
	startPool(t, f.pool(1))
	c := startClient(t, f.client())
	h, err := c.Submit(context.Background(), closureEcho, []byte("dropped"))
	if err != nil {
		t.Fatal(err)
	}
	id := h.ID()
	<-h.Done()
	h = nil
	eventually(t, "the dropped handle's task forgotten", func() bool {
		runtime.GC()
		_, err := c.tasks.Status(id)
		return err != nil
	})
}

// A Submit that fails leaves nothing registered: no pending pass, no
// credit taken, no task.
func TestFailedSubmitLeavesNothingRegistered(t *testing.T) {
	f := newSchedFiles(t)
	cfg := f.client()
	cfg.Ring = transport.RingConfig{Capacity: 4}
	c := startClient(t, cfg)
	if _, err := c.Submit(context.Background(), closureEcho, make([]byte, c.MaxArgs()+1)); !errors.Is(err, ErrArgsTooLarge) {
		t.Fatalf("oversized args: %v", err)
	}
	var hs []*Handle
	for i := 0; i < 4; i++ {
		h, err := c.Submit(context.Background(), closureEcho, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Submit(ctx, closureEcho, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit to a full queue: %v", err)
	}
	if n, credits := c.Pending(), len(c.credits); n != 4 || credits != 4 {
		t.Fatalf("after a failed Submit: %d pending, %d credits taken; want 4, 4", n, credits)
	}
	failed := hs[3].ID() + 1 // the token the failed Submit drew
	if _, err := c.tasks.Status(failed); !errors.Is(err, task.ErrUnknown) {
		t.Fatalf("task of the failed Submit: %v", err)
	}
	if st := c.Stats(); st.Submitted != 4 {
		t.Fatalf("stats %+v", st)
	}
}

// The joins are the task scheduler's: empty groups, foreign handles, and
// Any passing over failures.
func TestClientJoins(t *testing.T) {
	f := newSchedFiles(t)
	startPool(t, f.pool(2))
	c := startClient(t, f.client())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if v, err := c.All(ctx); err != nil || len(v) != 0 {
		t.Fatalf("All(): %v %v", v, err)
	}
	if _, _, err := c.Race(ctx); !errors.Is(err, task.ErrEmptyGroup) {
		t.Fatalf("Race(): %v", err)
	}
	bad, err := c.Submit(ctx, closureFail, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	// bad has failed before good is submitted: with both in flight, good
	// may win first and bad be cancelled as a loser (so it went under
	// load), which is not Any passing over a failure.
	if _, err := c.All(ctx, bad); !errors.Is(err, ErrFailed) {
		t.Fatalf("All(bad): %v", err)
	}
	good, err := c.Submit(ctx, closureEcho, []byte("ok"))
	if err != nil {
		t.Fatal(err)
	}
	win, v, err := c.Any(ctx, bad, good)
	if err != nil || win != good || string(v) != "ok" {
		t.Fatalf("Any: %v %q %v", win, v, err)
	}
	outs, err := c.AllSettled(ctx, bad, good)
	if err != nil || len(outs) != 2 || !errors.Is(outs[0].Err, ErrFailed) || string(outs[1].Value) != "ok" {
		t.Fatalf("AllSettled: %+v %v", outs, err)
	}
	other := startClient(t, f.client())
	if _, err := other.All(ctx, good); !errors.Is(err, ErrForeignHandle) {
		t.Fatalf("foreign handle: %v", err)
	}
}
