package transport

import (
	"context"
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// Zero-copy send. A loan is the push's WRITING state handed to the caller:
// TryLoan and Loan take the next position exactly as a push does (the CAS
// FREE(L) -> WRITING(L, me) names the owner, then the tail moves on), and
// return the slot's payload bytes for the caller to fill in place; Publish
// stores READY as a push does, Abort rolls the position back as a repair
// releases a dead producer's half-written slot. No word, state or field is
// new: a loan whose owner dies is an orphaned write, found by Scan and
// Check and released by Repair like any other (docs/design.md, "Zero-copy
// send: loans").

// Loan is a ring position taken for a message that the caller writes in
// place (TryLoan, Loan) and then publishes (Publish, PublishN) or gives
// up (Abort). Exactly one of those must end it; each checks that the slot
// is still this loan's and fails with ErrLeaseLost, changing nothing,
// when it is not (ended already, or a loan of another handle).
//
// Until it ends, the loan holds its position the way a producer in the
// middle of a push does: consumers stop at it (messages published after it
// wait behind it) and, once the tail has come round a lap to its slot,
// producers find the ring full. Hold loans briefly.
type Loan struct {
	r    *Ring  // the handle that took it
	pos  uint64 // the position taken: slot pos & (capacity-1), lap pos / capacity
	data []byte // the slot's payload bytes [0, n), capacity n
}

// Data returns the loaned payload bytes: a slice of the mapping of exactly
// the length asked for, with no capacity beyond it, so that appending to
// it copies instead of writing past the slot. The bytes are not cleared:
// they hold whatever the slot held before; write every byte you publish.
// It is valid until Publish, PublishN or Abort, and never after Close
// (which aborts every loan still held and unmaps the file).
func (l *Loan) Data() []byte { return l.data }

// Position returns the ring position the loan took (as Check's findings
// number them).
func (l *Loan) Position() uint64 { return l.pos }

// Slot returns the index of the slot the loan writes.
func (l *Loan) Slot() uint64 {
	if l.r == nil {
		return 0
	}
	return l.pos & l.r.mask
}

// TryLoan takes the next position for a message of n bytes, if a slot is
// free, or returns ErrFull; n outside [0, MaxPayload] is refused with
// ErrTooLarge. The message is written into Data and sent with Publish (or
// PublishN, to send fewer bytes), or given up with Abort.
func (r *Ring) TryLoan(n int) (Loan, error) {
	if r.tab.Self == 0 {
		return Loan{}, ErrNotAttached
	}
	if uint64(n) > r.lay.PayloadMax() { // a negative n too
		return Loan{}, r.tooLarge(n)
	}
	t, err := r.claimTail()
	if err != nil {
		if err == ErrFull {
			r.fullHits.Add(1)
		}
		return Loan{}, err
	}
	return r.lent(t, n), nil
}

// Loan takes the next position for a message of n bytes, waiting while
// the ring is full, as Push does (see TryLoan). It returns ctx's error if
// ctx ends first.
func (r *Ring) Loan(ctx context.Context, n int) (Loan, error) {
	if r.tab.Self == 0 {
		return Loan{}, ErrNotAttached
	}
	if uint64(n) > r.lay.PayloadMax() {
		return Loan{}, r.tooLarge(n)
	}
	var l Loan
	var err error
	if werr := block(ctx, r.reg, r.notFullSeq, r.notFullW, r.fullHits, r.tailSlot, r.healSlot, func() bool {
		var t uint64
		if t, err = r.claimTail(); err == nil {
			l = r.lent(t, n)
		}
		return err != ErrFull
	}); werr != nil {
		return Loan{}, werr
	}
	return l, err
}

// lent finishes the first half of a push for a loan of n bytes at
// position t, just claimed (claimTail): the tail is moved past it and the
// payload is the caller's to write.
func (r *Ring) lent(t uint64, n int) Loan {
	shm.CrashPoint(crashRingLoanAfterClaim)
	r.tail.CompareAndSwap(t, t+1)
	shm.CrashPoint(crashRingLoanAfterAdvance)
	off := r.lay.SlotOff(t&r.mask) + layout.RingSlotWordSize
	if r.lay.MessageIDs {
		// The position's id, as a push stamps it, written now while the
		// slot is certainly ours (WRITING(me)): Publish's CAS may find the
		// loan over, and must then have written nothing. SetID changes it.
		storeID(r.slot(t), &r.lay.SlotGeometry, t+1)
	}
	return Loan{r: r, pos: t, data: r.area[off : off+uint64(n) : off+uint64(n)]}
}

// SetID gives the loan's message the id id instead of the position+1
// the loan took (see TryPushID): the ring must have message ids
// (ErrNoMessageIDs) and id must not be 0 (ErrZeroID). Like writing into
// Data, it is allowed only while the loan is held: before Publish,
// PublishN or Abort.
func (l *Loan) SetID(id uint64) error {
	if l.r == nil {
		return fmt.Errorf("%w: not a loan from TryLoan or Loan", ErrLeaseLost)
	}
	if err := l.r.idAllowed(id); err != nil {
		return err
	}
	storeID(l.r.slot(l.pos), &l.r.lay.SlotGeometry, id)
	return nil
}

// Publish sends the loan's message: all of Data, as it is now. From then
// on the loan is over; Data must not be touched again (consumers may
// already be reading it). nil means the message is in the ring, as a
// push's nil does.
func (r *Ring) Publish(l Loan) error { return r.PublishN(l, len(l.data)) }

// PublishN is Publish for the first m bytes of Data only (0 <= m <=
// len(Data)): for a writer that learns the message's length while writing
// it into a loan taken for the most it can be. The rest of the loaned
// bytes are not sent. An m out of range is refused with ErrTooLarge and
// the loan is still held.
func (r *Ring) PublishN(l Loan, m int) error {
	if r.tab.Self == 0 || l.r != r || uint(m) > uint(len(l.data)) {
		return r.refused(l, m)
	}
	lap := r.lay.LapOf(l.pos)
	w := r.slotWord(l.pos)
	shm.CrashPoint(crashRingPublishBeforeReady)
	// A CAS from the exact word the loan left, not the push's plain
	// release store: the caller holds the loan across calls, so a second
	// Publish or an Abort of it (from any goroutine) must find the slot
	// changed and fail rather than overwrite whatever the slot holds by
	// then. The CAS is a full barrier: the payload is visible before
	// READY, and READY before notEmptyW's load below. (It costs no more
	// than the store here: BenchmarkRingLoanPublishPop measured both.)
	ready := layout.SlotWord{State: layout.SlotReady, Length: uint32(m), Lap: lap}.Pack()
	if !w.CompareAndSwap(r.loanWord(lap), ready) {
		return r.loanLost(l, w.Load())
	}
	shm.CrashPoint(crashRingPublishAfterReady)
	r.pushed.Add(1)
	if r.notEmptyW.Load() != 0 {
		r.wakeConsumers()
	}
	return nil
}

// Abort gives the loan up: its position is rolled back exactly as a
// repair releases a dead producer's half-written slot (the slot is freed
// for the next lap, consumers step past the position), and it is counted
// in Counters.Abandoned. Nothing of it is ever delivered.
func (r *Ring) Abort(l Loan) error {
	if r.tab.Self == 0 || l.r != r {
		return r.refused(l, 0)
	}
	lap := r.lay.LapOf(l.pos)
	w := r.slotWord(l.pos)
	if !w.CompareAndSwap(r.loanWord(lap), layout.SlotWord{Lap: (lap + 1) & layout.SlotLapMask}.Pack()) {
		return r.loanLost(l, w.Load())
	}
	shm.CrashPoint(crashRingAbortAfterFree)
	r.abandoned.Add(1)
	// Consumers may sleep behind the position, and producers a lap on.
	r.wakeIfWaiting()
	return nil
}

// refused says why a loan cannot be ended here (this handle is not
// attached, the loan is not this handle's, or m is not a length within
// it); nothing has been touched.
func (r *Ring) refused(l Loan, m int) error {
	switch {
	case r.tab.Self == 0:
		return ErrNotAttached
	case l.r == nil:
		return fmt.Errorf("%w: %s: not a loan from TryLoan or Loan", ErrLeaseLost, r.Path())
	case l.r != r:
		return fmt.Errorf("%w: %s: a loan of another handle (of %s)", ErrLeaseLost, r.Path(), l.r.Path())
	}
	return fmt.Errorf("%w: %s: publishing %d bytes of a loan of %d; the loan is still held", ErrTooLarge, r.Path(), m, len(l.data))
}

// loanWord is the word of a slot this handle holds on loan at lap.
func (r *Ring) loanWord(lap uint32) uint64 {
	return layout.SlotWord{State: layout.SlotWriting, Owner: r.tab.Self, Lap: lap}.Pack()
}

// loanLost is the error for a loan whose slot no longer holds it: raw is
// what the slot holds instead.
func (r *Ring) loanLost(l Loan, raw uint64) error {
	sw := layout.UnpackSlot(raw)
	i := l.pos & r.mask
	if err := sw.Validate(&r.lay.SlotGeometry); err != nil {
		return r.corrupt(i, raw, err)
	}
	return fmt.Errorf("%w: %s: the loan of position %d is over: slot %d is %s at lap %d", ErrLeaseLost, r.Path(), l.pos, i, sw.State, sw.Lap)
}
