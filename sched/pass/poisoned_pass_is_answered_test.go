package pass

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport"
)

// Regression (found in review): the docs promise at-least-once delivery after a Stop that gave
// up ("A released pass runs again, so delivery is at least once, after a
// Stop as after a crash"). A released (or requeued) pass keeps its
// delivery count, and the submit ring poisons a message once it has had
// DeliveryLimit deliveries (default 5): it is set aside and never claimed
// again. Nothing in pass answers a poisoned pass, so its client's Wait
// hangs for ever and its InFlight credit is never given back, with live
// workers idle beside it. Five pools in a row that each had to give up on
// a long pass (rolling restarts with a short grace) are enough; so are
// five workers killed in it (a closure that crashes its process).
func TestPassAtItsDeliveryLimitIsAnsweredPoisoned(t *testing.T) {
	f := newSchedFiles(t)
	c := startClient(t, f.client())
	h, err := c.Submit(context.Background(), closureStall, []byte("long"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		running := make(chan struct{}, 1)
		p := stallingPool(t, f, func(ctx context.Context, a []byte) ([]byte, error) {
			running <- struct{}{}
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
		await(t, running, "the long pass running")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := p.Stop(ctx) // gives up: the pass is released for another worker
		cancel()
		if err == nil || p.Stats().Released != 1 {
			t.Fatalf("stop %d: %v, stats %+v", i, err, p.Stats())
		}
	}
	// A healthy pool now: the pass is quick to run.
	stallingPool(t, f, func(_ context.Context, a []byte) ([]byte, error) { return a, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	v, err := h.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the pass was released by 5 pools that gave up and is now poison in the submit ring (poisoned %d): a live pool idles, the client waits for ever, its credit is held (pending %d)",
			ringView(t, f.submit).Counters().Poisoned, c.Pending())
	}
	if !errors.Is(err, ErrPoisoned) || !errors.Is(err, ErrFailed) || v != nil {
		t.Fatalf("wait: %q, %v; want the pass answered with ErrPoisoned", v, err)
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d passes still pending (a credit held)", n)
	}
}

// A pass whose worker died on its last allowed delivery is poisoned by the
// next take and answered with ErrPoisoned; a pool killed while it holds
// the poisoned pass to answer it (pass.poison.after-claim) leaves an
// ordinary lease, requeued by the next watchdog, poisoned again and
// answered by another pool: the client hears once.
func TestPoolKilledAnsweringAPoisonedPassLosesNoAnswer(t *testing.T) {
	f := newSchedFiles(t)
	submit, err := transport.CreateRing(f.submit, transport.RingConfig{Capacity: 256, DeliveryLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	submit.Close()
	cfg := f.client()
	cfg.Ring.DeliveryLimit = 1
	c := startClient(t, cfg)
	h, err := c.Submit(context.Background(), closureEcho, []byte("pill"))
	if err != nil {
		t.Fatal(err)
	}
	// Its one delivery: a worker killed holding it. The pass is waiting
	// already, so the worker may die before it prints "ready": started
	// without waiting for that line (startWorkers would fail then).
	passHelper.Start(t, "worker", append(append(f.env(), "WORKERS=2", "DELIVERY_LIMIT=1"), proctest.Arm(crashPassWorkerAfterClaim, 1)...)...).WaitKilled(t, crashPassWorkerAfterClaim)
	// A pool that reclaims the worker (the pass is requeued at its limit),
	// poisons it on its next take, and dies answering it.
	doomed := passHelper.Start(t, "worker", append(append(f.env(), "WORKERS=1", "WATCHDOG=1", "DELIVERY_LIMIT=1"), proctest.Arm(crashPassPoisonAfterClaim, 1)...)...)
	doomed.WaitKilled(t, crashPassPoisonAfterClaim)
	// Another pool reclaims that one and answers.
	w := startWorkers(t, f, 1, "WATCHDOG=1", "DELIVERY_LIMIT=1")[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := h.Wait(ctx); !errors.Is(err, ErrPoisoned) {
		t.Fatalf("Wait: %v; want ErrPoisoned", err)
	}
	w.Stop(t)
	if st := c.Stats(); st.Resolved != 1 || st.Unmatched != 0 {
		t.Fatalf("client stats %+v", st)
	}
}
