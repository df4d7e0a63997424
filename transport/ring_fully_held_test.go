package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A ring whose every slot is held (leased, or poisoned) refuses pushes
// without damage and wakes blocked producers as soon as a slot is freed.
// Each test below pins a fix; its comment says what the bug was and which
// commit added the test.

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

// TestFailedPushesOnAFullyLeasedRingNeverMoveTheTailPastCapacity: pushes
// that fail on a ring whose every slot is leased leave the depth within the
// capacity, and the ring works again once the leases are acked.
//
// Was a bug (review bug 1, burn storm): when every slot holds a lease (or
// poison), each push that failed with ErrFull still burned every slot once:
// the tail moved a full lap per failed attempt, and a blocking Push makes
// ~80 attempts before it sleeps (and one more per wake-up). Nothing bounded
// tail-head any more, slot laps ran ahead of the head by more than the two
// laps take() tolerates, and after three failed attempts every consumer got
// ErrCorrupt at the head, which then never moved again: the ring was dead
// for consumers although nothing was corrupt.
//
// Added in commit 569245f (the ring's review fixes) as
// TestReviewFailedPushesOnHeldRingBreakConsumers.
func TestFailedPushesOnAFullyLeasedRingNeverMoveTheTailPastCapacity(t *testing.T) {
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

// TestTakePoisonedWakesBlockedProducers: a Push blocked on a ring of one
// lease and one poisoned message returns soon after TakePoisoned frees the
// poisoned slot.
//
// Was a bug (review bug 4, lost wake-up): TakePoisoned freed a slot without
// waking producers. A Push blocked on a ring whose every slot is held
// (lease or poison) sleeps with no stuck-slot timeout (the slot in its way
// is leased or poisoned, not "owned"), so it slept until its context ended
// although there was room.
//
// Added in commit 569245f (the ring's review fixes) as
// TestReviewTakePoisonedWakesBlockedProducers.
func TestTakePoisonedWakesBlockedProducers(t *testing.T) {
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
