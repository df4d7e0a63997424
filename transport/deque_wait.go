package transport

import (
	"context"
	"math"

	"github.com/shmkit/shmkit/layout"
)

// Blocking deque calls wait as the ring's do (wait.go): spin briefly,
// then sleep on a futex word in the mapping; the other side wakes only
// when a sleeper raised the waiter flag.

// Push publishes msg at the bottom, waiting while the deque is full (a
// lease or poison in the slot the owner reaches next counts as full). Only
// the owner may push.
func (d *Deque) Push(ctx context.Context, msg []byte) error { return d.pushWait(ctx, msg, 0) }

// PushID is Push with the message id given by the caller (see TryPushID).
func (d *Deque) PushID(ctx context.Context, msg []byte, id uint64) error {
	if err := d.idAllowed(id); err != nil {
		return err
	}
	return d.pushWait(ctx, msg, id)
}

func (d *Deque) pushWait(ctx context.Context, msg []byte, id uint64) error {
	if err := d.ownerCheck(len(msg)); err != nil {
		return err
	}
	var err error
	if werr := block(ctx, d.reg, d.notFullSeq, d.notFullW, d.fullHits, d.bottomSlot, d.healSlot, func() bool {
		d.ownerMu.Lock()
		err = d.pushBottom(msg, id)
		d.ownerMu.Unlock()
		return err != ErrFull
	}); werr != nil {
		return werr
	}
	return err
}

// Pop waits for a message (the owner's newest, or a thief's oldest; see
// TryPop) and copies it into buf.
func (d *Deque) Pop(ctx context.Context, buf []byte) (int, error) {
	n, _, err := d.PopID(ctx, buf)
	return n, err
}

// PopID is Pop returning the message's id too (see TryPopID).
func (d *Deque) PopID(ctx context.Context, buf []byte) (int, uint64, error) {
	if d.tab.Self == 0 {
		return 0, 0, ErrNotAttached
	}
	var n int
	var id uint64
	var err error
	if werr := block(ctx, d.reg, d.notEmptySeq, d.notEmptyW, d.emptyHits, d.topSlot, d.healSlot, func() bool {
		n, id, err = d.pop(buf)
		return err != ErrEmpty
	}); werr != nil {
		return 0, 0, werr
	}
	return n, id, err
}

// Steal is Pop for a thief's role whoever calls it: it waits for the
// oldest message and copies it into buf.
func (d *Deque) Steal(ctx context.Context, buf []byte) (int, error) {
	if d.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	var n int
	var err error
	if werr := block(ctx, d.reg, d.notEmptySeq, d.notEmptyW, d.emptyHits, d.topSlot, d.healSlot, func() bool {
		n, _, err = d.stealCopy(buf)
		return err != ErrEmpty
	}); werr != nil {
		return 0, werr
	}
	return n, err
}

// TrySteal copies the oldest message into buf, or returns ErrEmpty, from
// whichever handle (the owner may steal from its own top).
func (d *Deque) TrySteal(buf []byte) (int, error) {
	if d.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	n, _, err := d.stealCopy(buf)
	if err == ErrEmpty {
		d.emptyHits.Add(1)
	}
	return n, err
}

// stealCopy steals into buf. The owner's handle steals under a lease (its
// READING stamp marks pops at the bottom).
func (d *Deque) stealCopy(buf []byte) (int, uint64, error) {
	state := layout.SlotReading
	if d.owner.Load() {
		state = layout.SlotLeased
	}
	l, err := d.steal(state, len(buf))
	if err != nil {
		return 0, 0, err
	}
	n := copy(buf, l.data)
	d.free(l.slot, l.lap)
	d.stolen.Add(1)
	return n, l.id, nil
}

// Claim waits for the oldest message and leases it (see TryClaim).
func (d *Deque) Claim(ctx context.Context) (Lease, error) {
	if d.tab.Self == 0 {
		return Lease{}, ErrNotAttached
	}
	var l Lease
	var err error
	if werr := block(ctx, d.reg, d.notEmptySeq, d.notEmptyW, d.emptyHits, d.topSlot, d.healSlot, func() bool {
		l, err = d.steal(layout.SlotLeased, math.MaxInt)
		if err == nil {
			d.claimed.Add(1)
		}
		return err != ErrEmpty
	}); werr != nil {
		return Lease{}, werr
	}
	return l, err
}

// topSlot is what a waiting thief is behind: the slot at top, or, when the
// deque looks empty, the one at bottom (at top when top has passed
// bottom, as it may during an owner's batch), where a dead owner can hide a
// message from thieves until a repair sets bottom right: a pop in
// progress (READING, stamped) or a message published but not counted
// (READY at bottom). The latter carries no stamp, so it is presented as
// the owner's, to be judged like any owned slot (sleep checks the owner
// after a while; a live owner is left alone).
func (d *Deque) topSlot() (uint64, uint64) {
	t := d.top.Load()
	b := d.bottom.Load()
	if b > t {
		return t & d.mask, d.slotWord(t).Load()
	}
	// top may be past bottom (thieves took an owner's batch's published
	// messages above it): the slot that may hide a message is at top.
	b = t
	raw := d.slotWord(b).Load()
	sw := layout.UnpackSlot(raw)
	if owner := d.ownerStamp(); owner != 0 && sw.State == layout.SlotReady && sw.Lap == d.lay.LapOf(b) {
		sw.State, sw.Owner = layout.SlotReading, owner
		raw = sw.Pack()
	}
	return b & d.mask, raw
}

// bottomSlot is what a waiting owner is behind: the slot its next push
// needs, held by a thief still copying out (READING) the message of a lap
// before; sleep checks that thief after a while. (Leases and poison do not
// stop the owner: it burns past them.)
func (d *Deque) bottomSlot() (uint64, uint64) {
	b := d.bottom.Load()
	return b & d.mask, d.slotWord(b).Load()
}

// healSlot repairs the deque if the owner of the slot in the way is proven
// dead. A live owner, however slow, is left alone.
func (d *Deque) healSlot(_, raw uint64) {
	if d.tab.StampDead(layout.UnpackSlot(raw).Owner) {
		d.Repair()
	}
}
