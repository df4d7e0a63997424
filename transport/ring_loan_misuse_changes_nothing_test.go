package transport

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/shmkit/shmkit/layout"
)

// A loan can be ended once, by the handle that took it, while that handle
// is attached. Every other use (a second Publish or Abort, a stale loan
// whose slot has been loaned again, another handle's or another ring's
// loan, the zero Loan, a loan after Close, two goroutines ending one loan
// at once) fails with an error and changes nothing in the file.

// ringImage is every slot word and counter of a ring.
type ringImage struct {
	words    []uint64
	counters Counters
}

func imageOf(r *Ring) ringImage { return ringImage{r.snapshotSlots(), r.Counters()} }

func (a ringImage) equal(b ringImage) bool {
	return slices.Equal(a.words, b.words) && a.counters == b.counters
}

// refused calls end, which must fail with want and leave r as it was.
func refused(t *testing.T, r *Ring, what string, want error, end func() error) {
	t.Helper()
	before := imageOf(r)
	err := end()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
	if after := imageOf(r); !after.equal(before) {
		t.Fatalf("%s changed the ring:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

func TestLoanEndsOnce(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	published, err := r.TryLoan(8)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Publish(published); err != nil {
		t.Fatal(err)
	}
	refused(t, r, "Publish twice", ErrLeaseLost, func() error { return r.Publish(published) })
	refused(t, r, "PublishN after Publish", ErrLeaseLost, func() error { return r.PublishN(published, 1) })
	refused(t, r, "Abort after Publish", ErrLeaseLost, func() error { return r.Abort(published) })

	aborted, err := r.TryLoan(8)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Abort(aborted); err != nil {
		t.Fatal(err)
	}
	refused(t, r, "Abort twice", ErrLeaseLost, func() error { return r.Abort(aborted) })
	refused(t, r, "Publish after Abort", ErrLeaseLost, func() error { return r.Publish(aborted) })
	refused(t, r, "the zero Loan", ErrLeaseLost, func() error { return r.Publish(Loan{}) })
	refused(t, r, "the zero Loan", ErrLeaseLost, func() error { return r.Abort(Loan{}) })
	// The published loan's 8 bytes, and nothing of the aborted one.
	buf := make([]byte, 64)
	if n, err := r.TryPop(buf); err != nil || n != 8 {
		t.Fatalf("pop: %d bytes, %v", n, err)
	}
	if _, err := r.TryPop(buf); err != ErrEmpty {
		t.Fatalf("second pop: %v", err)
	}
}

// TestStaleLoanMissesItsSlotsNextLoan: a loan ended long ago does not
// end the loan that now holds its slot a lap later, taken by the same
// handle (same owner stamp, another lap).
func TestStaleLoanMissesItsSlotsNextLoan(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 2})
	buf := make([]byte, 64)
	var first Loan
	for i := 0; i < 2; i++ {
		l, err := r.TryLoan(20)
		if err != nil {
			t.Fatal(err)
		}
		copy(l.Data(), encodeMsg(uint64(i)))
		if err := r.Publish(l); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = l
		}
		if _, err := r.TryPop(buf); err != nil {
			t.Fatal(err)
		}
	}
	now, err := r.TryLoan(20)
	if err != nil {
		t.Fatal(err)
	}
	if now.Slot() != first.Slot() || now.Position() == first.Position() {
		t.Fatalf("positions %d and %d", first.Position(), now.Position())
	}
	refused(t, r, "Publish of the stale loan", ErrLeaseLost, func() error { return r.Publish(first) })
	refused(t, r, "Abort of the stale loan", ErrLeaseLost, func() error { return r.Abort(first) })
	copy(now.Data(), encodeMsg(7))
	if err := r.Publish(now); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, r); len(got) != 1 || got[0] != 7 {
		t.Fatalf("drained %v", got)
	}
}

// TestLoanOfAnotherHandleIsRefused: a loan is its handle's, even on the
// same file (another participant) and certainly on another ring.
func TestLoanOfAnotherHandleIsRefused(t *testing.T) {
	a := newRing(t, RingConfig{Capacity: 4})
	b, err := OpenRing(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other := newRing(t, RingConfig{Capacity: 4})
	lb, err := b.TryLoan(20)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := other.TryLoan(20)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, a, "Publish of another handle's loan", ErrLeaseLost, func() error { return a.Publish(lb) })
	refused(t, a, "Abort of another handle's loan", ErrLeaseLost, func() error { return a.Abort(lb) })
	refused(t, a, "Publish of another ring's loan", ErrLeaseLost, func() error { return a.Publish(lo) })
	refused(t, a, "Abort of another ring's loan", ErrLeaseLost, func() error { return a.Abort(lo) })
	copy(lb.Data(), encodeMsg(5))
	if err := b.Publish(lb); err != nil {
		t.Fatalf("the owner's Publish after the refusals: %v", err)
	}
	if err := other.Abort(lo); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, a); len(got) != 1 || got[0] != 5 {
		t.Fatalf("drained %v", got)
	}
}

// TestCloseRollsBackLoans: Close aborts the loans its handle still holds
// (the positions are skipped, counted abandoned, the messages after them
// delivered); ending such a loan afterwards is refused without touching
// the unmapped file.
func TestCloseRollsBackLoans(t *testing.T) {
	a := newRing(t, RingConfig{Capacity: 8})
	b, err := OpenRing(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	l1, err := b.TryLoan(20)
	if err != nil {
		t.Fatal(err)
	}
	pushIDs(t, a.TryPush, 1)
	l2, err := b.TryLoan(20)
	if err != nil {
		t.Fatal(err)
	}
	pushIDs(t, a.TryPush, 2)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []Loan{l1, l2} {
		if err := b.Publish(l); err != ErrNotAttached {
			t.Fatalf("Publish after Close: %v", err)
		}
		if err := b.Abort(l); err != ErrNotAttached {
			t.Fatalf("Abort after Close: %v", err)
		}
	}
	if _, err := b.TryLoan(1); err != ErrNotAttached {
		t.Fatalf("TryLoan after Close: %v", err)
	}
	if c := a.Counters(); c.Abandoned != 2 {
		t.Fatalf("counters after Close %+v", c)
	}
	if rep := a.Check(); !rep.Clean() {
		t.Fatalf("Check after Close: %+v", rep.Findings)
	}
	assertHealthy(t, a)
	if got := drain(t, a); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("drained %v", got)
	}
}

// TestUnattachedHandlesTakeNoLoans: read-only and repair handles have no
// entry to stamp a slot with.
func TestUnattachedHandlesTakeNoLoans(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	for _, open := range []func(string) (*Ring, error){
		func(p string) (*Ring, error) { return OpenRingReadOnly(p) },
		func(p string) (*Ring, error) { return OpenRingForRepair(p) },
	} {
		v, err := open(r.Path())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.TryLoan(1); err != ErrNotAttached {
			t.Fatalf("TryLoan: %v", err)
		}
		if _, err := v.Loan(t.Context(), 1); err != ErrNotAttached {
			t.Fatalf("Loan: %v", err)
		}
		if err := v.Publish(Loan{}); err != ErrNotAttached {
			t.Fatalf("Publish: %v", err)
		}
		v.Close()
	}
}

// TestConcurrentEndsOfOneLoan: two goroutines ending the same loan at
// once (a Publish and an Abort, or two of either): exactly one wins, and
// the slot is what the winner made it.
func TestConcurrentEndsOfOneLoan(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	buf := make([]byte, 64)
	for i := 0; i < 300; i++ {
		l, err := r.TryLoan(20)
		if err != nil {
			t.Fatal(err)
		}
		copy(l.Data(), encodeMsg(uint64(i)))
		ends := []func() error{func() error { return r.Publish(l) }, func() error { return r.Abort(l) }}
		first, second := ends[i%2], ends[(i/2)%2]
		before := r.Counters()
		var errs [2]error
		var wg sync.WaitGroup
		for k, end := range []func() error{first, second} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[k] = end() }()
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: errors %v and %v: want exactly one to succeed", i, errs[0], errs[1])
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		c := r.Counters()
		published, abandoned := c.Pushed-before.Pushed, c.Abandoned-before.Abandoned
		if published+abandoned != 1 {
			t.Fatalf("round %d: %d published and %d abandoned", i, published, abandoned)
		}
		n, err := r.TryPop(buf)
		switch {
		case published == 1 && (err != nil || mustDecode(t, buf[:n]) != uint64(i)):
			t.Fatalf("round %d: published, then pop %v", i, err)
		case abandoned == 1 && err != ErrEmpty:
			t.Fatalf("round %d: aborted, then pop %v", i, err)
		}
	}
}

// TestLoanOnACorruptSlotWord: a loan whose slot word was overwritten by
// something no ring operation writes ends with ErrCorrupt, not a panic,
// and the word is left as it was found.
func TestLoanOnACorruptSlotWord(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	l, err := r.TryLoan(8)
	if err != nil {
		t.Fatal(err)
	}
	bad := layout.SlotWord{State: layout.SlotWriting, Owner: 1000, Lap: 0}.Pack() // owner outside the table
	r.slotWord(l.Slot()).Store(bad)
	refused(t, r, "Publish on a corrupt word", ErrCorrupt, func() error { return r.Publish(l) })
	refused(t, r, "Abort on a corrupt word", ErrCorrupt, func() error { return r.Abort(l) })
	r.slotWord(l.Slot()).Store(r.loanWord(0)) // restore it for Close
	if err := r.Abort(l); err != nil {
		t.Fatal(err)
	}
}
