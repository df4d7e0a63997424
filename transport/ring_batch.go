package transport

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// The ring's batch calls: what they return and how their blocking forms
// wait is in the package documentation ("Batch calls"); their state
// machine, ordering and crash windows in docs/design.md ("Batch calls").

// TryPushBatch publishes msgs, in order, as far as there is room, and
// returns how many it published (see Batch calls in the package
// documentation for n and the error). A message larger than MaxPayload
// refuses the whole batch up front with ErrTooLarge naming its index:
// nothing is pushed.
//
// The messages take consecutive positions as long as those are free; a
// position held by a lease, or taken first by another producer, splits
// the batch in runs, so another producer's messages may come between two
// runs, but a batch's messages are never reordered. Each is published as
// soon as it is written: consumers may take the first before the last is
// written.
func (r *Ring) TryPushBatch(msgs [][]byte) (int, error) { return r.tryPushBatch(msgs, nil) }

// TryPushBatchID is TryPushBatch stamping msgs[i] with ids[i] (see
// TryPushID): the ring must have message ids (ErrNoMessageIDs), ids must
// be as long as msgs and hold no 0 (ErrInvalidConfig, ErrZeroID: nothing
// is pushed). The first n ids went with the n messages pushed.
func (r *Ring) TryPushBatchID(msgs [][]byte, ids []uint64) (int, error) {
	if err := batchIDs(r.Path(), r.lay.MessageIDs, len(msgs), ids); err != nil {
		return 0, err
	}
	return r.tryPushBatch(msgs, ids)
}

// PushBatchID is PushBatch stamping msgs[i] with ids[i] (see
// TryPushBatchID).
func (r *Ring) PushBatchID(ctx context.Context, msgs [][]byte, ids []uint64) (int, error) {
	if err := batchIDs(r.Path(), r.lay.MessageIDs, len(msgs), ids); err != nil {
		return 0, err
	}
	return r.pushBatchWait(ctx, msgs, ids)
}

// batchIDs refuses the ids of a push batch (the ring's or the deque's) of
// n messages: a file without ids, a count that differs, an id 0.
func batchIDs(path string, has bool, n int, ids []uint64) error {
	if !has {
		return fmt.Errorf("%w: %s", ErrNoMessageIDs, path)
	}
	if len(ids) != n {
		return fmt.Errorf("%w: %s: %d ids for a batch of %d messages; nothing pushed", ErrInvalidConfig, path, len(ids), n)
	}
	for i, id := range ids {
		if id == 0 {
			return fmt.Errorf("%w: %s: id %d of the batch; nothing pushed", ErrZeroID, path, i)
		}
	}
	return nil
}

// tryPushBatch is TryPushBatch stamping ids (nil: the positions').
func (r *Ring) tryPushBatch(msgs [][]byte, ids []uint64) (int, error) {
	if r.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	if err := r.batchFits(msgs); err != nil {
		return 0, err
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	n, err := r.pushBatch(msgs, ids)
	if err == ErrFull {
		r.fullHits.Add(1)
	}
	return n, err
}

// PushBatch is TryPushBatch waiting, while nothing fits, for room for at
// least one message. It returns 0 and ctx's error if ctx ends first.
func (r *Ring) PushBatch(ctx context.Context, msgs [][]byte) (int, error) {
	return r.pushBatchWait(ctx, msgs, nil)
}

// pushBatchWait is PushBatch stamping ids (nil: the positions').
func (r *Ring) pushBatchWait(ctx context.Context, msgs [][]byte, ids []uint64) (int, error) {
	if r.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	if err := r.batchFits(msgs); err != nil {
		return 0, err
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if werr := block(ctx, r.reg, r.notFullSeq, r.notFullW, r.fullHits, r.tailSlot, r.healSlot, func() bool {
		n, err = r.pushBatch(msgs, ids)
		return err != ErrFull
	}); werr != nil {
		return 0, werr // no try got through: nothing was pushed
	}
	return n, err
}

// batchFits refuses a push batch with a message larger than a slot holds.
func (r *Ring) batchFits(msgs [][]byte) error {
	return batchSizes(r.Path(), r.lay.PayloadMax(), msgs)
}

// batchSizes refuses a push batch (the ring's or the deque's) naming the
// first message larger than limit: nothing of it is pushed.
func batchSizes(path string, limit uint64, msgs [][]byte) error {
	for i, m := range msgs {
		if uint64(len(m)) > limit {
			return fmt.Errorf("%w: %s: message %d of the batch is %d bytes, the limit is %d; nothing pushed", ErrTooLarge, path, i, len(m), limit)
		}
	}
	return nil
}

// pushBatch pushes msgs run by run until all are pushed or a run can push
// none, then counts them and wakes consumers, once. ErrFull only when it
// pushed nothing. ids, when not nil, are the messages' ids (msgs[i]'s is
// ids[i]); nil stamps the positions'.
func (r *Ring) pushBatch(msgs [][]byte, ids []uint64) (int, error) {
	n := 0
	var err error
	for n < len(msgs) {
		var k int
		var runIDs []uint64
		if ids != nil {
			runIDs = ids[n:]
		}
		if k, err = r.pushRun(msgs[n:], runIDs); err != nil {
			break
		}
		n += k
	}
	if n == 0 {
		return 0, err
	}
	shm.CrashPoint(crashRingPushBatchAfterPublish)
	r.pushed.Add(uint64(n)) // also the full barrier before notEmptyW's load
	if r.notEmptyW.Load() != 0 {
		r.wakeConsumers()
	}
	if err == ErrFull {
		err = nil
	}
	return n, err
}

// pushRun pushes a run of msgs at consecutive positions: msgs[0] at the
// position claimTail takes (the single push's state machine: helping the
// tail, burning past leases), then each next message at the next position
// while that position is free at its own lap, claimed by the same CAS a
// single push makes (FREE(L) -> WRITING(L, me)). The run stops at the first
// position that is not exactly free: taken by another producer, a lease or
// poison to burn past, a message of the previous lap (full), or a word that
// does not validate; the next run starts there with claimTail, which deals
// with each. A free word at a position's own lap is itself the proof that
// the position is the next one to take (it was freed by the consumer of
// the lap before), so a run never runs past a lap ahead of the head.
//
// Then the tail is moved past the run once (others may have helped it on
// already), and each message is written and published in turn.
func (r *Ring) pushRun(msgs [][]byte, ids []uint64) (int, error) {
	t, err := r.claimTail()
	if err != nil {
		return 0, err
	}
	k := uint64(1)
	for most := min(uint64(len(msgs)), r.lay.Capacity); k < most; k++ {
		if !r.claimFree(t + k) {
			break
		}
	}
	shm.CrashPoint(crashRingPushBatchAfterClaims)
	advance(r.tail, t, t+k)
	shm.CrashPoint(crashRingPushBatchAfterAdvance)
	for j := uint64(0); j < k; j++ {
		p := t + j
		m := msgs[j]
		copy(r.payload(p, uint32(len(m))), m)
		if r.lay.MessageIDs {
			id := p + 1 // as push stamps a position's id
			if ids != nil {
				id = ids[j]
			}
			storeID(r.slot(p), &r.lay.SlotGeometry, id)
		}
		// Release, as in push: the payload before the READY word.
		storeRelease((*uint64)(unsafe.Pointer(r.slotWord(p))), layout.SlotWord{State: layout.SlotReady, Length: uint32(len(m)), Lap: r.lay.LapOf(p)}.Pack())
		if j+1 < k {
			shm.CrashPoint(crashRingPushBatchMidPublish)
		}
	}
	return int(k), nil
}

// advance moves a position word (the tail or the head) to to from any
// value in [from, to): every position in that range was taken by the
// caller's run, so whatever value in it the word holds (others help it on
// one position at a time, and may have), it may be moved past all of
// them. A value outside the range is left alone: others moved it past the
// run already (or, in a corrupt file, it is nothing the caller can
// explain).
func advance(pos *atomic.Uint64, from, to uint64) {
	for cur := pos.Load(); cur >= from && cur < to; cur = pos.Load() {
		if pos.CompareAndSwap(cur, to) {
			return
		}
	}
}

// TryPopBatch copies the next messages into bufs, message i into bufs[i]
// with its length in lens[i], as many as are waiting, up to
// min(len(bufs), len(lens)), and returns how many (see Batch calls in the
// package documentation for n and the error). The messages are the
// caller's once TryPopBatch returns. If the process dies inside it, a
// repair delivers again every message of the batch whose slot it had not
// freed yet; every message is copied out before the first slot is freed,
// so the ones lost with the process are only those it had freed, each
// copied out whole, as a single TryPop's message is once its slot is
// free.
//
// A message longer than its buffer stops the batch there with
// ErrShortBuffer (and the messages before it); it stays in the ring.
func (r *Ring) TryPopBatch(bufs [][]byte, lens []int) (int, error) {
	if r.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	m := min(len(bufs), len(lens))
	if m == 0 {
		return 0, nil
	}
	n, err := r.popBatch(bufs[:m], lens[:m])
	if err == ErrEmpty {
		r.emptyHits.Add(1)
	}
	return n, err
}

// PopBatch is TryPopBatch waiting, while no message is waiting, for at
// least one. It returns 0 and ctx's error if ctx ends first.
func (r *Ring) PopBatch(ctx context.Context, bufs [][]byte, lens []int) (int, error) {
	if r.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	m := min(len(bufs), len(lens))
	if m == 0 {
		return 0, nil
	}
	bufs, lens = bufs[:m], lens[:m]
	var n int
	var err error
	if werr := block(ctx, r.reg, r.notEmptySeq, r.notEmptyW, r.emptyHits, r.headSlot, r.healSlot, func() bool {
		n, err = r.popBatch(bufs, lens)
		return err != ErrEmpty
	}); werr != nil {
		return 0, werr
	}
	return n, err
}

// popBatch pops run by run until bufs are full or a run pops none, then
// counts and wakes producers, once. ErrEmpty only when it popped nothing.
func (r *Ring) popBatch(bufs [][]byte, lens []int) (int, error) {
	n := 0
	var err error
	for n < len(bufs) {
		var k int
		if k, err = r.popRun(bufs[n:], lens[n:]); err != nil {
			break
		}
		n += k
	}
	if n == 0 {
		return 0, err
	}
	r.popped.Add(uint64(n)) // also the full barrier before notFullW's load
	if r.notFullW.Load() != 0 {
		r.wakeProducers()
	}
	if err == ErrEmpty {
		err = nil
	}
	return n, err
}

// popRun takes a run of messages at consecutive positions (take at the
// head, then takeNext after it), moves the head past the run once, copies
// every message out, and only then frees their slots.
func (r *Ring) popRun(bufs [][]byte, lens []int) (int, error) {
	h, taken, err := r.take(layout.SlotReading, len(bufs[0]))
	if err != nil {
		return 0, err
	}
	lens[0] = int(layout.SlotLengthOf(taken))
	k := 1
	for most := min(len(bufs), int(r.lay.Capacity)); k < most; k++ {
		taken, ok := r.takeNext(h+uint64(k), layout.SlotReading, len(bufs[k]))
		if !ok {
			break
		}
		lens[k] = int(layout.SlotLengthOf(taken))
	}
	shm.CrashPoint(crashRingPopBatchAfterTake)
	advance(r.head, h, h+uint64(k))
	shm.CrashPoint(crashRingPopBatchAfterAdvance)
	// lens[j] holds the length validated (against MaxPayload and the
	// buffer) when position h+j was taken: the slot word is not read again.
	for j := 0; j < k; j++ {
		lens[j] = copy(bufs[j], r.payload(h+uint64(j), uint32(lens[j])))
	}
	shm.CrashPoint(crashRingPopBatchAfterCopy)
	for j := 0; j < k; j++ {
		p := h + uint64(j)
		// A release store, as in pop: the copy out is done before it.
		storeRelease((*uint64)(unsafe.Pointer(r.slotWord(p))), layout.SlotWord{Lap: (r.lay.LapOf(p) + 1) & layout.SlotLapMask}.Pack())
		if j+1 < k {
			shm.CrashPoint(crashRingPopBatchMidFree)
		}
	}
	return k, nil
}

// takeNext takes position p, the one after a position this call has just
// taken, if it holds a message that may be taken at once: READY at p's own
// lap (a valid READY word: no owner, a length the slot holds), under the
// delivery limit, no longer than room. It is taken by the same CAS take
// makes (READY(L, d) -> state(L, me, d+1)). Anything else ends the run (a
// position not published yet, taken by another consumer, poison to set
// aside, a message that does not fit, a word that does not validate): the
// next run starts at the head with take, which deals with each.
func (r *Ring) takeNext(p uint64, state layout.SlotState, room int) (uint64, bool) {
	// The test and the new word are take's common case, packed.
	w := r.slotWord(p)
	raw := w.Load()
	if _, ok := takeable(&r.lay.SlotGeometry, p, raw, room); !ok {
		return 0, false
	}
	taken := takenWord(raw, state, r.tab.Self)
	return taken, w.CompareAndSwap(raw, taken)
}

// TryClaimBatch leases the next messages into leases, as many as are
// waiting, up to len(leases), and returns how many (see Batch calls in the
// package documentation). Messages already delivered DeliveryLimit times
// are set aside as poison on the way, as TryClaim does. If the process
// dies inside it, a repair delivers every message it had leased again.
func (r *Ring) TryClaimBatch(leases []Lease) (int, error) {
	if r.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	if len(leases) == 0 {
		return 0, nil
	}
	n, err := r.claimBatch(leases)
	if err == ErrEmpty {
		r.emptyHits.Add(1)
	}
	return n, err
}

// ClaimBatch is TryClaimBatch waiting, while no message is waiting, for
// at least one. It returns 0 and ctx's error if ctx ends first.
func (r *Ring) ClaimBatch(ctx context.Context, leases []Lease) (int, error) {
	if r.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	if len(leases) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if werr := block(ctx, r.reg, r.notEmptySeq, r.notEmptyW, r.emptyHits, r.headSlot, r.healSlot, func() bool {
		n, err = r.claimBatch(leases)
		return err != ErrEmpty
	}); werr != nil {
		return 0, werr
	}
	return n, err
}

func (r *Ring) claimBatch(leases []Lease) (int, error) {
	n := 0
	var err error
	for n < len(leases) {
		var k int
		if k, err = r.claimRun(leases[n:]); err != nil {
			break
		}
		n += k
	}
	if n == 0 {
		return 0, err
	}
	r.claimed.Add(uint64(n))
	if err == ErrEmpty {
		err = nil
	}
	return n, err
}

// claimRun leases a run of messages at consecutive positions, as popRun
// takes them, and moves the head past the run once.
func (r *Ring) claimRun(leases []Lease) (int, error) {
	h, taken, err := r.take(layout.SlotLeased, math.MaxInt)
	if err != nil {
		return 0, err
	}
	// Leases are built in place, as claim builds its own: a helper
	// returning the Lease, even inlined, made TryClaim+Ack 7 ns slower
	// (the struct went through the stack twice).
	leases[0] = Lease{slot: h & r.mask, lap: layout.SlotLapOf(taken), data: r.payload(h, layout.SlotLengthOf(taken)), id: r.leaseID(h), Deliveries: int(layout.SlotDeliveriesOf(taken))}
	k := 1
	for most := min(len(leases), int(r.lay.Capacity)); k < most; k++ {
		p := h + uint64(k)
		taken, ok := r.takeNext(p, layout.SlotLeased, math.MaxInt)
		if !ok {
			break
		}
		leases[k] = Lease{slot: p & r.mask, lap: layout.SlotLapOf(taken), data: r.payload(p, layout.SlotLengthOf(taken)), id: r.leaseID(p), Deliveries: int(layout.SlotDeliveriesOf(taken))}
	}
	shm.CrashPoint(crashRingClaimBatchAfterTake)
	advance(r.head, h, h+uint64(k))
	shm.CrashPoint(crashRingClaimBatchAfterAdvance)
	return k, nil
}

// AckBatch releases every lease of leases, each with the CAS Ack makes,
// and counts them and wakes producers once. A lease this handle no longer
// holds does not stop the others: they are acked, and the error (wrapping
// ErrLeaseLost) names the first lease that could not be, by its index,
// and how many could not. If the process dies inside AckBatch, the leases
// it had not freed yet are delivered again by a repair, as the lease of a
// single Ack that never ran.
func (r *Ring) AckBatch(leases []Lease) error {
	if r.tab.Self == 0 {
		return ErrNotAttached
	}
	acked, lost, first := 0, 0, 0
	var firstErr error
	for i := range leases {
		if err := r.ack(&leases[i]); err != nil {
			if lost == 0 {
				first, firstErr = i, err
			}
			lost++
			continue
		}
		acked++
		if i+1 < len(leases) {
			shm.CrashPoint(crashRingAckBatchMidFree)
		}
	}
	if acked > 0 {
		r.acked.Add(uint64(acked))
		if r.notFullW.Load() != 0 {
			r.wakeProducers()
		}
	}
	if lost > 0 {
		return fmt.Errorf("%w (lease %d of the batch; %d of its %d leases not acked, the others were)", firstErr, first, lost, len(leases))
	}
	return nil
}
