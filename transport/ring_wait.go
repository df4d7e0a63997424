package transport

import (
	"context"

	"github.com/shmkit/shmkit/layout"
)

// The ring's blocking calls, on the wait engine of wait.go, and what they
// tell it: the slot a waiter is behind, and how to heal the ring when
// that slot's owner is proven dead.

// Push publishes msg, waiting while the ring is full. It returns ctx's error
// if ctx ends first.
func (r *Ring) Push(ctx context.Context, msg []byte) error { return r.pushWait(ctx, msg, 0) }

// PushID is Push with the message id given by the caller (see TryPushID).
func (r *Ring) PushID(ctx context.Context, msg []byte, id uint64) error {
	if err := r.idAllowed(id); err != nil {
		return err
	}
	return r.pushWait(ctx, msg, id)
}

// pushWait is Push stamping id (0: the position's).
func (r *Ring) pushWait(ctx context.Context, msg []byte, id uint64) error {
	if r.tab.Self == 0 {
		return ErrNotAttached
	}
	if uint64(len(msg)) > r.lay.PayloadMax() {
		return r.tooLarge(len(msg))
	}
	var err error
	if werr := block(ctx, r.reg, r.notFullSeq, r.notFullW, r.fullHits, r.tailSlot, r.healSlot, func() bool {
		err = r.push(msg, 0, id)
		return err != ErrFull
	}); werr != nil {
		return werr
	}
	return err
}

// Pop waits for the next message and copies it into buf.
func (r *Ring) Pop(ctx context.Context, buf []byte) (int, error) {
	n, _, err := r.PopID(ctx, buf)
	return n, err
}

// PopID is Pop returning the message's id too (see TryPopID).
func (r *Ring) PopID(ctx context.Context, buf []byte) (int, uint64, error) {
	if r.tab.Self == 0 {
		return 0, 0, ErrNotAttached
	}
	var n int
	var id uint64
	var err error
	if werr := block(ctx, r.reg, r.notEmptySeq, r.notEmptyW, r.emptyHits, r.headSlot, r.healSlot, func() bool {
		n, id, err = r.pop(buf)
		return err != ErrEmpty
	}); werr != nil {
		return 0, 0, werr
	}
	return n, id, err
}

// Claim waits for the next message and leases it (see TryClaim).
func (r *Ring) Claim(ctx context.Context) (Lease, error) {
	if r.tab.Self == 0 {
		return Lease{}, ErrNotAttached
	}
	var l Lease
	var err error
	if werr := block(ctx, r.reg, r.notEmptySeq, r.notEmptyW, r.emptyHits, r.headSlot, r.healSlot, func() bool {
		l, err = r.claim()
		return err != ErrEmpty
	}); werr != nil {
		return Lease{}, werr
	}
	return l, err
}

func (r *Ring) headSlot() (uint64, uint64) {
	h := r.head.Load()
	return h & r.mask, r.slotWord(h).Load()
}

func (r *Ring) tailSlot() (uint64, uint64) {
	t := r.tail.Load()
	return t & r.mask, r.slotWord(t).Load()
}

// healSlot repairs the ring if the owner of the slot in the way is proven
// dead. A live owner, however slow, is left alone.
func (r *Ring) healSlot(idx, raw uint64) {
	if r.tab.StampDead(layout.UnpackSlot(raw).Owner) {
		r.Repair()
	}
}
