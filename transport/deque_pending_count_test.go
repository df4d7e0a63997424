package transport

// The deque's pending count (returned messages not yet taken again) stays
// exact: a Repair racing live releases and takes never raises it above the
// returned slots, and a release killed halfway never makes it wrap. A wrong
// count makes every consumer that finds the deque empty scan all slots in
// vain. Each test below pins a fix; its comment says what the bug was and
// which commit added the test. (deque_pending_hint_drift_test.go checks
// that Check, PlanRepair and Repair agree about a damaged count.)

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
)

// TestRepairNeverRaisesPendingOverALiveRelease: a Repair run between a
// live Release's count and its mark leaves pending exact.
//
// Was a bug: Repair's pending recount raises pending to the number of RETURNED
// slots it scanned, which races with a live giveBack that has marked a slot
// RETURNED but not yet counted it (the window at crash point
// deque.return.after-mark, with the thief alive). Interleaving:
//
//  1. thief: Release -> giveBack: CAS slot LEASED -> RETURNED (pending 0)
//  2. repairer: Repair scans, returned = 1 > pending 0: pending := 1
//  3. thief: pending.Add(1) -> 2
//  4. anyone takes the returned message: pending 1, no returned slot left
//
// pending stays one too high for good without any crash, so every consumer
// that finds the deque empty scans all slots in vain forever - exactly what
// design.md says the never-reset rule prevents ("exact once every operation
// in flight has finished").
//
// Added in commit 7903a62 (the deque's first review fixes) as
// TestDequeRegressionRepairRecountRacesLiveRelease.
func TestRepairNeverRaisesPendingOverALiveRelease(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8})
	th := openThief(t, d)
	rep := openThief(t, d)
	if err := d.TryPush([]byte("a")); err != nil {
		t.Fatal(err)
	}
	l, err := th.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	// Release as it is now: count, then mark. A Repair in between must not
	// touch the count (it used to raise it to the marked slots it saw,
	// and the thief's own count then made it one too high for good).
	raw, sw, err := th.heldLease(l)
	if err != nil {
		t.Fatal(err)
	}
	th.pending.Add(1)
	if _, err := rep.Repair(); err != nil {
		t.Fatal(err)
	}
	back := layout.SlotWord{State: layout.SlotReturned, Deliveries: sw.Deliveries, Length: sw.Length, Lap: sw.Lap}
	if !th.slotWord(l.slot).CompareAndSwap(raw, back.Pack()) {
		t.Fatal("mark")
	}
	th.returned.Add(1)
	// 4. The message is taken again.
	buf := make([]byte, 64)
	if n, err := rep.TryPop(buf); err != nil || string(buf[:n]) != "a" {
		t.Fatalf("take returned: %q %v", buf[:n], err)
	}
	if st := d.Scan().States[layout.SlotReturned]; st != 0 {
		t.Fatalf("%d returned slots left", st)
	}
	if p := d.Counters().Pending; p != 0 {
		t.Errorf("pending %d with no returned slot and nothing in flight (want 0)", p)
	}
}

// TestPendingStaysExactWhenAKilledReleaseIsRepublished: a release killed
// after marking its slot, whose message the owner's push then republishes,
// leaves pending 0 after repair and drain (not 2^64-1).
//
// Was a bug: a consumer killed between marking a slot RETURNED and counting it
// (deque.return.after-mark) leaves pending one short; design.md says
// "Repair recounts; the owner's pushes re-publish the message anyway". But
// when the owner's push re-publishes it first, its pending-- takes pending
// from 0 to 2^64-1, and Repair's recount only ever raises pending: it stays
// at 2^64-1 for good (every empty pop scans all slots; Counters/verify
// report garbage).
//
// Added in commit 7903a62 (the deque's first review fixes) as
// TestDequeRegressionPendingWrapsAfterKilledRelease.
func TestPendingStaysExactWhenAKilledReleaseIsRepublished(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 4})
	if err := d.TryPush(encodeMsg(1)); err != nil {
		t.Fatal(err)
	}
	runDequeChild(t, d.Path(), "release", crashDequeReturnAfterMark, 1)
	// Counted before marked: the count is one, never short.
	if c := d.Counters(); c.Pending != 1 || d.Scan().States[layout.SlotReturned] != 1 {
		t.Fatalf("after the kill: %+v", c)
	}
	// Positions 1..3, then 4 = slot 0: the returned message is republished.
	for id := uint64(2); id <= 4; id++ {
		if err := d.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	d.TryPush(encodeMsg(5)) // republishes message 1 at position 4, then full
	if _, err := d.Repair(); err != nil {
		t.Fatal(err)
	}
	got := drainDeque(t, d)
	if len(got) != 4 {
		t.Fatalf("drained %v", got)
	}
	if p := d.Counters().Pending; p != 0 {
		t.Errorf("pending %d (%#x) after repair and drain, want 0", p, p)
	}
}

// TestRepairNeverRaisesPendingThroughAnABA: a Repair looping while
// returned messages are taken and others released keeps pending exactly at
// the returned slots.
//
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
// Exactly what TestRepairNeverRaisesPendingOverALiveRelease pins,
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
//
// Added in commit 7e51fc9 (the deque's second review fixes) as
// TestDequeRegression2RepairRaisesPendingABA.
func TestRepairNeverRaisesPendingThroughAnABA(t *testing.T) {
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
