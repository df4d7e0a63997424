package transport

// Regression tests for the work-stealing deque, from an adversarial review:
// each TestDequeRegression... test failed on the code as reviewed and pins
// the fix (the comment above each says what the bug was).

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

func reviewDrainSteal(t *testing.T, q *Deque) ([]uint64, error) {
	t.Helper()
	var got []uint64
	buf := make([]byte, 64)
	for {
		n, err := q.TryPop(buf)
		if err != nil {
			return got, err
		}
		got = append(got, binary.LittleEndian.Uint64(buf[:n]))
	}
}

// Was a bug: free() stores FREE(lease lap + 1) unconditionally. A LEASED take that
// is freed by free() (the owner's TrySteal/stealCopy, the owner's pop that
// takes from the top, TakeReturned, popReturned) can be burned by the
// owner's push between the take and the free: the slot's lap moves to the
// burned position's lap L, and free then stores FREE(L) - a "free at its
// own lap" slot inside [top, bottom). Thieves read it as "the owner is
// popping back" and report ErrEmpty forever; the owner's pop reports
// ErrCorrupt on it; messages behind it are never stolen.
//
// The interleaving is written out with the package internals: it is exactly
// stealCopy's body (steal, then free) with the owner's push in between, as
// happens when one goroutine of the owner handle calls TrySteal while
// another calls Push.
func TestDequeRegressionFreeAfterBurnLeavesFreeSlotInWindow(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 4})
	th := openThief(t, d)
	for i := uint64(0); i < 4; i++ {
		if err := d.TryPush(u64msg(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Owner goroutine 1: TrySteal -> stealCopy: steal(LEASED) ...
	l, err := d.steal(layout.SlotLeased, 64)
	if err != nil || binary.LittleEndian.Uint64(l.data) != 0 {
		t.Fatalf("steal: %v", err)
	}
	// Owner goroutine 2: Push. Position 4 is slot 0, still LEASED at lap 0:
	// burned (lap 1), then the window is full.
	if err := d.TryPush(u64msg(100)); err != ErrFull {
		t.Fatalf("push after burn: %v", err)
	}
	if c := d.Counters(); c.Burned != 1 {
		t.Fatalf("burned %d", c.Burned)
	}
	// Owner goroutine 1 finishes stealCopy: copy, free(slot, lap 0).
	d.free(l.slot, l.lap)
	// A thief steals message 1 (room for one more), the owner pushes 5.
	buf := make([]byte, 64)
	if _, err := th.TryPop(buf); err != nil {
		t.Fatal(err)
	}
	if err := d.TryPush(u64msg(5)); err != nil {
		t.Fatal(err)
	}
	got, err := reviewDrainSteal(t, th)
	t.Logf("thief drained %v (%v); slot 0 word %+v; counters %+v", got, err, layout.UnpackSlot(d.slotWord(0).Load()), d.Counters())
	if len(got) != 3 || got[2] != 5 {
		t.Errorf("thief drained %v, want [2 3 5]: message 5 is stuck behind FREE(lap 1) at burned position 4", got)
	}
	if _, err := d.TryPop(buf); err != nil && errors.Is(err, ErrCorrupt) {
		t.Errorf("owner pop on a healthy deque: %v", err)
	}
}

// Was a bug (same root cause as above), reached through the public API only: the
// owner handle steals from its own top in one goroutine (TrySteal, allowed:
// "All methods are safe for concurrent use") while pushing in another. A
// plain thief drains. Sooner or later a free lands on a burned position and
// the deque wedges (ErrCorrupt, or messages never delivered).
func TestDequeRegressionOwnerTryStealRacesOwnPush(t *testing.T) {
	n := uint64(200000)
	if proctest.RaceEnabled {
		n = 50000
	}
	d := newDeque(t, DequeConfig{Capacity: 4})
	th := openThief(t, d)
	seen := make([]atomic.Int32, n)
	var taken atomic.Uint64
	var firstErr atomic.Value
	fail := func(err error) {
		firstErr.CompareAndSwap(nil, err)
	}
	record := func(b []byte) {
		v := binary.LittleEndian.Uint64(b)
		if v < n {
			seen[v].Add(1)
			taken.Add(1)
		}
	}
	// Bounded by progress, not by time: a wedge stops every take and push
	// for good, while a loaded machine only slows them.
	var pushed atomic.Uint64
	ctx, cancel := context.WithCancel(progressContext(t, 20*time.Second, func() uint64 { return taken.Load() + pushed.Load() }))
	defer cancel()
	var wg sync.WaitGroup
	consumer := func(q *Deque) {
		defer wg.Done()
		buf := make([]byte, 64)
		for taken.Load() < n && ctx.Err() == nil && firstErr.Load() == nil {
			m, err := q.TrySteal(buf)
			switch {
			case err == nil:
				record(buf[:m])
			case err != ErrEmpty:
				fail(err)
				return
			}
		}
	}
	wg.Add(2)
	go consumer(d) // the owner's handle stealing at its own top
	go consumer(th)
	for i := uint64(0); i < n && firstErr.Load() == nil; i++ {
		for {
			err := d.TryPush(u64msg(i))
			if err == nil {
				pushed.Add(1)
				break
			}
			if err != ErrFull {
				fail(err)
				break
			}
			if ctx.Err() != nil {
				fail(errors.New("push never got room: deque wedged"))
				break
			}
		}
	}
	// Wait for the consumers (bounded by ctx).
	for taken.Load() < n && ctx.Err() == nil && firstErr.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	if taken.Load() < n && firstErr.Load() == nil {
		fail(errors.New("no progress: messages pushed but never stolen"))
	}
	cancel()
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		t.Fatalf("after %d of %d taken: %v; counters %+v", taken.Load(), n, err, d.Counters())
	}
	if taken.Load() != n {
		t.Fatalf("stuck at %d of %d taken; counters %+v; slots %+v", taken.Load(), n, d.Counters(), d.Scan().Slots)
	}
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Fatalf("message %d taken %d times", i, c)
		}
	}
}

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
func TestDequeRegressionRepairRecountRacesLiveRelease(t *testing.T) {
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

// Was a bug: a consumer killed between marking a slot RETURNED and counting it
// (deque.return.after-mark) leaves pending one short; design.md says
// "Repair recounts; the owner's pushes re-publish the message anyway". But
// when the owner's push re-publishes it first, its pending-- takes pending
// from 0 to 2^64-1, and Repair's recount only ever raises pending: it stays
// at 2^64-1 for good (every empty pop scans all slots; Counters/verify
// report garbage).
func TestDequeRegressionPendingWrapsAfterKilledRelease(t *testing.T) {
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

// Was a bug (liveness): a thief blocked in Steal on a deque whose owner was killed
// after announcing a pop (bottom := p, slot p still READY) never wakes:
// topSlot names slot p, which is READY (not owned), so sleep has no timeout
// and nobody checks the owner's death. The message sits in the file until
// someone calls Repair or Adopt by hand. The same holds for
// deque.push.after-write and deque.push.after-republish. Compare
// TestDequeBlockedThiefHealsDeadOwnersPop (after-take), which heals.
func TestDequeRegressionBlockedThiefDeadOwnerAnnouncedPop(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8})
	path := d.Path()
	d.Close()
	log := runDequeChild(t, path, "owner", crashDequePopAfterAnnounce, 1, "FIRST=1", "COUNT=1", "POP=1")
	if len(log["ok"]) != 1 {
		t.Fatalf("child log %v", log)
	}
	th, err := OpenDeque(path)
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	buf := make([]byte, th.MaxPayload())
	n, err := th.Steal(ctx, buf)
	if err != nil {
		t.Fatalf("blocked steal behind a dead owner's announced pop: %v (counters %+v, scan owner alive %v)", err, th.Counters(), th.Scan().OwnerAlive)
	}
	if id, err := decodeMsg(buf[:n]); err != nil || id != 1 {
		t.Fatalf("got %d %v", id, err)
	}
}

// Was a bug: when a process takes over a dead owner's participant entry
// (attach to a full table), reclaimStamp clears the owner word if the owner
// left no WRITING/READING slot - but a dead owner killed after announcing a
// pop (or after writing READY, or after a burn) has left bottom wrong with
// no stamped slot. With the owner word 0, Repair never runs fixBottom, so
// the message at bottom stays invisible to thieves: only Adopt recovers it.
// design.md's crash table says "a dead owner's bottom-side work is left to
// Repair", and Repair's doc says it sets bottom right when the owner died.
func TestDequeRegressionTakeoverClearsOwnerRepairCannotFixBottom(t *testing.T) {
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

// BUG (race, probabilistic): detach (Close) hands a lease back with a single
// giveBack CAS and no retry. If the owner burns past that lease between the
// load and the CAS (its lap moves), the CAS fails, the entry is freed
// anyway, and the slot stays LEASED by a free entry: Repair never returns
// it (the stamp is not dead, Scan calls it corrupt), the message is stuck
// until some process happens to attach to that entry. Repair's own
// give-back loop has the same no-retry pattern.
func TestDequeRegressionCloseRacesBurn(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 2, Participants: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second) // a probabilistic race: a bounded try
	defer cancel()
	var stop atomic.Bool
	var wg sync.WaitGroup
	// A plain thief keeps the owner moving round the laps.
	thief := openThief(t, d)
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64)
		for !stop.Load() {
			thief.TryPop(buf)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		i := uint64(0)
		for !stop.Load() {
			if d.TryPush(u64msg(i)) == nil {
				i++
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	for iter := 0; ctx.Err() == nil && iter < 1000; iter++ {
		h, err := OpenDeque(d.Path())
		if err != nil {
			t.Fatal(err)
		}
		var l Lease
		for {
			if l, err = h.TryClaim(); err == nil {
				break
			}
			if ctx.Err() != nil {
				h.Close()
				return
			}
		}
		stamp := uint16(h.Participant() + 1)
		slot := l.slot
		h.Close()
		sw := layout.UnpackSlot(d.slotWord(slot).Load())
		if sw.State == layout.SlotLeased && sw.Owner == stamp {
			stop.Store(true)
			t.Fatalf("iteration %d: after Close, slot %d is still %+v, leased by the closed (now free) entry %d; Repair leaves it: %+v",
				iter, slot, sw, stamp-1, func() check.RepairReport { r, _ := d.Repair(); return r }())
		}
	}
}

// Not a bug: the owner popping back over several burned positions, then a
// thief winning the last real message, leaves top and bottom consistent,
// and later pushes step over the burned positions.
func TestDequeRegressionPopBackOverBurnedThenThiefWins(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 4})
	th := openThief(t, d)
	for i := uint64(0); i < 4; i++ {
		d.TryPush(u64msg(i))
	}
	l0, _ := th.TryClaim() // pos 0
	l1, _ := th.TryClaim() // pos 1
	buf := make([]byte, 64)
	th.TryPop(buf) // 2
	th.TryPop(buf) // 3, top 4
	// pos 4, 5 burned; 6, 7 messages 10, 11.
	for i := uint64(10); i < 12; i++ {
		if err := d.TryPush(u64msg(i)); err != nil {
			t.Fatal(err)
		}
	}
	if c := d.Counters(); c.Burned != 2 || c.Bottom != 8 {
		t.Fatalf("%+v", c)
	}
	// A thief takes 10 (pos 6, stepping top over 4 and 5), the owner pops
	// 11 then finds 10 taken.
	if n, err := th.TryPop(buf); err != nil || binary.LittleEndian.Uint64(buf[:n]) != 10 {
		t.Fatal(err)
	}
	if n, err := d.TryPop(buf); err != nil || binary.LittleEndian.Uint64(buf[:n]) != 11 {
		t.Fatal(err)
	}
	if _, err := d.TryPop(buf); err != ErrEmpty {
		t.Fatal(err)
	}
	c := d.Counters()
	if c.Top != 7 || c.Bottom != 7 {
		t.Fatalf("top %d bottom %d", c.Top, c.Bottom)
	}
	th.Ack(l0)
	th.Release(l1)
	for i := uint64(20); i < 23; i++ {
		if err := d.TryPush(u64msg(i)); err != nil {
			t.Fatalf("push %d: %v %+v", i, err, d.Counters())
		}
	}
	got, err := reviewDrainSteal(t, th)
	if err != ErrEmpty {
		t.Fatal(err)
	}
	// Message 1 (released) is republished when the owner comes round to
	// its slot (position 9), between 21 and 22.
	if len(got) != 4 || got[0] != 20 || got[1] != 21 || got[2] != 1 || got[3] != 22 {
		t.Fatalf("drained %v, want [20 21 1 22]; %+v", got, d.Counters())
	}
	if c := d.Counters(); c.Pending != 0 || c.Top != c.Bottom {
		t.Fatalf("%+v", c)
	}
}

// BUG (narrow, low severity): a thief handle whose steal has CASed slot t to
// READING(self) but not yet moved top, and which adopts the deque meanwhile
// (another goroutine of the same handle calls Adopt after the owner
// closed), makes its own pop read READING(owner stamp) at p = top: not
// "consumed" (it looks like the owner's own bottom pop) and not READY, so
// popBottom reports ErrCorrupt on a healthy deque. Interleaving written
// with internals: the first half of steal (the slot CAS), then Adopt, then
// TryPop.
func TestDequeRegressionAdoptDuringOwnStealFalseCorrupt(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8})
	th := openThief(t, d)
	d.TryPush(u64msg(1))
	d.TryPush(u64msg(2))
	// th's steal, goroutine 1: takes position 0 (READING, stamped th); top
	// not moved yet.
	w := th.slotWord(0)
	raw := w.Load()
	sw := layout.UnpackSlot(raw)
	taken := layout.SlotWord{State: layout.SlotReading, Deliveries: 1, Owner: th.tab.Self, Length: sw.Length, Lap: sw.Lap}
	if sw.State != layout.SlotReady || !w.CompareAndSwap(raw, taken.Pack()) {
		t.Fatal("take")
	}
	d.Close()
	if _, err := th.Adopt(); err != nil { // th, goroutine 2
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := th.TryPop(buf); err != nil || binary.LittleEndian.Uint64(buf[:n]) != 2 {
		t.Fatalf("pop 2: %v", err)
	}
	if _, err := th.TryPop(buf); errors.Is(err, ErrCorrupt) {
		t.Errorf("pop with the handle's own steal in flight: %v", err)
	}
	// goroutine 1 finishes: top on, free.
	th.top.CompareAndSwap(0, 1)
	th.free(0, sw.Lap)
}

// Was a bug: an attach that takes over a dead owner's entry sets bottom
// right under the repair lock while its entry is still claiming; the
// lock's holder was judged by "active at the word's generation" only, so a
// concurrent Repair took the lock over and two repairers (then an adopter)
// could move bottom at once. A claiming entry of a live process holds it.
func TestDequeRegressionClaimingEntryHoldsRepairLock(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8, Participants: 4})
	th := openThief(t, d)
	// Entry 3 is being claimed by this (live) process, at generation 5,
	// and holds the repair lock by that generation.
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
	if _, err := th.Repair(); err != nil {
		t.Fatalf("repair after the claimer is gone: %v", err)
	}
}
