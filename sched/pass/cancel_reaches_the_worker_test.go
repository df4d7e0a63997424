package pass

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/sched/task"
)

// A pass cancelled while it runs in a worker process has its closure's
// context cancelled there (cause ErrCancelled); the handle settles as
// cancelled at once, and the result that still comes is dropped and
// counted as late, its request then cleared from the cancel board.
func TestCancelReachesTheRunningClosureInAnotherProcess(t *testing.T) {
	f := newSchedFiles(t)
	worker := startWorkers(t, f, 1)[0]
	c := startClient(t, f.client())
	ctx := context.Background()
	h, err := c.Submit(ctx, closureAwaitCancel, []byte("p1"))
	if err != nil {
		t.Fatal(err)
	}
	worker.WaitLine(t, "running p1")
	h.Cancel()
	if _, err := h.Wait(ctx); !errors.Is(err, task.ErrCancelled) || !errors.Is(err, ErrCancelled) {
		t.Fatalf("Wait after Cancel: %v", err)
	}
	line := worker.WaitLine(t, "saw cancel p1")
	if !strings.Contains(line, ErrCancelled.Error()) {
		t.Fatalf("closure's cause: %q", line)
	}
	eventually(t, "the late result counted", func() bool { return c.Stats().Late == 1 })
	eventually(t, "the request cleared from the board", func() bool { return c.board.requests.Load() == 0 })
	if st := c.Stats(); st.Cancelled != 1 || st.Resolved != 0 || c.Pending() != 0 {
		t.Fatalf("stats %+v, pending %d", st, c.Pending())
	}
	worker.Stop(t)
	if out := worker.WaitLine(t, "stats"); !strings.Contains(out, "cancelled=1") {
		t.Fatalf("worker: %s", out)
	}
}

// A pass cancelled before any worker claims it is skipped unrun: the
// worker that claims it answers "cancelled" without calling the closure.
func TestCancelledPassIsSkippedByTheWorkerThatClaimsIt(t *testing.T) {
	f := newSchedFiles(t)
	c := startClient(t, f.client())
	ctx := context.Background()
	h, err := c.Submit(ctx, closureAwaitCancel, []byte("never"))
	if err != nil {
		t.Fatal(err)
	}
	h.Cancel()
	worker := startWorkers(t, f, 1)[0]
	eventually(t, "the late result counted", func() bool { return c.Stats().Late == 1 })
	worker.Stop(t)
	out, _ := worker.Output()
	if strings.Contains(out, "running never") {
		t.Fatalf("the closure of a cancelled pass ran:\n%s", out)
	}
	if !strings.Contains(out, "cancelled=1") {
		t.Fatalf("worker: %s", out)
	}
}

// Race's losers are cancelled, and their workers hear of it: the closure
// of a loser running in another process sees its context cancelled.
func TestRaceLosersAreCancelledInTheirWorkers(t *testing.T) {
	f := newSchedFiles(t)
	worker := startWorkers(t, f, 1)[0] // two workers: both passes run at once
	c := startClient(t, f.client())
	ctx := context.Background()
	slow, err := c.Submit(ctx, closureAwaitCancel, []byte("loser"))
	if err != nil {
		t.Fatal(err)
	}
	worker.WaitLine(t, "running loser")
	fast, err := c.Submit(ctx, closureEcho, []byte("winner"))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	win, v, err := c.Race(rctx, slow, fast)
	if err != nil || win != fast || string(v) != "winner" {
		t.Fatalf("Race: %v %q %v", win, v, err)
	}
	worker.WaitLine(t, "saw cancel loser")
	if _, err := slow.Wait(ctx); !errors.Is(err, task.ErrCancelled) {
		t.Fatalf("loser: %v", err)
	}
	eventually(t, "the loser's late result counted", func() bool { return c.Stats().Late == 1 })
}

// Close cancels every pass still awaiting its result, with ErrClosed.
func TestCloseCancelsPendingPasses(t *testing.T) {
	f := newSchedFiles(t)
	c, err := NewClient(f.client())
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Submit(context.Background(), closureEcho, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Wait(context.Background()); !errors.Is(err, ErrClosed) || !errors.Is(err, task.ErrCancelled) {
		t.Fatalf("Wait after Close: %v", err)
	}
	if _, err := c.Submit(context.Background(), closureEcho, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}
	b, err := openBoard(f.submit, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if n := b.requests.Load(); n != 0 {
		t.Fatalf("%d requests left on the board", n)
	}
}
