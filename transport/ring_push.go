package transport

import (
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// TryPush publishes msg if a slot is free, or returns ErrFull. A message
// larger than MaxPayload is refused with ErrTooLarge, never truncated.
//
// TryPush is small enough to inline into its caller (it is pushAs): the
// call it saves is measurable on the per-message path (docs/bench.md).
func (r *Ring) TryPush(msg []byte) error { return r.pushAs(msg, 0, 0, true) }

// TryPushID is TryPush with the message id given by the caller instead
// of the position+1 TryPush stamps (a bridge carries an id from
// elsewhere: a JetStream stream sequence). The ring must have message
// ids (ErrNoMessageIDs otherwise) and id must not be 0 (ErrZeroID): 0
// means none. The ring does not check that ids are unique: mixing
// TryPush and TryPushID in one ring may repeat one.
//
// The convention for callers' ids (docs/design.md, "Message ids"):
// position ids are always below 2^63 (a ring does not live 2^63 pushes),
// so a caller keeps its ids in the space with bit 63 set (1<<63 | its
// own number; shmbridge in stamps 1<<63 | stream sequence), and one
// source of such ids per file. Ids must be unique per file: whatever
// deduplicates by them (a JetStream duplicate window, a consumer dropping
// repeats) drops a different message that shares one.
func (r *Ring) TryPushID(msg []byte, id uint64) error {
	if err := r.idAllowed(id); err != nil {
		return err
	}
	return r.pushAs(msg, 0, id, true)
}

// idAllowed refuses an id call on a ring without message ids, and id 0.
func (r *Ring) idAllowed(id uint64) error {
	if !r.lay.MessageIDs {
		return fmt.Errorf("%w: %s", ErrNoMessageIDs, r.Path())
	}
	if id == 0 {
		return fmt.Errorf("%w: %s", ErrZeroID, r.Path())
	}
	return nil
}

func (r *Ring) tooLarge(n int) error {
	return fmt.Errorf("%w: %s: %d bytes, the limit is %d", ErrTooLarge, r.Path(), n, r.lay.PayloadMax())
}

// push is pushAs for callers that checked the handle and msg's length
// themselves and count a full ring their own way: Push, and a repair's
// requeue (deliveries and id kept). It inlines.
func (r *Ring) push(msg []byte, deliveries uint8, id uint64) error {
	return r.pushAs(msg, deliveries, id, false)
}

// pushAs is the producer's state machine. Every step that can be
// interrupted by a SIGKILL leaves a slot word that names its owner: see
// docs/design.md. try is TryPush's part: refuse a detached handle and a
// message larger than MaxPayload, and count a full ring. id is the
// message id to stamp in a ring with ids, 0 for the position's (+1).
func (r *Ring) pushAs(msg []byte, deliveries uint8, id uint64, try bool) error {
	if try {
		if r.tab.Self == 0 {
			return ErrNotAttached
		}
		if uint64(len(msg)) > r.lay.PayloadMax() {
			return r.tooLarge(len(msg))
		}
	}
	// claimTail, written out: claimTail does not inline, claimFree does,
	// and a call less on every push is measurable (docs/bench.md, "The
	// per-message path").
	t := r.tail.Load()
	if !r.claimFree(t) {
		var err error
		if t, err = r.claimTailSlow(); err != nil {
			if try && err == ErrFull {
				r.fullHits.Add(1)
			}
			return err
		}
	}
	shm.CrashPoint(crashRingPushAfterClaim)
	r.tail.CompareAndSwap(t, t+1)
	shm.CrashPoint(crashRingPushAfterAdvance)
	s := r.slot(t)
	// msg fits: TryPush and Push check it against MaxPayload, a repair
	// pushes a validated length (payload checks it once more).
	copy(payloadAt(s, r.lay.PayloadMax(), uint32(len(msg))), msg)
	if r.lay.MessageIDs {
		// The id is part of what the slot holds while WRITING: written
		// with the payload, published by the same READY store, so a
		// death before it leaves an orphaned write whose id nobody sees.
		// The position's id costs no atomic: the position is ours.
		if id == 0 {
			id = t + 1
		}
		storeID(s, &r.lay.SlotGeometry, id)
	}
	shm.CrashPoint(crashRingPushAfterWrite)
	// Release: the payload is visible before the READY word is. A
	// release store, not an XCHG: the locked add on pushed below orders
	// it before the waiter-flag load that follows (the sleeper's flag
	// store and slot load are the other half of that handshake).
	// The READY word is composed packed (layout/slotword_packed.go): a
	// SlotWord would go through the stack (docs/bench.md, "The
	// per-message path").
	ready := layout.SlotFreeAt(t, r.lay.CapShift) | layout.SlotLengthBits(uint32(len(msg))) | layout.SlotDeliveryBits(deliveries) | uint64(layout.SlotReady)
	storeRelease((*uint64)(s), ready)
	shm.CrashPoint(crashRingPushAfterPublish)
	r.pushed.Add(1) // also the full barrier before notEmptyW's load
	if r.notEmptyW.Load() != 0 {
		r.wakeConsumers()
	}
	return nil
}

// claimTail is every producer's state machine up to the CAS that takes a
// position (push, a batch's first position, and a loan: ring_batch.go,
// ring_loan.go): it helps the tail on past positions already taken, burns
// past held leases, and returns the position t it stamped WRITING(me) at
// its lap, or ErrFull, or ErrCorrupt naming the slot. The tail is not
// moved past t: the caller does that (push and loan at once, with their
// crash points on either side; a batch after claiming the positions that
// follow t).
func (r *Ring) claimTail() (uint64, error) {
	// The common case, a free slot at the tail's lap, is the first
	// case of claimTailSlow's loop, made by claimFree; anything else (a
	// CAS lost included) is handled there.
	if t := r.tail.Load(); r.claimFree(t) {
		return t, nil
	}
	return r.claimTailSlow()
}

// claimFree takes position p for this handle if its slot is exactly FREE
// at p's lap (FREE(L) -> WRITING(L, me)), the word compared and built
// packed. Any other word, or a CAS lost, reports false and changes
// nothing.
//
// It is the CAS alone, without a load of the word first: the slot's line
// was last written by the consumer that freed it, and a load followed by
// a CAS fetches it twice (shared, then exclusive) where a CAS fetches it
// once. Measured in the bare loop, interleaved A/B on a quiet machine
// (docs/bench.md, "The per-message path"): ring ÷ bare ring 0.45 -> 0.55,
// round trip ÷ the bare ring's 1.28 -> 1.22. A CAS that fails on a full
// ring takes the line from the consumer about to free it; claimTailSlow,
// where a full ring is found and re-tried, still looks before it CASes,
// and a note that made pushes look first after a full ring measured
// slower than either (0.39).
func (r *Ring) claimFree(p uint64) bool {
	free := layout.SlotFreeAt(p, r.lay.CapShift)
	return r.slotWord(p).CompareAndSwap(free, free|layout.SlotOwnerBits(r.tab.Self)|uint64(layout.SlotWriting))
}

// claimTailSlow is claimTail's state machine in full.
func (r *Ring) claimTailSlow() (uint64, error) {
	var burnedHere uint64
	for {
		t := r.tail.Load()
		lap := r.lay.LapOf(t)
		w := r.slotWord(t)
		// Load before the CAS: a CAS that fails still takes the cache line
		// for writing, and on a full ring a producer trying CASes at the
		// tail keeps pulling the line the consumer is reading away from it
		// (measured: half the throughput, the ring stuck full).
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		d := layout.LapDiff(sw.Lap, lap)
		switch {
		case d == 0 && sw.State == layout.SlotFree:
			if raw != (layout.SlotWord{Lap: lap}).Pack() {
				return 0, r.corrupt(t, raw, sw.Validate(&r.lay.SlotGeometry))
			}
			if w.CompareAndSwap(raw, layout.SlotWord{State: layout.SlotWriting, Owner: r.tab.Self, Lap: lap}.Pack()) {
				return t, nil
			}

		case d == 0 || d == 1:
			// Position t is already taken (or was, and has been released):
			// the tail lags. Help it on; whoever took t may be gone, and a
			// batch may have taken the positions after t too (each is
			// helped past the same way).
			r.tail.CompareAndSwap(t, t+1)

		case d == -1 && (sw.State == layout.SlotLeased || sw.State == layout.SlotPoisoned):
			// The slot still holds a lease or poison from an earlier lap.
			// Skip ("burn") position t rather than stall behind it.
			// Never run the tail more than a lap ahead of the head: a
			// ring whose every slot is held would otherwise be burned
			// round and round by each failed push.
			if burnedHere >= r.lay.Capacity || t-r.head.Load() >= r.lay.Capacity {
				return 0, ErrFull
			}
			if err := sw.Validate(&r.lay.SlotGeometry); err != nil {
				return 0, r.corrupt(t, raw, err)
			}
			moved := sw
			moved.Lap = lap
			if w.CompareAndSwap(raw, moved.Pack()) {
				burnedHere++
				r.burned.Add(1)
				shm.CrashPoint(crashRingPushAfterBurn)
				r.tail.CompareAndSwap(t, t+1)
			}

		case d == -1 && (sw.State == layout.SlotReady || sw.State == layout.SlotWriting || sw.State == layout.SlotReading):
			// The previous lap's message is still there: full, unless our
			// tail was stale.
			if r.tail.Load() == t {
				return 0, ErrFull
			}

		default:
			if r.tail.Load() == t {
				return 0, r.corrupt(t, raw, fmt.Errorf("%s slot at lap %d seen from tail %d (lap %d)", sw.State, sw.Lap, t, lap))
			}
		}
	}
}

// wakeConsumers wakes every sleeping consumer. The waiter flag is cleared
// by the waker, so a consumer that died asleep costs one extra wake at most.
func (r *Ring) wakeConsumers() {
	if r.notEmptyW.Swap(0) != 0 {
		r.notEmptySeq.Add(1)
		shm.FutexWake(r.notEmptySeq, -1)
	}
}

// wakeIfWaiting wakes whichever side sleeps: after a repair or a slot
// freed outside the usual paths, either may be waiting for it.
func (r *Ring) wakeIfWaiting() {
	if r.notEmptyW.Load() != 0 {
		r.wakeConsumers()
	}
	if r.notFullW.Load() != 0 {
		r.wakeProducers()
	}
}

func (r *Ring) wakeProducers() {
	if r.notFullW.Swap(0) != 0 {
		r.notFullSeq.Add(1)
		shm.FutexWake(r.notFullSeq, -1)
	}
}
