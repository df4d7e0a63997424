package transport

import (
	"context"
	"testing"
	"time"

	"github.com/shmkit/shmkit/transport/check"
)

// What a dead participant leaves in the ring (leases, a slot it was
// writing) is recovered: delivered again, or healed out of the way, by the
// survivors on proof of death, even when the ring is full of it, when
// pushes keep waking the consumer that should heal it, or when the head
// meets the tail at it. Each test below pins a fix; its comment says what
// the bug was and which commit added the test.

// TestDeadLeasesThatFillTheRingAreRequeued: a consumer that leased every
// slot dies; repeated Repairs deliver all its messages again.
//
// Was a bug (review bug 2, dead leases that fill the ring are never
// recovered): Repair could only requeue a lease by pushing a copy, and
// there is no room (the dead leases are what fills the ring), so every
// lease was deferred, forever: recoverWithoutPush never re-published a
// lease in place (it did so only for a READING slot at the tail). The
// deferred counter never helped either: take() reported empty from the
// "lap L-1 lease" branch, which did not call requeueDeferred. The messages
// were never delivered again, TryPush was ErrFull and TryClaim ErrEmpty for
// good, and the dead entry stayed "dead" in the table. (Each Repair also
// burned a lap through review bug 1, see
// TestFailedPushesOnAFullyLeasedRingNeverMoveTheTailPastCapacity.)
//
// Added in commit 569245f (the ring's review fixes) as
// TestReviewDeadLeasesFillingRingAreNeverRequeued.
func TestDeadLeasesThatFillTheRingAreRequeued(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4, Participants: 4})
	for id := uint64(1); id <= 4; id++ {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	// The child leases all four messages and dies holding them.
	if got := len(runCrashChild(t, r.Path(), "claimall", "test.lease.all-held", 1)["got"]); got != 4 {
		t.Fatalf("child leased %d messages, want 4", got)
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

// TestBlockedConsumerHealsADeadWriterWhilePushesKeepWakingIt: a consumer
// blocked behind a slot whose producer died mid-write heals it within the
// design's ~100 ms even while pushes behind the dead slot keep waking it.
//
// Was a bug (review bug 3, stuck-slot healing starved by wake-ups): a
// blocked Pop whose head slot is WRITING by a dead producer healed the ring
// only when its futex wait *timed out* (100 ms) with the slot unchanged.
// Every push behind the dead slot wakes the sleeper (it raised the waiter
// flag) before the timeout, so with a producer pushing more often than
// every 100 ms the consumer was never healed and received nothing until the
// ring was full (here 511 pushes x 10 ms = ~5 s; with a 64k-slot ring fed
// 10 times a second, almost two hours).
//
// Added in commit 569245f (the ring's review fixes) as
// TestReviewDeadWriterHealingStarvedByWakeups.
func TestBlockedConsumerHealsADeadWriterWhilePushesKeepWakingIt(t *testing.T) {
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

// TestDeferredDeadLeaseIsRequeuedWhenHeadMeetsTailAtIt: a dead consumer's
// lease that Repair had to defer (the ring was full) is delivered again by
// the consumers alone, even when the head catches up with the tail exactly
// at its slot.
//
// Was a bug (review bug 5, deferred requeue skipped): a consumer about to
// report an empty ring is meant to check the deferred counter and run
// Repair (design: Recovery). take() did so only when the head slot was free
// or being written at the head's lap; when the head had caught up with the
// tail exactly at the slot of a deferred dead lease (LEASED at lap L-1: the
// "held lease from an earlier lap" branch) it reported ErrEmpty without
// looking. Once producers paused there, the dead consumer's message was
// stranded until someone called Repair by hand: every Pop/Claim, blocking
// or not, reported or waited on an empty ring (the slot in the way is
// leased, not "owned", so no heal timer).
//
// Added in commit 569245f (the ring's review fixes) as
// TestReviewDeferredLeaseStrandedWhenHeadMeetsTailAtIt.
func TestDeferredDeadLeaseIsRequeuedWhenHeadMeetsTailAtIt(t *testing.T) {
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
