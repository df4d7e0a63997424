package transport

import (
	"context"
	"testing"
	"time"
)

// The owner's own pop at the bottom makes room for the owner's own push,
// so a Push blocked on a full deque in another goroutine of the same
// handle must be woken by it, as a thief's steal or an ack wakes it. The
// check is on the wake itself (the futex sequence word moves inside the
// pop), not on how soon the push returns: a pop that does not wake would
// still let the push through when its sleep times out (after
// fileCheckInterval), so timing could not tell the two apart on a loaded
// machine.
func TestDequeOwnersPopWakesItsBlockedPush(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := map[bool]string{false: "TryPop", true: "TryPopBatch"}[batch]
		t.Run(name, func(t *testing.T) {
			d := newDeque(t, DequeConfig{Capacity: 4})
			pushIDs(t, d.TryPush, 1, 2, 3, 4)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- d.Push(ctx, encodeMsg(5)) }()
			// Wait until the push sleeps: it raised the waiter flag. (The
			// flag goes up only once the spinning is over; nothing else
			// raises it on this deque.)
			for d.notFullW.Load() == 0 {
				select {
				case err := <-done:
					t.Fatalf("push on a full deque returned %v", err)
				default:
				}
				time.Sleep(time.Millisecond)
			}
			seq := d.notFullSeq.Load()
			buf := make([]byte, d.MaxPayload())
			if batch {
				bufs, lens := [][]byte{buf}, []int{0}
				if n, err := d.TryPopBatch(bufs, lens); n != 1 || err != nil {
					t.Fatalf("owner's pop batch: %d, %v", n, err)
				}
			} else if _, err := d.TryPop(buf); err != nil {
				t.Fatalf("owner's pop: %v", err)
			}
			if got := d.notFullSeq.Load(); got == seq {
				t.Fatalf("the owner's pop made room but did not wake the owner's blocked push (sequence %d, flag %d)", got, d.notFullW.Load())
			}
			if err := <-done; err != nil {
				t.Fatalf("woken push: %v", err)
			}
			wantIDs(t, "left, newest first", drainDeque(t, d), 5, 3, 2, 1)
		})
	}
}
