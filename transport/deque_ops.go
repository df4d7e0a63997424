package transport

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/internal/spin"
)

// The deque's state machine (docs/design.md, "The deque"):
//
//   - Only the owner moves bottom. It publishes a message (slot READY at the
//     position's lap) before it moves bottom past it, and it announces a
//     pop (bottom := p) before it takes slot p.
//   - Every message is taken by a CAS on its slot word, which stamps the
//     taker: that CAS, not top or bottom, decides between the owner's pop
//     and a thief's steal of the last message.
//   - top moves only past positions a thief (or the owner's top-side take)
//     has consumed; whoever sees one helps top on. The owner's own pops are
//     stamped READING with the owner's entry and never leased, so a thief
//     can tell them apart and never moves top past a position the owner
//     may push again.
//   - A message handed back (Release, a dead consumer) is RETURNED in its
//     own slot below top; consumers that find the deque otherwise empty
//     take it, and the owner re-publishes it in place when its push
//     reaches that slot.

// maxStaleRetries bounds how often a steal re-reads top, bottom and the
// slot when they disagree only because the owner is mid-operation.
const maxStaleRetries = 1 << 10

// TryPush publishes msg at the bottom, or returns ErrFull. Only the owner
// may push (ErrNotOwner otherwise). A message larger than MaxPayload is
// refused with ErrTooLarge.
func (d *Deque) TryPush(msg []byte) error { return d.tryPush(msg, 0) }

// TryPushID is TryPush with the message id given by the caller instead of
// the deque's next number (see Ring.TryPushID): ErrNoMessageIDs in a
// deque without ids, ErrZeroID for id 0. The deque's own numbers stay
// below 2^63; callers' ids belong in the space with bit 63 set (the
// convention of Ring.TryPushID).
func (d *Deque) TryPushID(msg []byte, id uint64) error {
	if err := d.idAllowed(id); err != nil {
		return err
	}
	return d.tryPush(msg, id)
}

func (d *Deque) tryPush(msg []byte, id uint64) error {
	if err := d.ownerCheck(len(msg)); err != nil {
		return err
	}
	d.ownerMu.Lock()
	err := d.pushBottom(msg, id)
	d.ownerMu.Unlock()
	if err == ErrFull {
		d.fullHits.Add(1)
	}
	return err
}

func (d *Deque) ownerCheck(n int) error {
	if d.tab.Self == 0 {
		return ErrNotAttached
	}
	if !d.owner.Load() {
		return fmt.Errorf("%w: %s", ErrNotOwner, d.Path())
	}
	if uint64(n) > d.lay.PayloadMax() {
		return d.tooLarge(n)
	}
	return nil
}

// pushBottom runs under ownerMu: claimBottom takes the position, then the
// message is written, published (READY) and counted in (bottom).
// In a deque with message ids it stamps id, or (id 0) the next number
// of the deque's counter, taken after the claim: a death between the two
// leaves the counter as it was; one after (deque.push.after-id) leaves a
// gap, the claimed slot released by a repair like any half-done push.
func (d *Deque) pushBottom(msg []byte, id uint64) error {
	b, err := d.claimBottom()
	if err != nil {
		return err
	}
	shm.CrashPoint(crashDequePushAfterClaim)
	w := d.slotWord(b)
	if d.lay.MessageIDs {
		if id == 0 {
			id = d.nextID.Add(1)
			shm.CrashPoint(crashDequePushAfterID)
		}
		d.setSlotID(b, id)
	}
	copy(d.payload(b, uint32(len(msg))), msg)
	// Release: the payload is visible before the READY word, and the
	// READY word before bottom moves past it (bottom's store is an XCHG:
	// the full barrier before notEmptyW's load).
	storeRelease((*uint64)(unsafe.Pointer(w)), layout.SlotFreeAt(b, d.lay.CapShift)|layout.SlotLengthBits(uint32(len(msg)))|uint64(layout.SlotReady))
	shm.CrashPoint(crashDequePushAfterWrite)
	d.bottom.Store(b + 1)
	shm.CrashPoint(crashDequePushAfterPublish)
	d.pushed.Add(1)
	if d.notEmptyW.Load() != 0 {
		d.wakeThieves()
	}
	return nil
}

// claimBottom runs under ownerMu: the single push's state machine up to the
// CAS that takes the position at bottom (FREE(L) -> WRITING(L, me)), which
// it returns. On the way it republishes returned messages, burns past
// leases and poison and steps over positions burned before, moving bottom
// past each; it stops with ErrFull or ErrCorrupt. The push batch's runs
// start with it (deque_batch.go). The role is checked again here: a Disown
// between the caller's check and the mutex must not leave a non-owner
// moving bottom.
func (d *Deque) claimBottom() (uint64, error) {
	if !d.owner.Load() {
		return 0, fmt.Errorf("%w: %s", ErrNotOwner, d.Path())
	}
	for {
		b := d.bottom.Load()
		// top's line is written by every steal: read it only when the
		// deque looks full by the last value seen (top never moves back,
		// so a stale value can only make it look fuller).
		t := d.topSeen
		if b-t >= d.lay.Capacity || b < t {
			t = d.top.Load()
			d.topSeen = t
		}
		if b >= t && b-t > d.lay.Capacity {
			// top is fresh here: bottom cannot be that far ahead.
			return 0, fmt.Errorf("%w: %s: bottom %d is more than a deque ahead of top %d", ErrCorrupt, d.Path(), b, t)
		}
		if b >= t && b-t == d.lay.Capacity {
			return 0, ErrFull
		}
		if b < t {
			// Only a dead owner's interrupted pop leaves bottom below
			// top, and adoption repairs that first.
			return 0, fmt.Errorf("%w: %s: bottom %d below top %d", ErrCorrupt, d.Path(), b, t)
		}
		w := d.slotWord(b)
		raw := w.Load()
		// The common case, FREE at b's lap, tested and built packed
		// (layout/slotword_packed.go: a SlotWord goes through the stack).
		if free := layout.SlotFreeAt(b, d.lay.CapShift); raw == free {
			if !w.CompareAndSwap(free, free|layout.SlotOwnerBits(d.tab.Self)|uint64(layout.SlotWriting)) {
				continue // a repair moved it; look again
			}
			return b, nil
		}
		lap := d.lay.LapOf(b)
		sw := layout.UnpackSlot(raw)
		switch diff := layout.LapDiff(sw.Lap, lap); {
		case (diff == -1 || diff == 0) && sw.State == layout.SlotReturned:
			// A message handed back in this slot (one lap ago, or at
			// this very position after the owner popped back below it):
			// publish it again here, as the newest, and push ours after.
			if err := sw.Validate(&d.lay.SlotGeometry); err != nil {
				return 0, d.corrupt(b, raw, err)
			}
			again := layout.SlotWord{State: layout.SlotReady, Deliveries: sw.Deliveries, Length: sw.Length, Lap: lap}
			if w.CompareAndSwap(raw, again.Pack()) {
				shm.CrashPoint(crashDequePushAfterRepublish)
				d.bottom.Store(b + 1)
				d.uncountReturned()
			}

		case diff == -1 && (sw.State == layout.SlotLeased || sw.State == layout.SlotPoisoned):
			// A consumer still holds the message that was here a lap ago,
			// or it is poison. Skip ("burn") position b rather than stall
			// behind it: the slot's lap moves to b's, so thieves step over
			// b as consumed, and Ack or TakePoisoned frees it for the
			// position one lap on.
			if err := sw.Validate(&d.lay.SlotGeometry); err != nil {
				return 0, d.corrupt(b, raw, err)
			}
			moved := sw
			moved.Lap = lap
			if w.CompareAndSwap(raw, moved.Pack()) {
				shm.CrashPoint(crashDequePushAfterBurn)
				d.bottom.Store(b + 1)
				d.burned.Add(1)
			}

		case (diff == 0 && (sw.State == layout.SlotLeased || sw.State == layout.SlotPoisoned || (sw.State == layout.SlotReading && sw.Owner != d.tab.Self))) ||
			(diff == 1 && sw.State == layout.SlotFree):
			// Position b was burned before (the owner has popped back
			// below it since), and its lease is still held, or a thief
			// is taking it as a returned message, or it has been freed
			// meanwhile: step over it again.
			d.bottom.Store(b + 1)

		case diff == -1 && sw.State == layout.SlotReading:
			// A thief is copying out the message that was here a lap
			// ago: it is about to free the slot.
			return 0, ErrFull

		default:
			return 0, d.corrupt(b, raw, fmt.Errorf("%s slot at lap %d seen from bottom %d (lap %d)", sw.State, sw.Lap, b, lap))
		}
	}
}

// TryPop takes a message: the owner pops the newest at the bottom, a thief
// steals the oldest at the top. It copies the message into buf and
// returns its length, or ErrEmpty. As with the ring, a popped message is
// the caller's once TryPop returns (use Claim for at-least-once).
func (d *Deque) TryPop(buf []byte) (int, error) {
	n, _, err := d.TryPopID(buf)
	return n, err
}

// TryPopID is TryPop returning the message's id too (0 in a deque
// without message ids).
func (d *Deque) TryPopID(buf []byte) (n int, id uint64, err error) {
	n, id, err = d.pop(buf)
	if err == ErrEmpty {
		d.emptyHits.Add(1)
	}
	return n, id, err
}

func (d *Deque) pop(buf []byte) (int, uint64, error) {
	if d.tab.Self == 0 {
		return 0, 0, ErrNotAttached
	}
	if d.owner.Load() {
		d.ownerMu.Lock()
		n, id, err := d.popBottom(buf)
		d.ownerMu.Unlock()
		if err != errTakeFromTop {
			return n, id, err
		}
		if !d.owner.Load() {
			return d.stealCopy(buf) // disowned meanwhile: a thief now
		}
		// The newest message has been delivered too often: take from
		// the top, where steals set poison aside, until it is reached.
		l, err := d.steal(layout.SlotLeased, len(buf))
		if err != nil {
			return 0, 0, err
		}
		n = copy(buf, l.data)
		d.free(l.slot, l.lap)
		return n, l.id, nil
	}
	l, err := d.steal(layout.SlotReading, len(buf))
	if err != nil {
		return 0, 0, err
	}
	n := copy(buf, l.data)
	shm.CrashPoint(crashDequeStealAfterCopy)
	d.free(l.slot, l.lap)
	d.stolen.Add(1)
	return n, l.id, nil
}

// errTakeFromTop tells pop that the bottom message must not be popped there.
var errTakeFromTop = fmt.Errorf("transport: take from the top")

// popBottom runs under ownerMu. A handle that is no longer the owner (a
// Disown since the caller looked) takes from the top instead.
func (d *Deque) popBottom(buf []byte) (int, uint64, error) {
	if !d.owner.Load() {
		return 0, 0, errTakeFromTop
	}
	for {
		b := d.bottom.Load()
		t := d.top.Load()
		if b <= t {
			if d.pending.Load() != 0 {
				return d.popReturned(buf)
			}
			return 0, 0, ErrEmpty
		}
		p := b - 1
		lap := d.lay.LapOf(p)
		// Announce the pop before taking the slot: a thief that has not
		// yet taken p sees bottom <= p and stops.
		d.bottom.Store(p)
		shm.CrashPoint(crashDequePopAfterAnnounce)
		w := d.slotWord(p)
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		diff := layout.LapDiff(sw.Lap, lap)
		switch {
		case diff == 0 && sw.State == layout.SlotReady:
			if err := sw.Validate(&d.lay.SlotGeometry); err != nil {
				d.bottom.Store(b)
				return 0, 0, d.corrupt(p, raw, err)
			}
			if uint32(sw.Deliveries) >= d.lay.DeliveryLimit {
				d.bottom.Store(b)
				return 0, 0, errTakeFromTop
			}
			if int(sw.Length) > len(buf) {
				d.bottom.Store(b)
				return 0, 0, fmt.Errorf("%w: %s: message is %d bytes, buffer %d", ErrShortBuffer, d.Path(), sw.Length, len(buf))
			}
			taken := layout.SlotWord{State: layout.SlotReading, Deliveries: sw.Deliveries + 1, Owner: d.tab.Self, Length: sw.Length, Lap: lap}
			if !w.CompareAndSwap(raw, taken.Pack()) {
				d.bottom.Store(b) // look again: a thief may have won it
				continue
			}
			shm.CrashPoint(crashDequePopAfterTake)
			n := copy(buf, d.payload(p, sw.Length))
			id := d.slotID(p)
			shm.CrashPoint(crashDequePopAfterCopy)
			// Position p is free for the owner's next push.
			storeRelease((*uint64)(unsafe.Pointer(w)), layout.SlotFreeAt(p, d.lay.CapShift))
			d.ownerPopped.Add(1) // also the full barrier before notFullW's load
			if d.notFullW.Load() != 0 {
				// The owner's own Push, blocked in another goroutine of
				// this handle on a full deque: position p is its to
				// push at now.
				d.wakeOwner()
			}
			return n, id, nil

		case d.consumedAtTop(sw, diff) || (diff == 0 && sw.State == layout.SlotReading && sw.Owner == d.tab.Self):
			// (READING by this handle at p is its own steal in flight,
			// taken before it adopted: the owner's own pops finish under
			// ownerMu.)
			if p > d.top.Load() {
				// Not taken at the top (top has not reached p): a
				// position the owner burned past a held lease. Step
				// below it and go on popping.
				continue
			}
			// A thief took the last message (it took p at the top, so
			// everything below p is gone too). Put bottom back, and help
			// top past p as a thief would: if top is still p, the taker
			// died between its slot CAS and its top CAS
			// (deque.steal.after-take), and with no thief left to step
			// over p the deque would count a message that is not there
			// for good (Len 1, one slot short of capacity). A CAS from
			// the exact value, with p proven consumed at its lap: a late
			// one fails harmlessly.
			d.bottom.Store(b)
			d.top.CompareAndSwap(p, p+1)
			if d.pending.Load() != 0 {
				return d.popReturned(buf)
			}
			return 0, 0, ErrEmpty

		default:
			d.bottom.Store(b)
			return 0, 0, d.corrupt(p, raw, fmt.Errorf("%s slot at lap %d seen from bottom %d (lap %d)", sw.State, sw.Lap, p, lap))
		}
	}
}

// popReturned takes a returned message for the owner's pop: leased (never
// READING, which marks the owner's bottom pops) and freed at once.
func (d *Deque) popReturned(buf []byte) (int, uint64, error) {
	l, err := d.takeReturned(layout.SlotLeased, len(buf))
	if err != nil {
		return 0, 0, err
	}
	n := copy(buf, l.data)
	d.free(l.slot, l.lap)
	return n, l.id, nil
}

// consumedAtTop reports whether a slot word seen at position p (diff is its
// lap minus p's) says p was consumed from the top: taken by a thief or the
// owner's lease, set aside, handed back, or already freed a lap on.
func (d *Deque) consumedAtTop(sw layout.SlotWord, diff int32) bool {
	return consumedAtTopFor(sw, diff, d.ownerStamp())
}

// consumedAtTopFor is consumedAtTop with the owner's stamp given (0 for
// none).
func consumedAtTopFor(sw layout.SlotWord, diff int32, owner uint16) bool {
	if diff == 1 {
		return sw.State == layout.SlotFree || sw.State == layout.SlotWriting || sw.State == layout.SlotReady
	}
	if diff != 0 {
		return false
	}
	switch sw.State {
	case layout.SlotLeased, layout.SlotPoisoned, layout.SlotReturned:
		return true
	case layout.SlotReading:
		return sw.Owner != owner
	}
	return false
}

// stealHook, nil outside tests, runs at three places of steal's slow
// path: 1 after the slot word's first load, 2 after bottom's load, 3
// after the slot word's second load (before the owner word's load that
// judges a READING word). deque_thief_never_steps_top_past_a_rolled_back_pop_test.go
// runs other processes there, an interleaving no timing can arrange.
var stealHook func(stage int)

// steal takes the message at the top into state (reading or leased),
// stamped with this participant, and advances top. Returned messages are
// taken once [top, bottom) is empty (after the newer ones: looking for
// them first would scan every slot on every steal while the pending hint
// is too high); messages delivered DeliveryLimit times become poison.
func (d *Deque) steal(state layout.SlotState, room int) (Lease, error) {
	stale := 0
	for {
		t := d.top.Load()
		w := d.slotWord(t)
		raw := w.Load()
		// The common case, the first case of the switch below with the
		// word tested and built packed as the ring's take does (takeable).
		// Anything else goes the whole way with the same word.
		if n, ok := takeable(&d.lay.SlotGeometry, t, raw, room); ok {
			taken := takenWord(raw, state, d.tab.Self)
			if !w.CompareAndSwap(raw, taken) {
				continue
			}
			shm.CrashPoint(crashDequeStealAfterTake)
			d.top.CompareAndSwap(t, t+1)
			shm.CrashPoint(crashDequeStealAfterAdvance)
			return Lease{slot: t & d.mask, lap: d.lay.LapOf(t), data: d.payload(t, n), id: d.slotID(t), Deliveries: int(layout.SlotDeliveriesOf(taken))}, nil
		}
		lap := d.lay.LapOf(t)
		sw := layout.UnpackSlot(raw)
		diff := layout.LapDiff(sw.Lap, lap)
		// A message READY at top's own lap is published (the owner stores
		// READY before it moves bottom past it, and leaves READY at a
		// position above bottom only while a push batch publishes its
		// run, whose messages are as published as any), so it can be
		// taken without reading bottom, whose line the owner writes on
		// every push. Anything else needs bottom: is the deque empty, or
		// is top behind?
		if diff != 0 || sw.State != layout.SlotReady {
			if stealHook != nil {
				stealHook(1)
			}
			b := d.bottom.Load()
			if stealHook != nil {
				stealHook(2)
			}
			if t >= b {
				if d.pending.Load() != 0 {
					return d.takeReturned(state, room)
				}
				return Lease{}, ErrEmpty
			}
			if b-t > d.lay.Capacity {
				// Our top may be stale: others took messages and the
				// owner pushed more between the two loads. top never
				// moves back, so if it has not moved, bottom really was
				// that far ahead.
				if d.top.Load() != t {
					continue
				}
				return Lease{}, fmt.Errorf("%w: %s: top %d and bottom %d are more than a deque apart", ErrCorrupt, d.Path(), t, b)
			}
			// Read the slot again, after bottom: published by now if
			// it was when bottom moved past it.
			raw = w.Load()
			sw = layout.UnpackSlot(raw)
			diff = layout.LapDiff(sw.Lap, lap)
			if stealHook != nil {
				stealHook(3)
			}
		}
		switch {
		case diff == 0 && sw.State == layout.SlotReady:
			if err := sw.Validate(&d.lay.SlotGeometry); err != nil {
				return Lease{}, d.corrupt(t, raw, err)
			}
			if uint32(sw.Deliveries) >= d.lay.DeliveryLimit {
				d.poison(t, raw, sw)
				continue
			}
			if int(sw.Length) > room {
				return Lease{}, fmt.Errorf("%w: %s: message is %d bytes, buffer %d", ErrShortBuffer, d.Path(), sw.Length, room)
			}
			taken := layout.SlotWord{State: state, Deliveries: sw.Deliveries + 1, Owner: d.tab.Self, Length: sw.Length, Lap: lap}
			if !w.CompareAndSwap(raw, taken.Pack()) {
				continue
			}
			shm.CrashPoint(crashDequeStealAfterTake)
			d.top.CompareAndSwap(t, t+1)
			shm.CrashPoint(crashDequeStealAfterAdvance)
			return Lease{slot: t & d.mask, lap: lap, data: d.payload(t, sw.Length), id: d.slotID(t), Deliveries: int(taken.Deliveries)}, nil

		case d.consumedAtTop(sw, diff):
			if sw.State == layout.SlotReading {
				// READING judged against the owner word loaded just now:
				// a thief's take only if the slot still holds the word
				// seen, so that it held it when the owner word was
				// loaded. Otherwise it may be a dead owner's pop that a
				// repair rolled back to READY before it freed the role
				// (the owner word changed under the stale slot word),
				// and helping top past it would lose the message: found
				// by models/deque.pml (-DWITH_ADOPTER). No ABA: a
				// rolled-back message taken again has one delivery more.
				if w.Load() != raw {
					continue
				}
			}
			d.top.CompareAndSwap(t, t+1) // help top past a consumed position

		case diff == 0 && (sw.State == layout.SlotFree || sw.State == layout.SlotWriting || sw.State == layout.SlotReading):
			// The owner is popping t back (or has, and is pushing
			// again): bottom has moved or is about to. Look again; if
			// nothing moves, report empty rather than guess.
			if stale++; stale > maxStaleRetries {
				return Lease{}, ErrEmpty
			}
			spin.Pause()

		default:
			if d.top.Load() == t {
				return Lease{}, d.corrupt(t, raw, fmt.Errorf("%s slot at lap %d seen from top %d (lap %d)", sw.State, sw.Lap, t, lap))
			}
		}
	}
}

// poison sets a message that has had DeliveryLimit deliveries aside in
// its slot (reported by Scan, taken by TakePoisoned) and moves top on.
func (d *Deque) poison(t, raw uint64, sw layout.SlotWord) {
	p := sw
	p.State, p.Owner = layout.SlotPoisoned, 0
	if d.slotWord(t).CompareAndSwap(raw, p.Pack()) {
		d.poisoned.Add(1)
		d.top.CompareAndSwap(t, t+1)
	}
}

// takeReturned takes a returned message, if there is one. It scans the
// slots: it runs only when the deque is otherwise empty and the pending
// count says there is something to find.
//
// pending is an upper bound on the returned slots, never lower: a return
// counts before it marks its slot (and uncounts if the mark fails), a take
// uncounts after it took one, and nothing else writes it. So no returned
// message is ever hidden from a consumer by the count. A process killed
// between counting and marking, or between taking and uncounting, leaves
// it one too high for good: consumers that find the deque empty then scan
// the slots in vain on every try (ringctl verify reports it). A reset is
// never safe: it could race with a return counted but not yet marked.
func (d *Deque) takeReturned(state layout.SlotState, room int) (Lease, error) {
	for i := uint64(0); i < d.lay.Capacity; i++ {
		w := d.slotWord(i)
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		if sw.State != layout.SlotReturned {
			continue
		}
		if err := sw.Validate(&d.lay.SlotGeometry); err != nil {
			return Lease{}, d.corrupt(i, raw, err)
		}
		if uint32(sw.Deliveries) >= d.lay.DeliveryLimit {
			p := sw
			p.State = layout.SlotPoisoned
			if w.CompareAndSwap(raw, p.Pack()) {
				d.poisoned.Add(1)
				d.uncountReturned()
			}
			continue
		}
		if int(sw.Length) > room {
			return Lease{}, fmt.Errorf("%w: %s: message is %d bytes, buffer %d", ErrShortBuffer, d.Path(), sw.Length, room)
		}
		taken := layout.SlotWord{State: state, Deliveries: sw.Deliveries + 1, Owner: d.tab.Self, Length: sw.Length, Lap: sw.Lap}
		if !w.CompareAndSwap(raw, taken.Pack()) {
			continue
		}
		d.uncountReturned()
		return Lease{slot: i, lap: sw.Lap, data: d.payload(i, sw.Length), id: d.slotID(i), Deliveries: int(taken.Deliveries)}, nil
	}
	return Lease{}, ErrEmpty
}

// free releases a slot this handle took (reading or leased) for the
// owner's push one lap on. The owner may have burned past it meanwhile
// (its lap moved on): free from the word as it is now, never from the lap
// it was taken at, which would put an old lap inside [top, bottom).
func (d *Deque) free(slot uint64, _ uint32) {
	if d.freeSlot(slot) && d.notFullW.Load() != 0 {
		d.wakeOwner()
	}
}

// freeSlot is free without the wake check (a batch makes one for all its
// slots); it reports whether it freed the slot.
func (d *Deque) freeSlot(slot uint64) bool {
	w := d.slotWord(slot)
	for {
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		if sw.Owner != d.tab.Self || (sw.State != layout.SlotReading && sw.State != layout.SlotLeased) {
			return false // not ours any more: nothing of ours to free
		}
		if w.CompareAndSwap(raw, layout.SlotWord{Lap: (sw.Lap + 1) & layout.SlotLapMask}.Pack()) {
			return true
		}
	}
}

// uncountReturned takes one off pending, never below zero (a corrupt or
// crash-inflated count must not wrap).
func (d *Deque) uncountReturned() {
	for {
		p := d.pending.Load()
		if p == 0 || d.pending.CompareAndSwap(p, p-1) {
			return
		}
	}
}

// TryClaim leases the oldest message (from the top, whoever calls it), or
// returns ErrEmpty. See Ring.TryClaim.
func (d *Deque) TryClaim() (Lease, error) {
	if d.tab.Self == 0 {
		return Lease{}, ErrNotAttached
	}
	l, err := d.steal(layout.SlotLeased, math.MaxInt)
	switch err {
	case nil:
		d.claimed.Add(1)
	case ErrEmpty:
		d.emptyHits.Add(1)
	}
	return l, err
}

// Ack releases a lease: the message is done with and its slot is free.
func (d *Deque) Ack(l Lease) error {
	if err := d.ack(&l); err != nil {
		return err
	}
	d.acked.Add(1)
	if d.notFullW.Load() != 0 {
		d.wakeOwner()
	}
	return nil
}

// ack frees a held lease's slot, uncounted (Ack and AckBatch count).
func (d *Deque) ack(l *Lease) error {
	for {
		raw, sw, err := d.heldLease(*l)
		if err != nil {
			return err
		}
		shm.CrashPoint(crashDequeAckBeforeFree)
		// The owner may burn past the lease meanwhile (its lap moves):
		// then look again.
		if d.slotWord(l.slot).CompareAndSwap(raw, layout.SlotWord{Lap: (sw.Lap + 1) & layout.SlotLapMask}.Pack()) {
			return nil
		}
	}
}

// Release hands a lease back without processing it: the message is
// returned, to be taken again (by a consumer that finds the deque
// otherwise empty, or as the newest message once the owner's pushes reach
// its slot). Its delivery count is kept, so a message that keeps being
// released ends up as poison.
func (d *Deque) Release(l Lease) error {
	raw, sw, err := d.heldLease(l)
	if err != nil {
		return err
	}
	if !d.giveBack(l.slot, raw, sw) {
		return fmt.Errorf("%w: %s: slot %d changed under its lease", ErrLeaseLost, d.Path(), l.slot)
	}
	return nil
}

func (d *Deque) heldLease(l Lease) (uint64, layout.SlotWord, error) {
	if d.tab.Self == 0 {
		return 0, layout.SlotWord{}, ErrNotAttached
	}
	if l.data == nil || l.slot >= d.lay.Capacity {
		return 0, layout.SlotWord{}, fmt.Errorf("%w: %s: not a lease from Claim", ErrLeaseLost, d.Path())
	}
	raw := d.slotWord(l.slot).Load()
	sw := layout.UnpackSlot(raw)
	// The lap is not compared: the owner burning past a held lease moves
	// it on (see pushBottom).
	if sw.State != layout.SlotLeased || sw.Owner != d.tab.Self {
		return 0, sw, fmt.Errorf("%w: %s: slot %d is %s by participant %d", ErrLeaseLost, d.Path(), l.slot, sw.State, int(sw.Owner)-1)
	}
	if err := sw.Validate(&d.lay.SlotGeometry); err != nil {
		return 0, sw, d.corrupt(l.slot, raw, err)
	}
	return raw, sw, nil
}

// giveBack turns a taken slot (reading or leased, top side) into a
// returned one, as long as the taker the word names at first still holds
// it (the owner may burn past it meanwhile, moving its lap: then it tries
// again). The next consumer that finds the deque empty, or the owner's
// push that reaches the slot, takes it again. It reports whether it did.
func (d *Deque) giveBack(i, raw uint64, sw layout.SlotWord) bool {
	w := d.slotWord(i)
	taker := sw.Owner
	d.pending.Add(1) // count first: pending never hides a returned slot
	for {
		back := layout.SlotWord{State: layout.SlotReturned, Deliveries: sw.Deliveries, Length: sw.Length, Lap: sw.Lap}
		if w.CompareAndSwap(raw, back.Pack()) {
			break
		}
		raw = w.Load()
		sw = layout.UnpackSlot(raw)
		if sw.Owner != taker || (sw.State != layout.SlotReading && sw.State != layout.SlotLeased) || sw.Validate(&d.lay.SlotGeometry) != nil {
			d.uncountReturned()
			return false
		}
	}
	shm.CrashPoint(crashDequeReturnAfterMark)
	d.returned.Add(1)
	if d.notEmptyW.Load() != 0 {
		d.wakeThieves()
	}
	return true
}

// TakePoisoned copies one poisoned message into buf, frees its slot and
// returns its length and delivery count, or ErrEmpty if there is none.
func (d *Deque) TakePoisoned(buf []byte) (n, deliveries int, err error) {
	if d.tab.Self == 0 {
		return 0, 0, ErrNotAttached
	}
	for i := uint64(0); i < d.lay.Capacity; i++ {
		w := d.slotWord(i)
		// Look again while the slot stays poisoned: the owner may burn
		// past it (moving its lap) between the copy and the CAS.
		for {
			raw := w.Load()
			sw := layout.UnpackSlot(raw)
			if sw.State != layout.SlotPoisoned {
				break
			}
			if err := sw.Validate(&d.lay.SlotGeometry); err != nil {
				return 0, 0, d.corrupt(i, raw, err)
			}
			if int(sw.Length) > len(buf) {
				return 0, 0, fmt.Errorf("%w: %s: message is %d bytes, buffer %d", ErrShortBuffer, d.Path(), sw.Length, len(buf))
			}
			n = copy(buf, d.payload(i, sw.Length))
			if w.CompareAndSwap(raw, layout.SlotWord{Lap: (sw.Lap + 1) & layout.SlotLapMask}.Pack()) {
				d.wakeIfWaiting()
				return n, int(sw.Deliveries), nil
			}
		}
	}
	return 0, 0, ErrEmpty
}

// TakeReturned copies one returned message (handed back, or left by a dead
// consumer) into buf and frees its slot; ErrEmpty if there is none. Tools
// drain with it what no owner will re-publish.
func (d *Deque) TakeReturned(buf []byte) (int, error) {
	if d.tab.Self == 0 {
		return 0, ErrNotAttached
	}
	l, err := d.takeReturned(layout.SlotLeased, len(buf))
	if err != nil {
		return 0, err
	}
	n := copy(buf, l.data)
	d.free(l.slot, l.lap)
	return n, nil
}
