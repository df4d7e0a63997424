package transport

// The owner and thieves (and goroutines of one handle playing both) racing
// on the same positions: a burn, a steal, a pop back, a Close or an Adopt
// in between another's steps never leaves the deque wedged, a slot lost, or
// a healthy deque reported corrupt. Each test below pins a fix (or, where it
// says so, an interleaving that was suspected and found sound); its comment
// says what the bug was and which commit added the test.

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
	"github.com/shmkit/shmkit/transport/check"
)

// drainSteal steals until the deque reports an error (ErrEmpty when it is
// empty), returning the 8-byte messages taken.
func drainSteal(t *testing.T, q *Deque) ([]uint64, error) {
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

// TestFreeAfterABurnNeverLeavesAFreeSlotInsideTheWindow: a take freed
// after the owner's push burned its position leaves no FREE word inside
// [top, bottom): thieves go on past it and the owner's pops stay healthy.
//
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
//
// Added in commit 7903a62 (the deque's first review fixes) as
// TestDequeRegressionFreeAfterBurnLeavesFreeSlotInWindow.
func TestFreeAfterABurnNeverLeavesAFreeSlotInsideTheWindow(t *testing.T) {
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
	got, err := drainSteal(t, th)
	t.Logf("thief drained %v (%v); slot 0 word %+v; counters %+v", got, err, layout.UnpackSlot(d.slotWord(0).Load()), d.Counters())
	if len(got) != 3 || got[2] != 5 {
		t.Errorf("thief drained %v, want [2 3 5]: message 5 is stuck behind FREE(lap 1) at burned position 4", got)
	}
	if _, err := d.TryPop(buf); err != nil && errors.Is(err, ErrCorrupt) {
		t.Errorf("owner pop on a healthy deque: %v", err)
	}
}

// TestOwnerStealingFromItsOwnTopNeverWedgesTheDeque: the owner handle
// stealing from its own top in one goroutine while pushing in another, with
// a plain thief alongside, takes every message exactly once.
//
// Was a bug (same root cause as above), reached through the public API only: the
// owner handle steals from its own top in one goroutine (TrySteal, allowed:
// "All methods are safe for concurrent use") while pushing in another. A
// plain thief drains. Sooner or later a free lands on a burned position and
// the deque wedges (ErrCorrupt, or messages never delivered).
//
// Added in commit 7903a62 (the deque's first review fixes) as
// TestDequeRegressionOwnerTryStealRacesOwnPush.
func TestOwnerStealingFromItsOwnTopNeverWedgesTheDeque(t *testing.T) {
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

// TestCloseHandsBackALeaseTheOwnerBurnsPast: a handle that closes while
// the owner burns past its lease still hands the lease back; no slot stays
// leased by a free entry.
//
// Was a bug (race, probabilistic): detach (Close) handed a lease back with a single
// giveBack CAS and no retry. If the owner burns past that lease between the
// load and the CAS (its lap moves), the CAS fails, the entry is freed
// anyway, and the slot stays LEASED by a free entry: Repair never returns
// it (the stamp is not dead, Scan calls it corrupt), the message is stuck
// until some process happens to attach to that entry. Repair's own
// give-back loop has the same no-retry pattern.
//
// Added in commit 7903a62 (the deque's first review fixes) as
// TestDequeRegressionCloseRacesBurn.
func TestCloseHandsBackALeaseTheOwnerBurnsPast(t *testing.T) {
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

// TestOwnerPoppingBackOverBurnedPositionsKeepsTopAndBottomConsistent: the
// owner popping back over burned positions while a thief wins the last real
// message leaves top == bottom, and later pushes step over the burned
// positions and republish a released message in order.
//
// Not a bug: the owner popping back over several burned positions, then a
// thief winning the last real message, leaves top and bottom consistent,
// and later pushes step over the burned positions.
//
// Added in commit 7903a62 (the deque's first review fixes) as
// TestDequeRegressionPopBackOverBurnedThenThiefWins.
func TestOwnerPoppingBackOverBurnedPositionsKeepsTopAndBottomConsistent(t *testing.T) {
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
	got, err := drainSteal(t, th)
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

// TestAdoptingDuringTheHandlesOwnStealNeverReportsCorrupt: a thief handle
// that adopts the deque while one of its own steals is in flight pops
// without ErrCorrupt.
//
// Was a bug (narrow, low severity): a thief handle whose steal has CASed slot t to
// READING(self) but not yet moved top, and which adopts the deque meanwhile
// (another goroutine of the same handle calls Adopt after the owner
// closed), makes its own pop read READING(owner stamp) at p = top: not
// "consumed" (it looks like the owner's own bottom pop) and not READY, so
// popBottom reports ErrCorrupt on a healthy deque. Interleaving written
// with internals: the first half of steal (the slot CAS), then Adopt, then
// TryPop.
//
// Added in commit 7903a62 (the deque's first review fixes) as
// TestDequeRegressionAdoptDuringOwnStealFalseCorrupt.
func TestAdoptingDuringTheHandlesOwnStealNeverReportsCorrupt(t *testing.T) {
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
