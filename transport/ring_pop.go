package transport

import (
	"fmt"
	"math"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// TryPop copies the next message into buf and returns its length, or
// returns ErrEmpty. The message is the caller's once TryPop returns: if the
// process dies inside TryPop the message is recovered by a repair, but once
// it has returned nobody will deliver it again (use Claim for that).
// A buf shorter than the next message gets ErrShortBuffer and the message
// stays in the ring; a buf of MaxPayload bytes always suffices.
//
// TryPop is small enough to inline into its caller (it is popAs): the
// call it saves is measurable on the per-message path (docs/bench.md).
func (r *Ring) TryPop(buf []byte) (int, error) {
	n, _, err := r.popAs(buf, true)
	return n, err
}

// TryPopID is TryPop returning the message's id too: the id its push
// stamped (see Ring.MessageIDs), 0 in a ring without message ids.
func (r *Ring) TryPopID(buf []byte) (n int, id uint64, err error) { return r.popAs(buf, true) }

// pop is TryPop without counting an empty ring (Pop counts its waits
// itself). It inlines.
func (r *Ring) pop(buf []byte) (int, uint64, error) { return r.popAs(buf, false) }

// popAs is the plain consumer's state machine; try counts an empty ring
// (TryPop's part). It returns the message's length and id (0 without
// message ids).
func (r *Ring) popAs(buf []byte, try bool) (int, uint64, error) {
	if r.tab.Self == 0 {
		return 0, 0, ErrNotAttached
	}
	i, taken, err := r.take(layout.SlotReading, len(buf))
	if err != nil {
		if try && err == ErrEmpty {
			r.emptyHits.Add(1)
		}
		return 0, 0, err
	}
	shm.CrashPoint(crashRingPopAfterTake)
	r.head.CompareAndSwap(i, i+1)
	shm.CrashPoint(crashRingPopAfterAdvance)
	s := r.slot(i)
	n := copy(buf, payloadAt(s, r.lay.PayloadMax(), layout.SlotLengthOf(taken)))
	var id uint64
	if r.lay.MessageIDs {
		id = loadID(s, &r.lay.SlotGeometry) // read while the slot is ours, as the payload
	}
	shm.CrashPoint(crashRingPopAfterCopy)
	// A release store (the copy out is done before it); the locked add
	// on popped orders it before notFullW's load, as in push.
	storeRelease((*uint64)(s), layout.SlotFreeNextLap(taken))
	r.popped.Add(1)
	if r.notFullW.Load() != 0 {
		r.wakeProducers()
	}
	return n, id, nil
}

// TryClaim leases the next message, or returns ErrEmpty. A message already
// delivered DeliveryLimit times is set aside as poison instead and the next
// one is tried.
func (r *Ring) TryClaim() (Lease, error) {
	i, taken, err := r.claimAt()
	if err != nil {
		if err == ErrEmpty {
			r.emptyHits.Add(1)
		}
		return Lease{}, err
	}
	// The Lease is built in the return statement, here and in claim:
	// a Lease (48 bytes) is too big for the compiler to keep in
	// registers, and one returned by claim and returned again went
	// through the stack, stored field by field and copied in 16-byte
	// moves (a store-forwarding stall on every claim); so did one
	// built by a helper, even inlined.
	return Lease{slot: i & r.mask, lap: layout.SlotLapOf(taken), data: r.payload(i, layout.SlotLengthOf(taken)), id: r.leaseID(i), Deliveries: int(layout.SlotDeliveriesOf(taken))}, nil
}

// claim is TryClaim without counting an empty ring (Claim counts its
// waits itself).
func (r *Ring) claim() (Lease, error) {
	i, taken, err := r.claimAt()
	if err != nil {
		return Lease{}, err
	}
	return Lease{slot: i & r.mask, lap: layout.SlotLapOf(taken), data: r.payload(i, layout.SlotLengthOf(taken)), id: r.leaseID(i), Deliveries: int(layout.SlotDeliveriesOf(taken))}, nil
}

// claimAt is the claim's state machine: it leases the message at the
// head and returns its position and its LEASED word (packed).
func (r *Ring) claimAt() (uint64, uint64, error) {
	if r.tab.Self == 0 {
		return 0, 0, ErrNotAttached
	}
	i, taken, err := r.take(layout.SlotLeased, math.MaxInt)
	if err != nil {
		return 0, 0, err
	}
	shm.CrashPoint(crashRingClaimAfterTake)
	r.head.CompareAndSwap(i, i+1)
	shm.CrashPoint(crashRingClaimAfterAdvance)
	r.claimed.Add(1)
	return i, taken, nil
}

// Ack releases a lease: the message is done with and its slot is free.
func (r *Ring) Ack(l Lease) error {
	if r.tab.Self == 0 {
		return ErrNotAttached
	}
	if err := r.ack(&l); err != nil {
		return err
	}
	r.acked.Add(1)
	if r.notFullW.Load() != 0 {
		r.wakeProducers()
	}
	return nil
}

// ack frees the slot of lease l if this handle still holds it: Ack's CAS,
// without its counter and wake (AckBatch makes those once per batch).
func (r *Ring) ack(l *Lease) error {
	if l.data == nil {
		return fmt.Errorf("%w: %s: not a lease from Claim", ErrLeaseLost, r.Path())
	}
	w := r.slotWord(l.slot)
	held := layout.SlotOwnerBits(r.tab.Self) | uint64(layout.SlotLeased)
	for {
		raw := w.Load()
		if raw&(layout.SlotOwnerField|layout.SlotStateField) != held {
			return r.leaseLost(l.slot, raw)
		}
		shm.CrashPoint(crashRingAckBeforeFree)
		// The lap has moved on by however many positions producers
		// burned while the lease was held; free the slot for the next.
		if w.CompareAndSwap(raw, layout.SlotFreeNextLap(raw)) {
			return nil
		}
	}
}

// leaseLost is ack's error for a slot word raw that no longer holds this
// handle's lease.
func (r *Ring) leaseLost(slot, raw uint64) error {
	sw := layout.UnpackSlot(raw)
	return fmt.Errorf("%w: %s: slot %d is %s by participant %d", ErrLeaseLost, r.Path(), slot, sw.State, int(sw.Owner)-1)
}

// Release gives a lease back without processing it: the message is queued
// again (its delivery count is kept, so a message that keeps being released
// ends up as poison too). nil means it is queued and the lease is gone; on
// a full ring where it cannot be re-published in place, Release returns
// ErrFull and the lease is still held (Ack or Release it later).
func (r *Ring) Release(l Lease) error {
	if r.tab.Self == 0 {
		return ErrNotAttached
	}
	if l.data == nil {
		return fmt.Errorf("%w: %s: not a lease from Claim", ErrLeaseLost, r.Path())
	}
	w := r.slotWord(l.slot)
	raw := w.Load()
	sw := layout.UnpackSlot(raw)
	if sw.State != layout.SlotLeased || sw.Owner != r.tab.Self {
		return fmt.Errorf("%w: %s: slot %d is %s", ErrLeaseLost, r.Path(), l.slot, sw.State)
	}
	if err := sw.Validate(&r.lay.SlotGeometry); err != nil {
		return r.corrupt(l.slot, raw, err)
	}
	what, err := r.recoverSlot(l.slot, raw, sw)
	switch {
	case err != nil:
		return err
	case what == recoveredDeferred:
		return fmt.Errorf("%w: %s: no room to queue the message again; the lease is still held", ErrFull, r.Path())
	case what == recoveredNothing:
		// recoverSlot retries while the slot names us: it no longer does.
		return fmt.Errorf("%w: %s: slot %d changed under its lease", ErrLeaseLost, r.Path(), l.slot)
	}
	return nil
}

// take moves the message at the head into state (reading or leased), owned
// by this participant, and returns its position and new word (packed).
// Messages already delivered DeliveryLimit times are poisoned on the way.
// The head is not moved past the position: the caller does that (a single
// pop or claim at once; a batch after taking the positions that follow).
// A returned error comes with the word that caused it.
func (r *Ring) take(state layout.SlotState, room int) (uint64, uint64, error) {
	// The common case, a valid READY word at the head's lap that may be
	// taken, is the first case of takeSlow's loop with the word tested
	// and built packed (its state, owner and lap in one compare: READY
	// at this lap with no owner); anything else (a CAS lost included) is
	// handled there.
	h := r.head.Load()
	w := r.slotWord(h)
	raw := w.Load()
	if _, ok := takeable(&r.lay.SlotGeometry, h, raw, room); ok {
		if taken := takenWord(raw, state, r.tab.Self); w.CompareAndSwap(raw, taken) {
			return h, taken, nil
		}
	}
	return r.takeSlow(state, room)
}

// takeable reports whether packed word raw, loaded from position p's slot
// of a ring or deque of geometry lay, is the common case of a take: READY
// at p's lap with no owner (state, owner and lap in one masked compare), a
// length the slot holds and room fits, fewer deliveries than the limit.
// It returns the length. Every other word goes to the full state machine,
// which validates it and says what it is.
func takeable(lay *layout.SlotGeometry, p, raw uint64, room int) (uint32, bool) {
	if raw&(layout.SlotLapField|layout.SlotOwnerField|layout.SlotStateField) != layout.SlotFreeAt(p, lay.CapShift)|uint64(layout.SlotReady) {
		return 0, false
	}
	n := layout.SlotLengthOf(raw)
	return n, uint64(n) <= lay.PayloadMax() && uint32(layout.SlotDeliveriesOf(raw)) < lay.DeliveryLimit && int(n) <= room
}

// takenWord is READY word raw taken into state by owner, one delivery
// more: READY(L, d) -> state(L, owner, d+1). raw has no owner, and fewer
// deliveries than the limit (at most RingMaxDeliveryLimit), so the fields
// are added without carrying into each other.
func takenWord(raw uint64, state layout.SlotState, owner uint16) uint64 {
	return raw - uint64(layout.SlotReady) + uint64(state) + layout.SlotDeliveryOne + layout.SlotOwnerBits(owner)
}

// takeSlow is take's state machine in full.
func (r *Ring) takeSlow(state layout.SlotState, room int) (uint64, uint64, error) {
	for {
		h := r.head.Load()
		lap := r.lay.LapOf(h)
		w := r.slotWord(h)
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		d := layout.LapDiff(sw.Lap, lap)
		switch {
		case d == 0 && sw.State == layout.SlotReady:
			// What Validate checks of a READY word, inline, as take's
			// common case checks it.
			if sw.Owner != 0 || uint64(sw.Length) > r.lay.PayloadMax() {
				return 0, raw, r.corrupt(h, raw, sw.Validate(&r.lay.SlotGeometry))
			}
			if uint32(sw.Deliveries) >= r.lay.DeliveryLimit {
				r.poison(h, w, raw, sw)
				continue
			}
			if int(sw.Length) > room {
				return 0, raw, fmt.Errorf("%w: %s: message is %d bytes, buffer %d", ErrShortBuffer, r.Path(), sw.Length, room)
			}
			taken := takenWord(raw, state, r.tab.Self)
			if !w.CompareAndSwap(raw, taken) {
				continue
			}
			return h, taken, nil

		case d == 0 && (sw.State == layout.SlotFree || sw.State == layout.SlotWriting):
			// Nothing published at the head yet (or a producer is still
			// writing it): empty, unless our head was stale.
			if r.head.Load() == h {
				if r.requeueDeferred() {
					continue
				}
				return 0, raw, ErrEmpty
			}

		case d == 0 || d == 1 || d == 2:
			// The head's position was taken, burned or released already:
			// help the head on (a batch may have taken the positions after
			// it too: each is helped past the same way).
			r.head.CompareAndSwap(h, h+1)

		case d == -1 && (sw.State == layout.SlotLeased || sw.State == layout.SlotPoisoned || sw.State == layout.SlotReading):
			// The slot still holds an earlier lap's message being read or
			// leased; nothing has been produced at this position yet.
			if r.head.Load() == h {
				if r.requeueDeferred() {
					continue
				}
				return 0, raw, ErrEmpty
			}

		default:
			if r.head.Load() == h {
				return 0, raw, r.corrupt(h, raw, fmt.Errorf("%s slot at lap %d seen from head %d (lap %d)", sw.State, sw.Lap, h, lap))
			}
		}
	}
}

// requeueDeferred runs a repair when an earlier one left messages of dead
// participants waiting for room, and reports whether it requeued any. The
// check is one load, made only on the way to reporting an empty ring.
func (r *Ring) requeueDeferred() bool {
	if r.deferred.Load() == 0 {
		return false
	}
	rep, err := r.Repair()
	return err == nil && rep.Count(check.ActionRequeue)+rep.Count(check.ActionRequeueInPlace) > 0
}

// poison sets a message that has had DeliveryLimit deliveries aside. It
// stays in its slot (reported by Scan, taken by TakePoisoned), and
// producers pass over the slot as they do over a lease.
func (r *Ring) poison(h uint64, w interface{ CompareAndSwap(old, new uint64) bool }, raw uint64, sw layout.SlotWord) {
	p := sw
	p.State = layout.SlotPoisoned
	if w.CompareAndSwap(raw, p.Pack()) {
		r.poisoned.Add(1)
		r.head.CompareAndSwap(h, h+1)
	}
}

// TakePoisoned copies one poisoned message into buf, frees its slot and
// returns its length and delivery count, or ErrEmpty if there is none.
func (r *Ring) TakePoisoned(buf []byte) (n, deliveries int, err error) {
	if r.tab.Self == 0 {
		return 0, 0, ErrNotAttached
	}
	for i := uint64(0); i < r.lay.Capacity; i++ {
		w := r.slotWord(i)
		for {
			raw := w.Load()
			sw := layout.UnpackSlot(raw)
			if sw.State != layout.SlotPoisoned {
				break
			}
			if err := sw.Validate(&r.lay.SlotGeometry); err != nil {
				return 0, 0, r.corrupt(i, raw, err)
			}
			if int(sw.Length) > len(buf) {
				return 0, 0, fmt.Errorf("%w: %s: message is %d bytes, buffer %d", ErrShortBuffer, r.Path(), sw.Length, len(buf))
			}
			n = copy(buf, r.payload(i, sw.Length))
			if w.CompareAndSwap(raw, layout.SlotWord{Lap: (sw.Lap + 1) & layout.SlotLapMask}.Pack()) {
				r.wakeIfWaiting()
				return n, int(sw.Deliveries), nil
			}
		}
	}
	return 0, 0, ErrEmpty
}
