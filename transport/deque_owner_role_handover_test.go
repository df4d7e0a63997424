package transport

// The owner role changes hands (Adopt, Disown, an attach taking over a
// dead owner's entry, a repair of a dead owner's bottom) without two
// handles ever moving bottom at once, and what a dead owner left at the
// bottom is recovered by the survivors. Each test below pins a fix; its
// comment says what the bug was and which commit added the test.

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// TestBlockedThiefHealsADeadOwnersAnnouncedPop: a thief blocked in Steal
// behind an owner killed after announcing a pop gets the message, without
// anyone calling Repair or Adopt.
//
// Was a bug (liveness): a thief blocked in Steal on a deque whose owner was killed
// after announcing a pop (bottom := p, slot p still READY) never wakes:
// topSlot names slot p, which is READY (not owned), so sleep has no timeout
// and nobody checks the owner's death. The message sits in the file until
// someone calls Repair or Adopt by hand. The same holds for
// deque.push.after-write and deque.push.after-republish. Compare
// TestDequeBlockedThiefHealsDeadOwnersPop (after-take), which healed already.
//
// Added in commit 7903a62 (the deque's first review fixes) as
// TestDequeRegressionBlockedThiefDeadOwnerAnnouncedPop.
func TestBlockedThiefHealsADeadOwnersAnnouncedPop(t *testing.T) {
	stealBehindDeadOwnersPop(t, crashDequePopAfterAnnounce, 3*time.Second)
}

// TestRepairFixesADeadOwnersBottomAfterItsEntryIsTakenOver: after an
// attach takes over the entry of an owner killed mid-pop, Repair still sets
// bottom right, and thieves steal the message.
//
// Was a bug: when a process takes over a dead owner's participant entry
// (attach to a full table), reclaimStamp clears the owner word if the owner
// left no WRITING/READING slot - but a dead owner killed after announcing a
// pop (or after writing READY, or after a burn) has left bottom wrong with
// no stamped slot. With the owner word 0, Repair never runs fixBottom, so
// the message at bottom stays invisible to thieves: only Adopt recovers it.
// design.md's crash table says "a dead owner's bottom-side work is left to
// Repair", and Repair's doc says it sets bottom right when the owner died.
//
// Added in commit 7903a62 (the deque's first review fixes) as
// TestDequeRegressionTakeoverClearsOwnerRepairCannotFixBottom.
func TestRepairFixesADeadOwnersBottomAfterItsEntryIsTakenOver(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8, Participants: 2})
	path := d.Path()
	d.Close()
	log := runDequeChild(t, path, "owner", crashDequePopAfterAnnounce, 1, "FIRST=1", "COUNT=1", "POP=1")
	if len(log["ok"]) != 1 {
		t.Fatalf("child log %v", log)
	}
	th1, err := OpenDeque(path) // the free entry
	if err != nil {
		t.Fatal(err)
	}
	defer th1.Close()
	th2, err := OpenDeque(path) // takes over the dead owner's entry
	if err != nil {
		t.Fatal(err)
	}
	defer th2.Close()
	rep, err := th1.Repair()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, th1.MaxPayload())
	n, err := th1.TrySteal(buf)
	if err != nil {
		t.Fatalf("after takeover and repair (%+v): steal %v; counters %+v; slots %+v", rep, err, th1.Counters(), th1.Scan().Slots)
	}
	if id, err := decodeMsg(buf[:n]); err != nil || id != 1 {
		t.Fatalf("got %d %v", id, err)
	}
}

// TestALiveClaimingEntryHoldsTheRepairLock: a repair lock word naming an
// entry that a live process is still claiming holds the lock against
// Repair and Adopt; once the entry is free the word names nobody.
//
// Was a bug: an attach that takes over a dead owner's entry sets bottom
// right under the repair lock while its entry is still claiming; the
// lock's holder was judged by "active at the word's generation" only, so a
// concurrent Repair took the lock over and two repairers (then an adopter)
// could move bottom at once. A claiming entry of a live process holds it.
//
// Added in commit 4ae2f78 (a live claiming entry holds a role word) as
// TestDequeRegressionClaimingEntryHoldsRepairLock.
func TestALiveClaimingEntryHoldsTheRepairLock(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8, Participants: 4})
	th := openThief(t, d)
	// Entry 3 is being claimed by this (live) process, at generation 5,
	// and holds the repair lock by that generation. A live claimer holds
	// its entry's lock (from another open file description than the
	// judges').
	holder := holdEntryLock(t, d.Path(), layout.DequeOffPeers, 3)
	e := d.tab.Entry(3)
	self := shm.Self()
	e.Start.Store(self.Start)
	e.Boot.Store(d.tab.Boot())
	e.Ctl.Store(layout.PeerCtl{State: layout.PeerClaiming, Gen: 5, PID: uint32(self.PID)}.Pack())
	d.tab.RepairLock().Store(peers.LockValue(4, 5))
	if _, err := th.Repair(); !errors.Is(err, ErrRepairBusy) {
		t.Fatalf("repair while a live claiming entry holds the lock: %v", err)
	}
	if _, err := th.Adopt(); !errors.Is(err, ErrRepairBusy) && !errors.Is(err, ErrOwnerAlive) {
		t.Fatalf("adopt while a live claiming entry holds the lock: %v", err)
	}
	// Once that entry is free, the word names nobody: taken over.
	e.Ctl.Store(layout.PeerCtl{State: layout.PeerFree, Gen: 6}.Pack())
	holder.Close()
	if _, err := th.Repair(); err != nil {
		t.Fatalf("repair after the claimer is gone: %v", err)
	}
}

// TestPushesRacingDisownEitherOwnTheDequeOrFailWithErrNotOwner: pushes
// racing a Disown and the next Adopt either succeed as the owner or fail
// with ErrNotOwner, and every message pushed comes out once.
//
// Was a bug (found in the second review of the deque, unproven then): TryPush, Push and
// TryPop checked the owner role before taking the owner mutex and not
// after, so a Disown in between let a handle that no longer owned the deque
// move bottom while another adopted it. Pushes racing a Disown now either
// succeed as the owner or fail with ErrNotOwner, and every message that
// was pushed comes out once.
//
// Added in commit 7e51fc9 (the deque's second review fixes) as
// TestDequeRegression2DisownRacesPush.
func TestPushesRacingDisownEitherOwnTheDequeOrFailWithErrNotOwner(t *testing.T) {
	for iter := 0; iter < 50; iter++ {
		d := newDeque(t, DequeConfig{Capacity: 64})
		next := openThief(t, d)
		var pushed atomic.Int64
		done := make(chan error, 1)
		go func() {
			for i := uint64(0); ; i++ {
				err := d.TryPush(u64msg(i))
				if errors.Is(err, ErrNotOwner) {
					done <- nil
					return
				}
				if err == nil {
					pushed.Add(1)
				} else if err != ErrFull {
					done <- err
					return
				}
			}
		}()
		time.Sleep(time.Duration(iter%5) * 100 * time.Microsecond)
		if err := d.Disown(); err != nil {
			t.Fatal(err)
		}
		if _, err := next.Adopt(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("push racing disown: %v", err)
		}
		more := 0
		for i := 0; i < 5; i++ {
			err := next.TryPush(u64msg(1 << 40))
			if err != nil && err != ErrFull {
				t.Fatal(err)
			}
			if err == nil {
				more++
			}
		}
		got := 0
		buf := make([]byte, 64)
		for {
			_, err := next.TryPop(buf)
			if err == ErrEmpty {
				break
			}
			if err != nil {
				t.Fatalf("after disown and adopt: %v", err)
			}
			got++
		}
		if want := int(pushed.Load()) + more; got != want {
			t.Fatalf("popped %d, pushed %d (+%d by the adopter)", got, pushed.Load(), more)
		}
		if rep := next.Scan(); rep.Problems != 0 || next.Len() != 0 {
			t.Fatalf("scan %+v", rep)
		}
	}
}
