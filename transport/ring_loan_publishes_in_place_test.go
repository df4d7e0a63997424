package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
)

// A loan is a push split in two: the position is taken when TryLoan or
// Loan returns, the message is written in place and appears when Publish
// returns, in the order of positions taken, as pushes do; nothing is
// copied on the way and the caller can never write outside the slot.

func TestLoanPublishesInPlace(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	l, err := r.TryLoan(5)
	if err != nil {
		t.Fatal(err)
	}
	d := l.Data()
	if len(d) != 5 || cap(d) != 5 {
		t.Fatalf("Data: len %d cap %d, want 5 and 5", len(d), cap(d))
	}
	if l.Position() != 0 || l.Slot() != 0 {
		t.Fatalf("position %d slot %d", l.Position(), l.Slot())
	}
	copy(d, "hello")
	// The bytes are the slot's own: a lease of the published message sees
	// the very same memory.
	if err := r.Publish(l); err != nil {
		t.Fatal(err)
	}
	le, err := r.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	if string(le.Data()) != "hello" || &le.Data()[0] != &d[0] {
		t.Fatalf("lease %q at %p, loan at %p", le.Data(), &le.Data()[0], &d[0])
	}
	if err := r.Ack(le); err != nil {
		t.Fatal(err)
	}
	if c := r.Counters(); c.Pushed != 1 || c.Abandoned != 0 {
		t.Fatalf("counters %+v", c)
	}
}

// TestLoanDataCannotReachPastItsSlot: appending to Data copies; it never
// writes the next slot's word or the rest of the payload.
func TestLoanDataCannotReachPastItsSlot(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	full, err := r.TryLoan(r.MaxPayload())
	if err != nil {
		t.Fatal(err)
	}
	before := r.slotWord(1).Load()
	grown := append(full.Data(), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	grown[0] = 1
	if r.slotWord(1).Load() != before || full.Data()[0] == 1 {
		t.Fatal("append to a full loan's Data wrote into the mapping")
	}
	small, err := r.TryLoan(3)
	if err != nil {
		t.Fatal(err)
	}
	copy(r.payload(small.Position(), uint32(r.MaxPayload()))[3:], "zzzz") // what lies past the loan
	_ = append(small.Data(), 'x')
	if got := string(r.payload(small.Position(), 7)[3:]); got != "zzzz" {
		t.Fatalf("append to a 3-byte loan wrote past it: %q", got)
	}
	if err := r.Abort(full); err != nil {
		t.Fatal(err)
	}
	if err := r.Abort(small); err != nil {
		t.Fatal(err)
	}
}

// TestLoansKeepPositionOrder: a loan's message is delivered at the
// position the loan took, however long after later pushes it is
// published; consumers wait at it meanwhile.
func TestLoansKeepPositionOrder(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	pushIDs(t, r.TryPush, 1)
	l, err := r.TryLoan(20)
	if err != nil {
		t.Fatal(err)
	}
	pushIDs(t, r.TryPush, 3)
	buf := make([]byte, 64)
	if n, err := r.TryPop(buf); err != nil || mustDecode(t, buf[:n]) != 1 {
		t.Fatalf("first pop: %v", err)
	}
	if _, err := r.TryPop(buf); err != ErrEmpty {
		t.Fatalf("pop at a held loan: %v, want ErrEmpty", err)
	}
	copy(l.Data(), encodeMsg(2))
	if err := r.Publish(l); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, r); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("after the publish: %v", got)
	}
}

func mustDecode(t *testing.T, b []byte) uint64 {
	t.Helper()
	id, err := decodeMsg(b)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPublishNSendsAPrefix: a loan taken for the whole payload publishes
// only the bytes PublishN names; asking for more than the loan holds is
// refused and the loan stays usable.
func TestPublishNSendsAPrefix(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	l, err := r.TryLoan(r.MaxPayload())
	if err != nil {
		t.Fatal(err)
	}
	copy(l.Data(), encodeMsg(9))
	for _, m := range []int{r.MaxPayload() + 1, -1} {
		if err := r.PublishN(l, m); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("PublishN(%d): %v, want ErrTooLarge", m, err)
		}
	}
	if s := r.Scan(); s.States[layout.SlotWriting] != 1 {
		t.Fatalf("the refused PublishN ended the loan: %+v", s.Slots)
	}
	if err := r.PublishN(l, 20); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := r.TryPop(buf); err != nil || n != 20 || mustDecode(t, buf[:n]) != 9 {
		t.Fatalf("popped %d bytes: %v", n, err)
	}
	// An empty message, from an empty loan and from PublishN 0.
	for _, n := range []int{0, 8} {
		l, err := r.TryLoan(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.PublishN(l, 0); err != nil {
			t.Fatal(err)
		}
		if n, err := r.TryPop(buf); err != nil || n != 0 {
			t.Fatalf("empty message: %d bytes, %v", n, err)
		}
	}
}

// TestLoanRefusesTooLargeAndFull: sizes outside [0, MaxPayload] are
// refused before any position is taken; a ring whose every slot is on
// loan is full, counted as a push's would be.
func TestLoanRefusesTooLargeAndFull(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	for _, n := range []int{r.MaxPayload() + 1, -1, 1 << 40} {
		if _, err := r.TryLoan(n); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("TryLoan(%d): %v", n, err)
		}
		if _, err := r.Loan(context.Background(), n); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Loan(%d): %v", n, err)
		}
	}
	if c := r.Counters(); c.Tail != 0 {
		t.Fatalf("refused loans took positions: %+v", c)
	}
	var loans []Loan
	for i := 0; i < 4; i++ {
		l, err := r.TryLoan(8)
		if err != nil {
			t.Fatal(err)
		}
		loans = append(loans, l)
	}
	if _, err := r.TryLoan(8); err != ErrFull {
		t.Fatalf("a fifth loan on 4 slots: %v", err)
	}
	if err := r.TryPush([]byte("x")); err != ErrFull {
		t.Fatalf("a push with every slot on loan: %v", err)
	}
	if c := r.Counters(); c.FullHits != 2 {
		t.Fatalf("full hits %d", c.FullHits)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := r.Loan(ctx, 8); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocking loan on a full ring: %v", err)
	}
	for _, l := range loans {
		if err := r.Abort(l); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoanWaitsForRoom: a blocking Loan on a full ring returns once a
// consumer makes room, and what it publishes comes after what was there.
func TestLoanWaitsForRoom(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 2})
	pushIDs(t, r.TryPush, 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		l, err := r.Loan(ctx, 20)
		if err == nil {
			copy(l.Data(), encodeMsg(3))
			err = r.Publish(l)
		}
		done <- err
	}()
	buf := make([]byte, 64)
	if n, err := r.Pop(ctx, buf); err != nil || mustDecode(t, buf[:n]) != 1 {
		t.Fatalf("pop: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("blocked loan: %v", err)
	}
	if got := drain(t, r); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("drained %v", got)
	}
}
