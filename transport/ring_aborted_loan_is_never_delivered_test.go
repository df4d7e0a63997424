package transport

import (
	"context"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
)

// An aborted loan's position is rolled back exactly as a repair releases a
// dead producer's half-written slot: the slot is freed for the next lap,
// consumers step past the position, nothing of it is delivered, and the
// messages around it are, in order.

func TestAbortedLoanIsNeverDelivered(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	var want []uint64
	id := uint64(0)
	// Many laps of pushes and loans, every third loan aborted after it was
	// written out in full.
	for round := 0; round < 40; round++ {
		for k := 0; k < 3; k++ {
			id++
			if k != 1 {
				pushIDs(t, r.TryPush, id)
				want = append(want, id)
				continue
			}
			l, err := r.TryLoan(20)
			if err != nil {
				t.Fatal(err)
			}
			copy(l.Data(), encodeMsg(id))
			if round%3 == 0 {
				if err := r.Abort(l); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := r.Publish(l); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		got := drain(t, r)
		for _, g := range got {
			if len(want) == 0 || g != want[0] {
				t.Fatalf("round %d: delivered %d, want %v next", round, g, want)
			}
			want = want[1:]
		}
	}
	if len(want) != 0 {
		t.Fatalf("never delivered: %v", want)
	}
	c := r.Counters()
	if c.Abandoned != 14 || c.Depth() != 0 {
		t.Fatalf("counters %+v", c)
	}
	if rep := r.Check(); !rep.Clean() {
		t.Fatalf("Check: %+v", rep.Findings)
	}
	if s := r.Scan(); s.States[layout.SlotFree] != 4 {
		t.Fatalf("slots %+v", s.States)
	}
}

// TestAbortLetsBlockedCallsOn: calls waiting behind a loan get through
// once it is aborted: a consumer at its position (to the message pushed
// after it) and a producer a lap on (to the freed slot).
func TestAbortLetsBlockedCallsOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := newRing(t, RingConfig{Capacity: 2})
	l, err := r.TryLoan(20)
	if err != nil {
		t.Fatal(err)
	}
	pushIDs(t, r.TryPush, 1)
	pushed := make(chan error, 1)
	go func() { pushed <- r.Push(ctx, encodeMsg(2)) }() // full: the loan's slot, a lap on
	popped := make(chan uint64, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := r.Pop(ctx, buf)
		if err != nil {
			t.Error(err)
		}
		id, _ := decodeMsg(buf[:n])
		popped <- id
	}()
	if err := r.Abort(l); err != nil {
		t.Fatal(err)
	}
	if err := <-pushed; err != nil {
		t.Fatalf("producer behind the aborted loan: %v", err)
	}
	first := <-popped
	rest := drain(t, r)
	if first != 1 || len(rest) != 1 || rest[0] != 2 {
		t.Fatalf("delivered %d then %v, want 1 then [2]", first, rest)
	}
}
