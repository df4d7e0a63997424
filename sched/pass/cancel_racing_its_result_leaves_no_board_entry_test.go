package pass

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// Regression (found in review): Client.cancel decides to post (cl.cancelled = true) under c.mu,
// then posts the board request only later, outside the lock. If the pass's
// result arrives in between, settle sees the pass cancelled (late), clears
// the board for the token (nothing is there yet) and forgets the call;
// cancel then posts its request, which nobody will ever clear while the
// client lives: the entry leaks (until Close), the requests hint stays > 0
// (every worker scans the board on every pass), and enough of them fill the
// board so that later cancellations go undelivered.
//
// Deterministic version: the cancelling goroutine is held up just before
// board.request (at enter(), by holding life for writing, which is what a
// preemption at that point looks like) while the result is delivered.
func TestCancelRacingItsResultLeavesNoBoardEntry(t *testing.T) {
	f := newSchedFiles(t)
	running, gate := make(chan struct{}, 1), make(chan struct{})
	stallingPool(t, f, func(ctx context.Context, a []byte) ([]byte, error) {
		running <- struct{}{}
		<-gate
		return a, nil
	})
	c := startClient(t, f.client())
	h, err := c.Submit(context.Background(), closureStall, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	await(t, running, "the closure running")

	c.life.Lock() // the cancelling goroutine will stop at enter(), just before board.request
	cancelled := make(chan struct{})
	go func() { h.Cancel(); close(cancelled) }()
	eventually(t, "Cancel decided to post", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return h.call.cancelled
	})
	close(gate) // the result arrives now: settle finds the pass cancelled (late)
	eventually(t, "the late result settled", func() bool { return c.Stats().Late == 1 })
	c.life.Unlock()
	await(t, cancelled, "Cancel returned")

	time.Sleep(50 * time.Millisecond)
	if c.Pending() != 0 {
		t.Fatalf("pending %d", c.Pending())
	}
	if c.board.has(uint64(h.ID())) || c.board.requests.Load() != 0 {
		t.Fatalf("the cancel request of token %d is on the board for good (requests hint %d) although its result came and was dropped as late: nobody will clear it before Close",
			h.ID(), c.board.requests.Load())
	}
}

// The same race left to the scheduler: passes cancelled at random moments
// around their (fast) result's arrival. Every pass has settled and every
// result was taken; a board entry still in use afterwards is leaked.
func TestCancelsRacingResultsLeaveNoBoardEntries(t *testing.T) {
	f := newSchedFiles(t)
	cfg := f.pool(2)
	cfg.CancelEntries = 4096
	startPool(t, cfg)
	cc := f.client()
	cc.CancelEntries = 4096
	c := startClient(t, cc)
	ctx := context.Background()
	const n = 3000
	for i := 0; i < n; i++ {
		h, err := c.Submit(ctx, closureEcho, []byte("e"))
		if err != nil {
			t.Fatal(err)
		}
		// Spin a random while: the cancel lands before, during or after
		// the result's arrival.
		for end := time.Now().Add(time.Duration(rand.IntN(300)) * time.Microsecond); time.Now().Before(end); {
		}
		h.Cancel()
		_, _ = h.Wait(ctx)
	}
	eventually(t, "every pass settled", func() bool { return c.Pending() == 0 })
	time.Sleep(50 * time.Millisecond)
	if r := c.board.requests.Load(); r != 0 {
		n := 0
		for i := uint64(0); i < c.board.lay.Entries; i++ {
			if c.board.owner(i).Load() != 0 {
				n++
			}
		}
		t.Fatalf("%d board entries (hint %d) still held by the live client with no pass pending: leaked (stats %+v)", n, r, c.Stats())
	}
}

// Race cancels its losers just as their (fast) results come in, so a
// Race-heavy client leaks entries steadily: with the default 256-entry
// board it would eventually fill the board shared by every client of the
// queue, after which no cancellation reaches a worker
// (CancelsUndelivered) and every worker scans the board on every pass.
func TestRaceLosersLeaveNoBoardEntries(t *testing.T) {
	f := newSchedFiles(t)
	cfg := f.pool(2)
	cfg.CancelEntries = 4096
	startPool(t, cfg)
	cc := f.client()
	cc.CancelEntries = 4096
	c := startClient(t, cc)
	ctx := context.Background()
	for i := 0; i < 2000; i++ {
		a, err := c.Submit(ctx, closureEcho, []byte("a"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Submit(ctx, closureEcho, []byte("b"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Race(ctx, a, b); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "every pass settled", func() bool { return c.Pending() == 0 })
	time.Sleep(50 * time.Millisecond)
	if r := c.board.requests.Load(); r != 0 {
		t.Fatalf("2000 races left %d board entries held by a live client with nothing pending (stats %+v)", r, c.Stats())
	}
}
