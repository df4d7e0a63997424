package transport

import (
	"errors"
	"testing"

	"github.com/shmkit/shmkit/layout"
)

// TestDequeTopStepsPastADeadThiefsTake: a thief killed between its take (the
// slot CAS) and its advance of top leaves top at the position it took;
// the owner's pop that reaches that position helps top past it, so that
// once the owner has drained the deque it is empty (Len 0, top = bottom)
// and takes Capacity pushes again, with no thief left to help.
//
// Was a bug: thieves help top past a consumed position, but the owner's
// pop, on meeting one at p = top, only put bottom back (p+1) and reported
// empty. The dead thief's message is returned by Repair and taken again
// (popReturned, TakeReturned: both by slot, never by top), and its slot
// freed a lap on, so no message is lost; but with no thief stealing
// afterwards nobody moved top past p: the drained deque reported Len 1
// and ErrFull one push early for good. Found by TestDequeChaos
// (SHMKIT_CHAOS_SEED=1796167379573612290: the parent drains as the owner
// after the thieves stopped, "after the drain: len 1").
//
// Both orders: repaired before the owner drains (the position holds the
// returned message, then FREE a lap on), and drained first (the position
// still holds the dead thief's READING word; Repair returns it below top
// afterwards).
func TestDequeTopStepsPastADeadThiefsTake(t *testing.T) {
	for _, tt := range []struct {
		name        string
		repairFirst bool
	}{
		{"repaired before the drain", true},
		{"drained before the repair", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const capacity = 8
			d := newDeque(t, DequeConfig{Capacity: capacity})
			for id := uint64(1); id <= 4; id++ {
				if err := d.TryPush(encodeMsg(id)); err != nil {
					t.Fatal(err)
				}
			}
			// The thief takes message 1 at position 0 and dies before it
			// moves top.
			runDequeChild(t, d.Path(), "steal", crashDequeStealAfterTake, 1)
			if c, w := d.Counters(), layout.UnpackSlot(d.slotWord(0).Load()); c.Top != 0 || c.Bottom != 4 || w.State != layout.SlotReading {
				t.Fatalf("after the kill: top %d bottom %d slot 0 %+v, want 0, 4 and the dead thief's READING", c.Top, c.Bottom, w)
			}
			repair := func() {
				t.Helper()
				if _, err := d.Repair(); err != nil {
					t.Fatal(err)
				}
			}
			if tt.repairFirst {
				repair()
			}
			delivered := drainDeque(t, d) // the owner pops 4, 3, 2 (and 1, returned)
			if !tt.repairFirst {
				repair()
				delivered = append(delivered, drainDeque(t, d)...) // 1, returned below top
			}
			buf := make([]byte, d.MaxPayload())
			if _, err := d.TakeReturned(buf); !errors.Is(err, ErrEmpty) {
				t.Fatalf("take returned after the drain: %v", err)
			}
			checkDelivery(t, seq(1, 4), delivered, map[uint64]bool{1: true})
			c := d.Counters()
			if d.Len() != 0 || c.Top != c.Bottom {
				t.Fatalf("after the drain: len %d, top %d bottom %d (slots %+v): top was left at the dead thief's position",
					d.Len(), c.Top, c.Bottom, d.Scan().Slots)
			}
			// The empty deque holds a whole capacity again.
			for i := uint64(0); i < capacity; i++ {
				if err := d.TryPush(encodeMsg(100 + i)); err != nil {
					t.Fatalf("push %d of %d into the drained deque: %v (top %d bottom %d)", i+1, capacity, err, d.Counters().Top, d.Counters().Bottom)
				}
			}
			if got := drainDeque(t, d); len(got) != capacity {
				t.Fatalf("drained %v, want %d messages", got, capacity)
			}
		})
	}
}
