package transport

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// The deque's batch calls. What they return and how their blocking forms
// wait is the ring's contract (package documentation, "Batch calls"); the
// state machine, why thieves still step top one message at a time, and
// the crash windows are in docs/design.md ("The deque", "Batch calls").
//
// The owner's side is batched: a push batch claims a run of positions at
// the bottom and moves bottom past the run once; a pop batch announces a
// run at once (bottom moved down past it) and takes the run newest first.
// The thieves' side is not: every message a steal or claim batch takes is
// taken by steal, slot CAS then top CAS, before the next, because the
// owner's pop tells a thief's take from a burned position by top (a thief
// takes p only when top is p), which a top moved past several messages
// at once would break. What a thief's batch saves is per call: the
// counter add, the wake check, the copies and frees done together.

// dequeRun is the most messages one run of an owner's pop batch or of a
// steal batch takes: the positions it took are kept on the stack (a bit
// mask, an array), so a batch allocates nothing; longer batches take
// several runs.
const dequeRun = 64

// TryPushBatch publishes msgs at the bottom, in order, as far as there is
// room, and returns how many it published (see Batch calls in the package
// documentation for n and the error). Only the owner may push
// (ErrNotOwner). A message larger than MaxPayload refuses the whole batch
// up front with ErrTooLarge naming its index: nothing is pushed.
//
// The messages take consecutive positions while those are free; a lease
// or poison in the way (burned past, as a single push does) or a returned
// message (published again first, as a single push does) splits the batch
// in runs. The batch's messages keep their order: the owner's pops take
// the last first, thieves the first first. Within a run every message is
// published (thieves may take it) before bottom moves past the run.
func (d *Deque) TryPushBatch(msgs [][]byte) (int, error) { return d.tryPushBatch(msgs, nil) }

// TryPushBatchID is TryPushBatch stamping msgs[i] with ids[i] instead of
// the deque's next numbers (see Ring.TryPushBatchID for the rules).
func (d *Deque) TryPushBatchID(msgs [][]byte, ids []uint64) (int, error) {
	if err := batchIDs(d.Path(), d.lay.MessageIDs, len(msgs), ids); err != nil {
		return 0, err
	}
	return d.tryPushBatch(msgs, ids)
}

// PushBatchID is PushBatch stamping msgs[i] with ids[i].
func (d *Deque) PushBatchID(ctx context.Context, msgs [][]byte, ids []uint64) (int, error) {
	if err := batchIDs(d.Path(), d.lay.MessageIDs, len(msgs), ids); err != nil {
		return 0, err
	}
	return d.pushBatchWait(ctx, msgs, ids)
}

func (d *Deque) tryPushBatch(msgs [][]byte, ids []uint64) (int, error) {
	if err := d.batchFits(msgs); err != nil || len(msgs) == 0 {
		return 0, err
	}
	d.ownerMu.Lock()
	n, err := d.pushBatch(msgs, ids)
	d.ownerMu.Unlock()
	if err == ErrFull {
		d.fullHits.Add(1)
	}
	return n, err
}

// PushBatch is TryPushBatch waiting, while nothing fits, for room for at
// least one message. It returns 0 and ctx's error if ctx ends first.
func (d *Deque) PushBatch(ctx context.Context, msgs [][]byte) (int, error) {
	return d.pushBatchWait(ctx, msgs, nil)
}

func (d *Deque) pushBatchWait(ctx context.Context, msgs [][]byte, ids []uint64) (int, error) {
	if err := d.batchFits(msgs); err != nil || len(msgs) == 0 {
		return 0, err
	}
	var n int
	var err error
	if werr := block(ctx, d.reg, d.notFullSeq, d.notFullW, d.fullHits, d.bottomSlot, d.healSlot, func() bool {
		d.ownerMu.Lock()
		n, err = d.pushBatch(msgs, ids)
		d.ownerMu.Unlock()
		return err != ErrFull
	}); werr != nil {
		return 0, werr // no try got through: nothing was pushed
	}
	return n, err
}

// batchFits is ownerCheck for a batch: attached, the owner, and every
// message no larger than a slot holds.
func (d *Deque) batchFits(msgs [][]byte) error {
	if d.tab.Self == 0 {
		return ErrNotAttached
	}
	if !d.owner.Load() {
		return fmt.Errorf("%w: %s", ErrNotOwner, d.Path())
	}
	return batchSizes(d.Path(), d.lay.PayloadMax(), msgs)
}

// pushBatch runs under ownerMu: run by run until all are pushed or a run
// can push none, then it counts them and wakes thieves, once. ErrFull
// only when it pushed nothing.
func (d *Deque) pushBatch(msgs [][]byte, ids []uint64) (int, error) {
	n := 0
	var err error
	for n < len(msgs) {
		var k int
		var runIDs []uint64
		if ids != nil {
			runIDs = ids[n:]
		}
		if k, err = d.pushRun(msgs[n:], runIDs); err != nil {
			break
		}
		n += k
	}
	if n == 0 {
		return 0, err
	}
	shm.CrashPoint(crashDequePushBatchAfterAdvance)
	d.pushed.Add(uint64(n)) // also the full barrier before notEmptyW's load
	if d.notEmptyW.Load() != 0 {
		d.wakeThieves()
	}
	if err == ErrFull {
		err = nil
	}
	return n, err
}

// pushRun pushes a run of msgs at consecutive positions from bottom:
// msgs[0] at the position claimBottom takes (the single push's state
// machine), then each next message at the next position while that
// position is inside the window (less than a deque above top, re-reading
// top only when the last value seen says no, as claimBottom does) and its
// word is exactly FREE at the position's own lap, claimed by the CAS a
// single push makes (FREE(L) -> WRITING(L, me)). Anything else ends the
// run; the next starts there with claimBottom, which burns, republishes,
// steps over, reports full or names the corrupt word.
//
// Then every message is written and published (READY) in order, and
// bottom moves past the run once. Until it does, the run's published
// messages lie above bottom: thieves may take them (a READY word at top's
// own lap is published, whatever bottom says), and top may pass bottom by
// as many; a repair after the owner's death counts in what is published
// and releases the rest (fixBottom).
func (d *Deque) pushRun(msgs [][]byte, ids []uint64) (int, error) {
	b, err := d.claimBottom()
	if err != nil {
		return 0, err
	}
	mine := layout.SlotOwnerBits(d.tab.Self) | uint64(layout.SlotWriting)
	k := uint64(1)
	for most := min(uint64(len(msgs)), d.lay.Capacity); k < most; k++ {
		p := b + k
		if p-d.topSeen >= d.lay.Capacity {
			// top is at most b here (position b is ours, WRITING), so
			// the difference cannot wrap.
			if d.topSeen = d.top.Load(); p-d.topSeen >= d.lay.Capacity {
				break
			}
		}
		w := d.slotWord(p)
		free := layout.SlotFreeAt(p, d.lay.CapShift)
		if w.Load() != free || !w.CompareAndSwap(free, free|mine) {
			break
		}
	}
	shm.CrashPoint(crashDequePushBatchAfterClaims)
	var firstID uint64
	if d.lay.MessageIDs && ids == nil {
		// One number for each message of the run, taken at once (a death
		// before they are published leaves a gap, as a single push's).
		firstID = d.nextID.Add(k) - k + 1
		shm.CrashPoint(crashDequePushBatchAfterIDs)
	}
	for j := uint64(0); j < k; j++ {
		p := b + j
		m := msgs[j]
		switch {
		case ids != nil:
			d.setSlotID(p, ids[j])
		case firstID != 0:
			d.setSlotID(p, firstID+j)
		}
		copy(d.payload(p, uint32(len(m))), m)
		// Release, as in pushBottom: the payload before the READY word.
		storeRelease((*uint64)(unsafe.Pointer(d.slotWord(p))), layout.SlotFreeAt(p, d.lay.CapShift)|layout.SlotLengthBits(uint32(len(m)))|uint64(layout.SlotReady))
		if j+1 < k {
			shm.CrashPoint(crashDequePushBatchMidPublish)
		}
	}
	shm.CrashPoint(crashDequePushBatchAfterPublish)
	d.bottom.Store(b + k)
	return int(k), nil
}

// TryPopBatch takes the messages TryPop would take, one after another, as
// many as are waiting, up to min(len(bufs), len(lens)): the owner's
// newest first from the bottom, a thief's oldest first from the top. It
// copies message i into bufs[i], its length into lens[i], and returns how
// many (see Batch calls in the package documentation). The messages are
// the caller's once it returns; if the process dies inside it, a repair
// delivers again every message it had not freed yet (each is copied out
// before the first is freed). A message longer than its buffer stops the
// batch there with ErrShortBuffer; it stays in the deque.
func (d *Deque) TryPopBatch(bufs [][]byte, lens []int) (int, error) {
	if d.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	m := min(len(bufs), len(lens))
	if m == 0 {
		return 0, nil
	}
	n, err := d.popBatch(bufs[:m], lens[:m])
	if err == ErrEmpty {
		d.emptyHits.Add(1)
	}
	return n, err
}

// PopBatch is TryPopBatch waiting, while no message is waiting, for at
// least one. It returns 0 and ctx's error if ctx ends first.
func (d *Deque) PopBatch(ctx context.Context, bufs [][]byte, lens []int) (int, error) {
	return d.waitBatch(ctx, bufs, lens, d.popBatch)
}

// TryStealBatch is TrySteal for many: the oldest messages, from the top,
// whichever handle calls it (the owner's handle steals under leases, as
// TrySteal does). See TryPopBatch for bufs, lens, n and the error.
func (d *Deque) TryStealBatch(bufs [][]byte, lens []int) (int, error) {
	if d.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	m := min(len(bufs), len(lens))
	if m == 0 {
		return 0, nil
	}
	n, err := d.stealCopyBatch(bufs[:m], lens[:m])
	if err == ErrEmpty {
		d.emptyHits.Add(1)
	}
	return n, err
}

// StealBatch is TryStealBatch waiting, while no message is waiting, for
// at least one. It returns 0 and ctx's error if ctx ends first.
func (d *Deque) StealBatch(ctx context.Context, bufs [][]byte, lens []int) (int, error) {
	return d.waitBatch(ctx, bufs, lens, d.stealCopyBatch)
}

// waitBatch runs a pop or steal batch under block.
func (d *Deque) waitBatch(ctx context.Context, bufs [][]byte, lens []int, take func([][]byte, []int) (int, error)) (int, error) {
	if d.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	m := min(len(bufs), len(lens))
	if m == 0 {
		return 0, nil
	}
	bufs, lens = bufs[:m], lens[:m]
	var n int
	var err error
	if werr := block(ctx, d.reg, d.notEmptySeq, d.notEmptyW, d.emptyHits, d.topSlot, d.healSlot, func() bool {
		n, err = take(bufs, lens)
		return err != ErrEmpty
	}); werr != nil {
		return 0, werr
	}
	return n, err
}

// popBatch is the batch form of pop: the owner's handle pops at the
// bottom under ownerMu, a thief's steals at the top.
func (d *Deque) popBatch(bufs [][]byte, lens []int) (int, error) {
	if d.owner.Load() {
		d.ownerMu.Lock()
		if d.owner.Load() {
			n, err := d.popBatchBottom(bufs, lens)
			d.ownerMu.Unlock()
			return n, err
		}
		d.ownerMu.Unlock() // disowned meanwhile: a thief now
	}
	return d.stealBatch(layout.SlotReading, bufs, lens)
}

// stealCopyBatch is stealCopy for many.
func (d *Deque) stealCopyBatch(bufs [][]byte, lens []int) (int, error) {
	state := layout.SlotReading
	if d.owner.Load() {
		state = layout.SlotLeased
	}
	return d.stealBatch(state, bufs, lens)
}

// popBatchBottom runs under ownerMu, with the role held: run by run at the
// bottom, doing what popBottom does where a run cannot go on (a returned
// message when the bottom side is empty; a message delivered too often
// taken from the top instead), then it counts the bottom pops and wakes a
// blocked push, once. ErrEmpty only when it popped nothing.
func (d *Deque) popBatchBottom(bufs [][]byte, lens []int) (int, error) {
	n, popped := 0, 0
	var err error
	for n < len(bufs) {
		var k int
		k, err = d.popRunBottom(bufs[n:], lens[n:])
		n += k
		popped += k
		switch {
		case err == nil:
			continue
		case err == ErrEmpty && d.pending.Load() != 0:
			// popBottom's way: a returned message (leased, never
			// READING, which marks bottom pops), copied and freed.
			lens[n], _, err = d.popReturned(bufs[n])
		case err == errTakeFromTop:
			// pop's way: the newest message has been delivered too
			// often; take from the top, where steals set poison aside.
			var l Lease
			if l, err = d.steal(layout.SlotLeased, len(bufs[n])); err == nil {
				lens[n] = copy(bufs[n], l.data)
				d.free(l.slot, l.lap)
			}
		}
		if err != nil {
			break
		}
		n++
	}
	if popped > 0 {
		d.ownerPopped.Add(uint64(popped)) // also the full barrier before notFullW's load
		if d.notFullW.Load() != 0 {
			d.wakeOwner() // the positions popped are the owner's to push at again
		}
	}
	if n == 0 {
		return 0, err
	}
	if err == ErrEmpty {
		err = nil
	}
	return n, err
}

// popRunBottom pops a run at the bottom, newest first. It announces the
// whole run at once (bottom := b-k, k no more than the messages between
// top and bottom): a thief that has not taken a position of the run by
// then sees bottom at or below it and stops, one that had read the old
// bottom may still take it, and the slot CAS decides, as for a single
// pop's last message. Then, from b-1 down, each READY message is taken by
// popBottom's CAS (READY(L) -> READING(L, me)); a position consumed at
// the top below top is a thief's take (everything below it is gone too:
// the run stops there, bottom goes back above it and top is helped past
// it); one above top is burned and stepped below, as popBottom does.
// bottom ends at the lowest position the run took or stepped below, so
// what it announced and did not take is seen again. Then every message is
// copied out, and only then are the slots freed (FREE(L), for the owner's
// next push), highest first: a repair after a death in between rolls
// back the lowest ones, which are the ones left.
//
// It returns how many it took and why it stopped: nil when the next run
// may go on (the announced run is done, or a thief won a position), or
// the error popBottom would return at the position it stopped at
// (ErrEmpty, errTakeFromTop, ErrShortBuffer, ErrCorrupt).
func (d *Deque) popRunBottom(bufs [][]byte, lens []int) (int, error) {
	b := d.bottom.Load()
	t := d.top.Load()
	if b <= t {
		return 0, ErrEmpty
	}
	lo := b - min(uint64(len(bufs)), b-t, dequeRun)
	d.bottom.Store(lo)
	shm.CrashPoint(crashDequePopBatchAfterAnnounce)
	var took uint64 // bit i: position b-1-i taken by this run
	n, low := 0, b
	stolen := false
	var err error
	for p := b - 1; p >= lo; p-- {
		lap := d.lay.LapOf(p)
		w := d.slotWord(p)
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		diff := layout.LapDiff(sw.Lap, lap)
		if diff == 0 && sw.State == layout.SlotReady {
			if e := sw.Validate(&d.lay.SlotGeometry); e != nil {
				err = d.corrupt(p, raw, e)
				break
			}
			if uint32(sw.Deliveries) >= d.lay.DeliveryLimit {
				err = errTakeFromTop
				break
			}
			if int(sw.Length) > len(bufs[n]) {
				err = fmt.Errorf("%w: %s: message is %d bytes, buffer %d", ErrShortBuffer, d.Path(), sw.Length, len(bufs[n]))
				break
			}
			// Validated READY: no owner, deliveries under the limit.
			if !w.CompareAndSwap(raw, takenWord(raw, layout.SlotReading, d.tab.Self)) {
				break // a thief won it: the next run finds it taken
			}
			lens[n] = int(sw.Length)
			took |= 1 << (b - 1 - p)
			n++
			low = p
			if p > lo {
				shm.CrashPoint(crashDequePopBatchMidTake)
			}
		} else if d.consumedAtTop(sw, diff) || (diff == 0 && sw.State == layout.SlotReading && sw.Owner == d.tab.Self) {
			if p > d.top.Load() {
				low = p // burned: step below it and go on
			} else {
				stolen = true // taken at the top: so is everything below
				break
			}
		} else {
			err = d.corrupt(p, raw, fmt.Errorf("%s slot at lap %d seen from bottom %d (lap %d)", sw.State, sw.Lap, p, lap))
			break
		}
		if p == 0 {
			break
		}
	}
	if low != lo {
		d.bottom.Store(low) // un-announce what the run did not get to
	}
	if stolen {
		// As popBottom: help top past the thief's take (its taker may
		// have died before its own top CAS).
		d.top.CompareAndSwap(low-1, low)
	}
	if n == 0 {
		return 0, err
	}
	shm.CrashPoint(crashDequePopBatchAfterTake)
	// lens[j] holds the length validated when its position was taken.
	j := 0
	for i := uint64(0); took>>i != 0; i++ {
		if took&(1<<i) != 0 {
			lens[j] = copy(bufs[j], d.payload(b-1-i, uint32(lens[j])))
			j++
		}
	}
	shm.CrashPoint(crashDequePopBatchAfterCopy)
	for i := uint64(0); took>>i != 0; i++ {
		if took&(1<<i) != 0 {
			p := b - 1 - i
			// A release store, as in popBottom: the copy out is done.
			storeRelease((*uint64)(unsafe.Pointer(d.slotWord(p))), layout.SlotFreeAt(p, d.lay.CapShift))
			if took>>(i+1) != 0 {
				shm.CrashPoint(crashDequePopBatchMidFree)
			}
		}
	}
	return n, err
}

// stealBatch steals run by run (state READING for a thief's pop, LEASED
// for the owner handle's), then counts and wakes the owner, once. ErrEmpty
// only when it took nothing.
func (d *Deque) stealBatch(state layout.SlotState, bufs [][]byte, lens []int) (int, error) {
	n := 0
	var err error
	for n < len(bufs) {
		var k int
		k, err = d.stealRun(state, bufs[n:], lens[n:])
		n += k
		if err != nil {
			break
		}
	}
	if n == 0 {
		return 0, err
	}
	d.stolen.Add(uint64(n)) // also the full barrier before notFullW's load
	if d.notFullW.Load() != 0 {
		d.wakeOwner()
	}
	if err == ErrEmpty {
		err = nil
	}
	return n, err
}

// stealRun takes up to dequeRun messages, each by steal (its slot CAS
// stamps this participant, then top moves past it, before the next is
// taken: see the top of this file), then copies every one out, and only
// then frees their slots.
func (d *Deque) stealRun(state layout.SlotState, bufs [][]byte, lens []int) (int, error) {
	var slots [dequeRun]uint64
	k := 0
	var err error
	for most := min(len(bufs), dequeRun); k < most; k++ {
		var l Lease
		if l, err = d.steal(state, len(bufs[k])); err != nil {
			break
		}
		slots[k], lens[k] = l.slot, len(l.data)
	}
	if k == 0 {
		return 0, err
	}
	shm.CrashPoint(crashDequeStealBatchAfterTake)
	for j := range k {
		lens[j] = copy(bufs[j], d.payload(slots[j], uint32(lens[j])))
	}
	shm.CrashPoint(crashDequeStealBatchAfterCopy)
	for j := range k {
		d.freeSlot(slots[j])
		if j+1 < k {
			shm.CrashPoint(crashDequeStealBatchMidFree)
		}
	}
	return k, err
}

// TryClaimBatch leases the oldest messages into leases, from the top
// whoever calls it, as many as are waiting, up to len(leases), and
// returns how many (see Batch calls in the package documentation).
// Messages delivered DeliveryLimit times are set aside as poison on the
// way, as TryClaim does. If the process dies inside it, a repair hands
// every message it had leased back.
func (d *Deque) TryClaimBatch(leases []Lease) (int, error) {
	if d.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	if len(leases) == 0 {
		return 0, nil
	}
	n, err := d.claimBatch(leases)
	if err == ErrEmpty {
		d.emptyHits.Add(1)
	}
	return n, err
}

// ClaimBatch is TryClaimBatch waiting, while no message is waiting, for
// at least one. It returns 0 and ctx's error if ctx ends first.
func (d *Deque) ClaimBatch(ctx context.Context, leases []Lease) (int, error) {
	if d.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	if len(leases) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if werr := block(ctx, d.reg, d.notEmptySeq, d.notEmptyW, d.emptyHits, d.topSlot, d.healSlot, func() bool {
		n, err = d.claimBatch(leases)
		return err != ErrEmpty
	}); werr != nil {
		return 0, werr
	}
	return n, err
}

// claimBatch leases message by message (each by steal: slot CAS, then
// top), then counts once.
func (d *Deque) claimBatch(leases []Lease) (int, error) {
	n := 0
	var err error
	for ; n < len(leases); n++ {
		var l Lease
		if l, err = d.steal(layout.SlotLeased, math.MaxInt); err != nil {
			break
		}
		leases[n] = l
	}
	if n == 0 {
		return 0, err
	}
	shm.CrashPoint(crashDequeClaimBatchAfterTake)
	d.claimed.Add(uint64(n))
	if err == ErrEmpty {
		err = nil
	}
	return n, err
}

// AckBatch releases every lease of leases, each with the CAS Ack makes,
// and counts them and wakes the owner once. A lease this handle no longer
// holds does not stop the others: they are acked, and the error (wrapping
// ErrLeaseLost) names the first lease that could not be, by its index,
// and how many could not. If the process dies inside AckBatch, the leases
// it had not freed yet are handed back by a repair, as the lease of a
// single Ack that never ran.
func (d *Deque) AckBatch(leases []Lease) error {
	if d.tab.Self == 0 {
		return ErrNotAttached
	}
	acked, lost, first := 0, 0, 0
	var firstErr error
	for i := range leases {
		if err := d.ack(&leases[i]); err != nil {
			if lost == 0 {
				first, firstErr = i, err
			}
			lost++
			continue
		}
		acked++
		if i+1 < len(leases) {
			shm.CrashPoint(crashDequeAckBatchMidFree)
		}
	}
	if acked > 0 {
		d.acked.Add(uint64(acked))
		if d.notFullW.Load() != 0 {
			d.wakeOwner()
		}
	}
	if lost > 0 {
		return fmt.Errorf("%w (lease %d of the batch; %d of its %d leases not acked, the others were)", firstErr, first, lost, len(leases))
	}
	return nil
}
