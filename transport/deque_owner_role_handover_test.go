package transport

// Regression tests from a second adversarial review of the deque (after the
// first review's fixes). Each failed on the code as reviewed; the comment
// above each says what the bug was.

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// Was a bug: reclaimStamp (attach taking over a dead owner's entry) checks that
// the owner word names the dead entry, and only then takes the repair lock;
// it never looks at the owner word again. Between the two, a Repair or an
// Adopt can take the lock, fix bottom, hand the role to a live owner and
// release the lock (the dead owner's word names generation prevGen, the
// entry is now claiming at prevGen+1, so the owner is judged dead). The
// claimer then takes the free lock and runs fixBottom(deadStamp) while the
// new owner is live. fixBottom walks from bottom over READY words and
// stores bottom: run between the live owner's pop announce (bottom := p)
// and its CAS of slot p, it moves bottom back to p+1; the owner then takes
// p and frees it to FREE(lap p), a free word at its own lap inside
// [top, bottom). The owner's next pop reports ErrCorrupt on it, and thieves
// spin on it and report ErrEmpty while messages are below it.
//
// The interleaving is written with internals, each step exactly the code
// it stands for: claimEntry's claim, reclaimStamp's owner check, then an
// Adopt and the new owner's push and pop announce, then the rest of
// reclaimStamp (lock, fixBottom, owner CAS, unlock), then the rest of
// popBottom (CAS, copy, release-store FREE).
//
// Fix: in reclaimStamp, re-read the owner word after taking the lock and
// skip fixBottom unless it still names the dead owner (and release the
// lock); generally, fixBottom must only run under the lock with the owner
// word re-checked under it.
func TestDequeRegression2ReclaimOwnerCheckedBeforeLock(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8, Participants: 4})
	a := openThief(t, d)
	for i := uint64(1); i <= 2; i++ {
		if err := d.TryPush(u64msg(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Disown(); err != nil {
		t.Fatal(err)
	}
	// Entry 3 (stamp 4) at generation 7 is a dead owner (recorded in an
	// earlier boot), and the owner word names it.
	const stamp, prevGen = 4, 7
	self := shm.Self()
	e := d.tab.Entry(stamp - 1)
	e.Start.Store(self.Start)
	e.Boot.Store(d.tab.Boot() + 1)
	dead := layout.PeerCtl{State: layout.PeerActive, Gen: prevGen, PID: uint32(self.PID)}.Pack()
	e.Ctl.Store(dead)
	owner := peers.LockValue(stamp, prevGen)
	d.ownerWord.Store(owner)
	if !d.tab.StampDead(stamp) {
		t.Fatal("setup: entry not judged dead")
	}
	defer e.Ctl.Store(layout.PeerCtl{State: layout.PeerFree, Gen: prevGen + 2}.Pack())

	// Claimer C (this live process), claimEntry: the entry is claiming at
	// prevGen+1 and records us.
	claiming := layout.PeerCtl{State: layout.PeerClaiming, Gen: prevGen + 1, PID: uint32(self.PID)}.Pack()
	if !e.Ctl.CompareAndSwap(dead, claiming) {
		t.Fatal("claim")
	}
	e.Boot.Store(d.tab.Boot())
	// C, reclaimStamp: the owner word names the dead entry...
	if d.ownerWord.Load() != owner {
		t.Fatal("owner word")
	}
	// ... C is preempted here. A adopts (the lock is free; the owner word
	// names generation 7 of an entry now claiming at 8: dead).
	if _, err := a.Adopt(); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	// The new owner pushes 3 and starts popping it: announce bottom := 2.
	if err := a.TryPush(u64msg(3)); err != nil {
		t.Fatal(err)
	}
	p := a.bottom.Load() - 1
	a.bottom.Store(p)

	// C resumes reclaimStamp: the lock is free, so it takes it, and must
	// look at the owner word again before touching bottom.
	if !d.reclaimOwnerRole(stamp, prevGen) {
		t.Fatal("C could not take the lock")
	}
	if d.ownerWord.Load() != a.tab.MyLock() {
		t.Fatalf("the claimer cleared the live owner's role: owner word %#x", d.ownerWord.Load())
	}
	bottomAfterFix := a.bottom.Load()

	// A finishes popBottom: take p, copy, free it for its next push.
	w := a.slotWord(p)
	raw := w.Load()
	sw := layout.UnpackSlot(raw)
	lap := a.lay.LapOf(p)
	if sw.State != layout.SlotReady || layout.LapDiff(sw.Lap, lap) != 0 {
		t.Fatalf("slot %d: %+v", p, sw)
	}
	taken := layout.SlotWord{State: layout.SlotReading, Deliveries: sw.Deliveries + 1, Owner: a.tab.Self, Length: sw.Length, Lap: lap}
	if !w.CompareAndSwap(raw, taken.Pack()) {
		t.Fatal("owner take")
	}
	if v := binary.LittleEndian.Uint64(a.payload(p, sw.Length)); v != 3 {
		t.Fatalf("popped %d", v)
	}
	storeRelease((*uint64)(unsafe.Pointer(w)), layout.SlotWord{Lap: lap}.Pack())
	a.ownerPopped.Add(1)

	e.Ctl.CompareAndSwap(claiming, layout.PeerCtl{State: layout.PeerActive, Gen: prevGen + 1, PID: uint32(self.PID)}.Pack())

	if bottomAfterFix != p {
		t.Errorf("the claimer's fixBottom moved a live owner's bottom from its announced pop %d to %d", p, bottomAfterFix)
	}
	buf := make([]byte, 64)
	n, err := a.TryPop(buf)
	if err != nil || binary.LittleEndian.Uint64(buf[:n]) != 2 {
		t.Errorf("owner pop after the claimer's fixBottom: %v (want message 2); counters %+v, slot %d %+v",
			err, a.Counters(), p, layout.UnpackSlot(a.slotWord(p).Load()))
	}
}

// Was a bug (probabilistic, liveness): Repair raises pending to the RETURNED
// slots it counted when that is more than the value it read before the
// scan, by a CAS from that value. The CAS only proves the value is the
// same, not that nothing happened (ABA): a consumer takes a returned
// message in a slot the scan has already counted (pending - 1) and a
// release marks another slot the scan has not reached yet (pending + 1).
// pending is back to the value read, the scan counted one message twice
// (marked = pending + 1), and the CAS raises pending one above the
// returned slots for good, with no crash: every consumer that finds the
// deque empty then scans all slots in vain (ringctl verify reports it).
// Exactly what TestDequeRegressionRepairRecountRacesLiveRelease pinned,
// reached through the ABA.
//
// Here a worker keeps two messages cycling: A returned in slot 0 and B
// leased in the last slot; it takes A (pending 1 -> 0) and releases B
// (0 -> 1), takes B, releases A. Nothing is ever in flight at the check
// points, where pending must be exactly 1. A Repair loops alongside.
//
// Fix: Repair must not raise pending from a snapshot of a live count; e.g.
// raise it only when no return/take can be in flight (never, online), or
// make the count exact by another mechanism (a sequence counter bumped by
// every count and uncount, read before and after the scan, and the raise
// only when it did not move).
func TestDequeRegression2RepairRaisesPendingABA(t *testing.T) {
	const capacity = 256
	q := newDeque(t, DequeConfig{Capacity: capacity, Participants: 4, DeliveryLimit: 15})
	w := openThief(t, q)
	r := openThief(t, q)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if _, err := r.Repair(); err != nil && !errors.Is(err, ErrRepairBusy) {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	buf := make([]byte, 64)
	claim := func(wantSlot uint64) Lease {
		t.Helper()
		l, err := w.TryClaim()
		if err != nil {
			t.Fatalf("claim: %v; %+v", err, q.Counters())
		}
		if l.slot != wantSlot {
			t.Fatalf("claimed slot %d, want %d", l.slot, wantSlot)
		}
		return l
	}
	deadline := time.Now().Add(time.Second) // it failed within milliseconds before the fix
	cycles := 0
	for time.Now().Before(deadline) {
		// B at the last slot, A at slot 0; fillers stolen at once.
		for q.bottom.Load()%capacity != capacity-1 {
			if err := q.TryPush(u64msg(0)); err != nil {
				t.Fatal(err)
			}
			if _, err := w.TrySteal(buf); err != nil {
				t.Fatal(err)
			}
		}
		q.TryPush(u64msg(1)) // B
		q.TryPush(u64msg(2)) // A
		lB := claim(capacity - 1)
		lA := claim(0)
		if err := w.Release(lA); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 12; k++ {
			lA = claim(0)                         // take A: pending 1 -> 0
			if err := w.Release(lB); err != nil { // B: pending 0 -> 1
				t.Fatal(err)
			}
			lB = claim(capacity - 1)
			if err := w.Release(lA); err != nil {
				t.Fatal(err)
			}
			cycles++
			if p := q.pending.Load(); p != 1 {
				t.Fatalf("after %d cycles: pending %d with one returned slot (%d) and nothing in flight", cycles, p, q.Scan().States[layout.SlotReturned])
			}
		}
		if err := w.Ack(lB); err != nil {
			t.Fatal(err)
		}
		lA = claim(0)
		if err := w.Ack(lA); err != nil {
			t.Fatal(err)
		}
		if p := q.pending.Load(); p != 0 {
			t.Fatalf("after %d cycles: pending %d with no returned slot and nothing in flight", cycles, p)
		}
	}
	t.Logf("%d cycles, no wrong raise seen", cycles)
}

// Was a bug (found in the same review, unproven then): TryPush, Push and
// TryPop checked the owner role before taking the owner mutex and not
// after, so a Disown in between let a handle that no longer owned the deque
// move bottom while another adopted it. Pushes racing a Disown now either
// succeed as the owner or fail with ErrNotOwner, and every message that
// was pushed comes out once.
func TestDequeRegression2DisownRacesPush(t *testing.T) {
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
