package transport

import (
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// DequeScanReport is what Deque.Scan finds. It is a value: tools print it.
type DequeScanReport struct {
	Path       string
	Counters   DequeCounters
	Peers      []PeerStatus
	OwnerAlive bool                     // an owner is recorded and not proven dead
	States     map[layout.SlotState]int // slots in each state
	Slots      []SlotReport             // every slot that is not free
	Problems   int                      // slots orphaned, poisoned or corrupt, plus a dead owner
	Corrupt    int
}

// Scan reads the whole deque and reports every slot that is orphaned,
// half-written, poisoned or corrupt, with its owner, and whether the
// deque's owner is proven dead. It changes nothing and works read-only.
func (d *Deque) Scan() DequeScanReport {
	rep := DequeScanReport{Path: d.Path(), Counters: d.Counters(), Peers: d.Peers()}
	rep.States, rep.Slots, rep.Problems, rep.Corrupt = scanSlots(&d.lay, func(i uint64) uint64 { return d.slotWord(i).Load() }, rep.Peers)
	if v := d.ownerWord.Load(); v != 0 {
		rep.OwnerAlive = d.holderAlive(v)
		if !rep.OwnerAlive {
			rep.Problems++
		}
	}
	return rep
}

// Repair recovers what dead participants left behind, on proof of death
// only (pid and start time, or an earlier boot): messages dead consumers
// were stealing or had leased are returned (taken again before newer ones,
// delivery count kept); if the owner is dead its half-done push is
// released, its half-done pop rolled back, bottom set right, and the owner
// role freed for Adopt. Safe while live processes use the deque;
// idempotent; one repairer at a time (ErrRepairBusy).
func (d *Deque) Repair() (RepairReport, error) {
	var rep RepairReport
	if d.self == 0 {
		return rep, ErrNotAttached
	}
	if !d.lockRepair() {
		return rep, fmt.Errorf("%w: %s", ErrRepairBusy, d.Path())
	}
	defer d.unlockRepair()
	dead, reports := d.markDead()
	rep.DeadPeers = reports

	switch v := d.ownerWord.Load(); {
	case v == 0:
		// No owner, so nobody moves bottom: set it right in case an
		// owner died with a message published but not counted, and its
		// role was freed before a repair saw it.
		d.fixBottom(0, &rep)
	case v != d.myLock() && !d.holderAlive(v):
		d.fixBottom(layout.UnpackRole(v).Stamp, &rep)
		shm.CrashPoint("deque.repair.after-fix-bottom")
		if d.ownerWord.CompareAndSwap(v, 0) {
			rep.OwnerDied = true
		}
	}
	pending := d.pending.Load()
	marked := uint64(0)
	for i := uint64(0); i < d.lay.Capacity; i++ {
		raw := d.slotWord(i).Load()
		sw := layout.UnpackSlot(raw)
		if err := sw.Validate(&d.lay); err != nil {
			rep.Corrupt++
			continue
		}
		if sw.State == layout.SlotReturned {
			marked++
		}
		if sw.Owner == 0 || !dead[sw.Owner-1] {
			continue
		}
		switch sw.State {
		case layout.SlotReading, layout.SlotLeased:
			if d.giveBack(i, raw, sw) {
				rep.Requeued++
			}
		case layout.SlotWriting:
			// Only the owner writes, at bottom, and fixBottom released
			// that; one anywhere else no operation writes.
			rep.Corrupt++
		}
	}
	// Returns count before they mark, so the count is never below the
	// marked slots unless the word was damaged. Raise it then, but only
	// when no other participant is alive: a scan that runs alongside
	// takes and returns can count one message twice (taken after the scan
	// passed it, its count given back by a return the scan reaches later),
	// and a CAS from the value read before the scan does not see that.
	if marked > pending && d.aloneAlive() {
		d.pending.CompareAndSwap(pending, marked)
	}
	d.freeDead(dead, make([]bool, len(dead)))
	if rep.Changed() {
		d.repairs.Add(1)
		d.wakeThieves()
		d.wakeOwner()
	}
	return rep, nil
}

// fixBottom finishes or undoes what a dead owner (stamp) was doing at the
// bottom, and sets bottom right. It runs under the repair lock, with the
// owner proven dead or absent, so nobody else moves bottom meanwhile:
//
//   - a half-written slot at bottom is released (the push never returned);
//   - the owner's pop in progress is rolled back: the message is READY
//     again at its position and bottom moves past it;
//   - a message published at bottom but not yet counted (killed between
//     the READY word and the bottom store, or after announcing a pop) is
//     counted in;
//   - a position a thief took while the owner was popping it is passed.
func (d *Deque) fixBottom(stamp uint16, rep *RepairReport) {
	b := d.bottom.Load()
	if t := d.top.Load(); b < t {
		b = t
	}
	for range d.lay.Capacity {
		lap := d.lay.LapOf(b)
		w := d.slotWord(b)
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		if sw.Validate(&d.lay) != nil {
			break
		}
		diff := layout.LapDiff(sw.Lap, lap)
		if diff == 0 && sw.State == layout.SlotWriting && sw.Owner == stamp && stamp != 0 {
			if w.CompareAndSwap(raw, layout.SlotWord{Lap: lap}.Pack()) {
				d.abandoned.Add(1)
				rep.Abandoned++
			}
			break
		}
		if diff == 0 && sw.State == layout.SlotReading && sw.Owner == stamp && stamp != 0 {
			back := layout.SlotWord{State: layout.SlotReady, Deliveries: sw.Deliveries, Length: sw.Length, Lap: lap}
			if !w.CompareAndSwap(raw, back.Pack()) {
				break
			}
			d.rolledBack.Add(1)
			rep.RequeuedInPlace++
			b++
			continue
		}
		if diff == 0 && sw.State == layout.SlotReady {
			rep.Published++
			b++
			continue
		}
		if d.consumedAtTop(sw, diff) {
			b++
			continue
		}
		break
	}
	d.bottom.Store(b)
}

// Adopt makes this handle the deque's owner: when the deque has none (its
// owner closed it) or its owner is proven dead, in which case what that
// owner left half done at the bottom is repaired first. A live owner keeps
// the role (ErrOwnerAlive).
func (d *Deque) Adopt() (RepairReport, error) {
	var rep RepairReport
	if d.self == 0 {
		return rep, ErrNotAttached
	}
	if d.owner.Load() {
		return rep, nil
	}
	if !d.lockRepair() {
		return rep, fmt.Errorf("%w: %s", ErrRepairBusy, d.Path())
	}
	defer d.unlockRepair()
	v := d.ownerWord.Load()
	if v != 0 && d.holderAlive(v) {
		return rep, fmt.Errorf("%w: %s: participant %d", ErrOwnerAlive, d.Path(), layout.UnpackRole(v).Index())
	}
	d.fixBottom(layout.UnpackRole(v).Stamp, &rep)
	shm.CrashPoint("deque.adopt.after-fix-bottom")
	if !d.ownerWord.CompareAndSwap(v, d.myLock()) {
		return rep, fmt.Errorf("%w: %s: the owner word changed", ErrOwnerAlive, d.Path())
	}
	rep.OwnerDied = v != 0
	d.owner.Store(true)
	d.adopted.Add(1)
	d.wakeIfWaiting()
	return rep, nil
}

// Disown gives the owner role up without closing the handle: the deque's
// messages stay for thieves and for the next owner (Adopt). The handle
// remains a thief.
func (d *Deque) Disown() error {
	if d.self == 0 {
		return ErrNotAttached
	}
	d.ownerMu.Lock()
	defer d.ownerMu.Unlock()
	if !d.owner.Load() {
		return fmt.Errorf("%w: %s", ErrNotOwner, d.Path())
	}
	d.ownerWord.CompareAndSwap(d.myLock(), 0)
	d.owner.Store(false)
	return nil
}

// aloneAlive reports whether every participant entry but ours is free or
// proven dead: nobody else can be taking or returning messages.
func (d *Deque) aloneAlive() bool {
	for _, p := range d.Peers() {
		if !p.Self && p.State != "free" && !p.Dead {
			return false
		}
	}
	return true
}
