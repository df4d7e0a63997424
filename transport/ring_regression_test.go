package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport/check"
	"golang.org/x/sys/unix"
)

// Regression tests: each one reproduces a defect of the ring found in
// review (and since fixed); each says what it expects.

const reviewHelper = "TestRingReviewHelperProcess"

// TestRingReviewHelperProcess is the child side of the review tests. Roles:
//
//	review-claimall   lease every message in the ring, print "got ID" for
//	                  each, then SIGKILL itself while holding them all
func TestRingReviewHelperProcess(t *testing.T) {
	role, ok := proctest.Role()
	proctest.RunTruncator(role) // for fault_test.go
	if !ok || !strings.HasPrefix(role, "review-") {
		return
	}
	r, err := OpenRing(os.Getenv("SHMKIT_TEST_PATH"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	switch role {
	case "review-claimall":
		for {
			l, err := r.TryClaim()
			if err == ErrEmpty {
				break
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				os.Exit(1)
			}
			id, _ := decodeMsg(l.Data())
			fmt.Printf("got %d\n", id)
		}
		unix.Kill(os.Getpid(), unix.SIGKILL)
		select {}
	}
	os.Exit(2)
}

// fillAndLeaseAll pushes cap messages and leases every one of them with r.
func fillAndLeaseAll(t *testing.T, r *Ring) []Lease {
	t.Helper()
	var ls []Lease
	for i := uint64(0); i < r.Capacity(); i++ {
		if err := r.TryPush(encodeMsg(100 + i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(0); i < r.Capacity(); i++ {
		l, err := r.TryClaim()
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	return ls
}

// BUG 1 (burn storm). When every slot holds a lease (or poison), each push
// that fails with ErrFull still burns every slot once: the tail moves a full
// lap per failed attempt, and a blocking Push makes ~80 attempts before it
// sleeps (and one more per wake-up). Nothing bounds tail-head any more, slot
// laps run ahead of the head by more than the two laps take() tolerates, and
// after three failed attempts every consumer gets ErrCorrupt at the head,
// which then never moves again: the ring is dead for consumers although
// nothing is corrupt.
func TestReviewFailedPushesOnHeldRingBreakConsumers(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		t.Run(fmt.Sprintf("blocking=%v", blocking), func(t *testing.T) {
			r := newRing(t, RingConfig{Capacity: 2})
			leases := fillAndLeaseAll(t, r)
			if blocking {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				err := r.Push(ctx, encodeMsg(1))
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("push on a fully leased ring: %v", err)
				}
			} else {
				for i := 0; i < 3; i++ {
					if err := r.TryPush(encodeMsg(1)); err != ErrFull {
						t.Fatalf("push on a fully leased ring: %v", err)
					}
				}
			}
			c := r.Counters()
			t.Logf("after failed pushes: head %d tail %d depth %d burned %d", c.Head, c.Tail, c.Depth(), c.Burned)
			if c.Depth() > r.Capacity() {
				t.Errorf("Depth %d exceeds the capacity %d: failed pushes moved the tail on", c.Depth(), r.Capacity())
			}
			for _, l := range leases {
				if err := r.Ack(l); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.TryPush(encodeMsg(42)); err != nil {
				t.Fatalf("push after the leases were acked: %v", err)
			}
			l, err := r.TryClaim()
			if err != nil {
				t.Fatalf("claim after the leases were acked: %v", err)
			}
			if id, err := decodeMsg(l.Data()); err != nil || id != 42 {
				t.Fatalf("claimed %d %v, want 42", id, err)
			}
		})
	}
}

// BUG 2 (dead leases that fill the ring are never recovered). A consumer
// that leased every slot dies. Repair can only requeue a lease by pushing a
// copy, and there is no room (the dead leases are what fills the ring), so
// every lease is deferred, forever: recoverWithoutPush never re-publishes a
// lease in place (it does so only for a READING slot at the tail). The
// deferred counter never helps either: take() reports empty from the
// "lap L-1 lease" branch, which does not call requeueDeferred. The messages
// are never delivered again, TryPush is ErrFull and TryClaim ErrEmpty for
// good, and the dead entry stays "dead" in the table. (Each Repair also
// burns a lap through BUG 1.)
func TestReviewDeadLeasesFillingRingAreNeverRequeued(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4, Participants: 4})
	for id := uint64(1); id <= 4; id++ {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	c := proctest.StartTimeout(t, 30*time.Second, reviewHelper, "review-claimall", "SHMKIT_TEST_PATH="+r.Path())
	c.Wait()
	out, _ := c.Output()
	if got := len(childLog(out)["got"]); got != 4 {
		t.Fatalf("child leased %d messages, want 4\n%s", got, out)
	}
	var delivered []uint64
	for round := 0; round < 5 && len(delivered) < 4; round++ {
		rep, err := r.Repair()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("repair %d: %+v", round, rep)
		for {
			l, err := r.TryClaim()
			if err != nil {
				break
			}
			id, _ := decodeMsg(l.Data())
			delivered = append(delivered, id)
			r.Ack(l)
		}
	}
	if len(delivered) != 4 {
		s := r.Scan()
		t.Fatalf("the dead consumer's 4 leased messages were never delivered again (got %v); orphaned leases %d, deferred %d, TryPush: %v",
			delivered, countProblem(s, SlotOrphanedLease), s.Counters.Deferred, r.TryPush(encodeMsg(9)))
	}
}

// BUG 3 (stuck-slot healing starved by wake-ups). A blocked Pop whose head
// slot is WRITING by a dead producer heals the ring only when its futex wait
// *times out* (100 ms) with the slot unchanged. Every push behind the dead
// slot wakes the sleeper (it raised the waiter flag) before the timeout, so
// with a producer pushing more often than every 100 ms the consumer is never
// healed and receives nothing until the ring is full (here 511 pushes x 10 ms
// = ~5 s; with a 64k-slot ring fed 10 times a second, almost two hours),
// although the design promises ~100 ms.
func TestReviewDeadWriterHealingStarvedByWakeups(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 512, Participants: 8})
	runCrashChild(t, r.Path(), "producer", crashRingPushAfterWrite, 1, "FIRST=1", "COUNT=1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		_, err := r.Pop(ctx, buf)
		got <- err
	}()
	stopPush := make(chan struct{})
	pushDone := make(chan struct{})
	go func() {
		defer close(pushDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for id := uint64(10); ; id++ {
			select {
			case <-stopPush:
				return
			case <-tick.C:
			}
			if err := r.TryPush(encodeMsg(id)); err != nil {
				return
			}
		}
	}()
	defer func() { close(stopPush); <-pushDone }()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(1500 * time.Millisecond):
		cancel()
		<-got
		t.Fatalf("consumer still blocked behind a dead producer's slot after 1.5 s while messages kept arriving behind it (depth %d)", r.Counters().Depth())
	}
}

// BUG 4 (lost wake-up). TakePoisoned frees a slot without waking producers.
// A Push blocked on a ring whose every slot is held (lease or poison) sleeps
// with no stuck-slot timeout (the slot in its way is leased or poisoned, not
// "owned"), so it sleeps until its context ends although there is room.
func TestReviewTakePoisonedWakesBlockedProducers(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 2, DeliveryLimit: 1})
	// Make one poisoned message: delivered once, released, claimed again.
	r.TryPush(encodeMsg(1))
	l, err := r.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Release(l); err != nil {
		t.Fatal(err)
	}
	if _, err := r.TryClaim(); err != ErrEmpty {
		t.Fatalf("a message delivered DeliveryLimit times was not poisoned: %v", err)
	}
	// Hold the other slot with a lease: now every slot is held.
	r.TryPush(encodeMsg(2))
	held, err := r.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Ack(held)
	if err := r.TryPush(encodeMsg(3)); err != ErrFull {
		t.Fatalf("push into a ring of one lease and one poison: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- r.Push(ctx, encodeMsg(4)) }()
	time.Sleep(200 * time.Millisecond) // let it go to sleep
	buf := make([]byte, 64)
	if _, _, err := r.TakePoisoned(buf); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	if err := <-done; err != nil {
		t.Fatalf("blocked push not woken when TakePoisoned made room: %v after %v (room made %v in)",
			err, time.Since(start).Round(time.Millisecond), freed.Sub(start).Round(time.Millisecond))
	}
	if d := time.Since(freed); d > 500*time.Millisecond {
		t.Fatalf("blocked push took %v after TakePoisoned made room", d)
	}
}

// BUG 5 (deferred requeue skipped). A consumer about to report an empty ring
// is meant to check the deferred counter and run Repair (design: Recovery).
// take() does so only when the head slot is free or being written at the
// head's lap; when the head has caught up with the tail exactly at the slot
// of a deferred dead lease (LEASED at lap L-1: the "held lease from an
// earlier lap" branch) it reports ErrEmpty without looking. Once producers
// pause there, the dead consumer's message is stranded until someone calls
// Repair by hand: every Pop/Claim, blocking or not, reports or waits on an
// empty ring (the slot in the way is leased, not "owned", so no heal timer).
func TestReviewDeferredLeaseStrandedWhenHeadMeetsTailAtIt(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 4, Participants: 8})
	for id := uint64(1); id <= 4; id++ {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	// The child leases message 1 (slot 0) and dies holding it.
	hold := runCrashChild(t, r.Path(), "hold", "test.lease.processing", 1)
	if len(hold["got"]) != 1 || hold["got"][0] != 1 {
		t.Fatalf("child: %v", hold)
	}
	// The ring is full: the repair has to defer the lease.
	if rep := mustRepair(t, r); rep.Count(check.ActionDefer) != 1 {
		t.Fatalf("repair of a full ring: %+v", rep)
	}
	// Take 2, 3 and 4 (exactly: one more TryPop would meet a free slot at
	// the head and requeue the lease), then push three more.
	var delivered []uint64
	buf := make([]byte, 64)
	for i := 0; i < 3; i++ {
		n, err := r.TryPop(buf)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := decodeMsg(buf[:n])
		delivered = append(delivered, id)
	}
	for id := uint64(5); id <= 7; id++ {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Head and tail now meet at slot 0, which holds the dead lease one lap
	// behind. Deferred is still 1.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for len(delivered) < 7 {
		n, err := r.Pop(ctx, buf)
		if err != nil {
			c := r.Counters()
			t.Fatalf("after %v: %v; the dead consumer's message 1 is stranded (deferred %d, head %d, tail %d, orphaned leases %d)",
				delivered, err, c.Deferred, c.Head, c.Tail, countProblem(r.Scan(), SlotOrphanedLease))
		}
		id, _ := decodeMsg(buf[:n])
		delivered = append(delivered, id)
	}
	checkDelivery(t, seq(1, 7), delivered, map[uint64]bool{1: true})
}
