package transport

import (
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// ScanReport is what Scan finds. It is a value: tools print it.
type ScanReport struct {
	Path     string
	Counters Counters
	Peers    []check.Peer
	States   map[layout.SlotState]int // slots in each state
	Slots    []SlotReport             // every slot that is not free
	Problems int                      // slots that are orphaned, poisoned or corrupt
	Corrupt  int
	Fault    error // reading the file faulted (truncated or holed under the scan): the rest is empty; wraps shm.ErrFault
}

// Scan reads the whole ring and reports every slot that is orphaned,
// half-written, poisoned or corrupt, with its owner. It changes nothing
// and works on read-only rings; values read from the mapping are
// validated, never trusted.
//
// It runs under the file's fault guard: a file truncated or holed under
// it gives a report with only Path and Fault set instead of a crash.
func (r *Ring) Scan() ScanReport {
	rep, err := guarded(r.reg, "scan", func() (ScanReport, error) { return r.scan(), nil })
	if err != nil {
		return ScanReport{Path: r.Path(), Fault: err}
	}
	return rep
}

func (r *Ring) scan() ScanReport {
	rep := ScanReport{Path: r.Path(), Counters: r.Counters(), Peers: r.Peers()}
	rep.States, rep.Slots, rep.Problems, rep.Corrupt = scanSlots(&r.lay.SlotGeometry, func(i uint64) uint64 { return r.slotWord(i).Load() }, rep.Peers)
	return rep
}

// Repair recovers what dead participants left behind: half-written slots
// are released, messages they were popping or had leased are delivered
// again (at-least-once, delivery count kept), and their table entries are
// freed. It acts only on proof of death (pid and start time, or an earlier
// boot), never on a timeout, so it is safe while live processes keep using
// the ring; every change is a CAS from the exact word that names the dead
// owner. It is idempotent. One repairer runs at a time (ErrRepairBusy
// otherwise); a repairer that died holding that role is itself replaced
// on proof of death. The report lists every action taken, as findings
// like Check's (PlanRepair says beforehand what they will be).
//
// It runs under the file's fault guard (not the per-message paths): a
// file truncated or holed under it gives an error wrapping shm.ErrFault,
// and ErrTruncated or ErrSparse when the file shows which, with an empty
// report, instead of a crash.
func (r *Ring) Repair() (check.RepairReport, error) {
	rep, err := guarded(r.reg, "repair", func() (check.RepairReport, error) { return r.repairAs(false) })
	if rep.Path == "" {
		rep.Path = r.Path()
	}
	return rep, err
}

// repairAs repairs as this handle's entry, or, for a writable handle
// without one (OpenRingForRepair, or an attach in progress), as the
// table's repairer entry, on a copy of the handle (so that the handle's
// own view of the table never changes under its other callers). park
// parks the leases of dead entries that cannot be requeued for want of
// room on the repairer entry, so that those entries can be freed: only an
// attach that needs an entry does that.
func (r *Ring) repairAs(park bool) (check.RepairReport, error) {
	if r.tab.Self != 0 {
		return r.repair(false)
	}
	if r.reg.ReadOnly() {
		return check.RepairReport{Path: r.Path()}, ErrNotAttached
	}
	rr := *r
	var rep check.RepairReport
	err := rr.tab.AsRepairer(func() error {
		var err error
		rep, err = rr.repair(park)
		return err
	})
	// Left marked dead (leases parked on it, or a repair that failed
	// after taking it over): raise the hint that makes consumers retry a
	// repair, now that the entry is dead. Raised inside the repair, it
	// could be cleared by a consumer's repair that judged the entry alive
	// (we held it) and skipped what is parked there.
	if rr.tab.RepairerDead() {
		r.deferred.Add(1)
	}
	return rep, err
}

func (r *Ring) repair(park bool) (check.RepairReport, error) {
	rep := check.RepairReport{Path: r.Path()}
	if r.tab.Self == 0 {
		return rep, ErrNotAttached
	}
	if h := r.repairHook; h != nil {
		h()
	}
	prev, ok := r.tab.LockRepairFrom()
	if !ok {
		return rep, fmt.Errorf("%w: %s", ErrRepairBusy, r.Path())
	}
	defer r.tab.UnlockRepair()
	base := uint64(r.Header().HeaderSize)
	if prev != 0 {
		rep.Done = append(rep.Done, r.tab.LockTakeover(base, "ring.repair_lock", layout.RingOffRepairLock, prev))
	}
	// Consumers retry a repair while this is non-zero. Clear it now: a
	// detach that defers leases after this point sets it again.
	r.deferred.Store(0)

	// 1. Prove deaths. An entry marked dead stays dead until its slots are
	// repaired, so an interrupted repair is finished by the next one.
	dead, reports := r.tab.MarkDead()
	rep.DeadPeers = reports
	anyDead := len(reports) > 0
	var peers []check.Peer
	if anyDead {
		peers = r.Peers()
		// The repairer entry taken over from a dead holder reads as this
		// handle: what that holder left in it is blamed on it (MarkDead's
		// report), not on us.
		for _, p := range reports {
			if p.Index < len(peers) && peers[p.Index].Self {
				peers[p.Index] = p
			}
		}
	}
	// 2. Repair every slot a dead participant owns. A message that found
	// no room may find it after others were re-published in place (each
	// moves the tail on), so passes repeat while they make progress.
	keep := make([]bool, r.tab.Len()) // entries with deferred slots
	parkOn := uint16(0)               // the repairer entry's stamp, when parking
	parked := false                   // a slot was parked on it (by any pass)
	if park && r.tab.IsRepairer() {
		parkOn = r.tab.Self
	}
	var deferred []check.Finding // this pass's deferrals
	for pass := 0; anyDead; pass++ {
		progress := false
		deferred = deferred[:0]
		clear(keep)
		head := r.head.Load()
		for i := uint64(0); i < r.lay.Capacity; i++ {
			raw := r.slotWord(i).Load()
			sw := layout.UnpackSlot(raw)
			if err := sw.Validate(&r.lay.SlotGeometry); err != nil {
				if pass == 0 {
					rep.Corrupt++
				}
				continue
			}
			if sw.Owner == 0 || !dead[sw.Owner-1] {
				continue
			}
			what, err := r.recoverSlot(i, raw, sw)
			if err != nil {
				rep.Done = append(rep.Done, deferred...)
				return rep, err
			}
			act := check.ActionNone
			switch what {
			case recoveredAbandoned:
				act, progress = check.ActionRelease, true
			case recoveredRequeued:
				act, progress = check.ActionRequeue, true
			case recoveredInPlace:
				act, progress = check.ActionRequeueInPlace, true
			case recoveredDeferred:
				act = check.ActionDefer
				keep[sw.Owner-1] = true
				if parkOn != 0 && r.park(i, sw.Owner, parkOn) {
					keep[sw.Owner-1], parked = false, true
				}
			}
			if act == check.ActionNone {
				continue
			}
			f := r.slotDone(base, i, raw, peers, head, act)
			if act == check.ActionDefer {
				deferred = append(deferred, f)
			} else {
				rep.Done = append(rep.Done, f)
			}
		}
		if len(deferred) == 0 || !progress || uint64(pass) >= r.lay.Capacity {
			break
		}
	}
	rep.Done = append(rep.Done, deferred...)
	// Consumers that find the ring empty retry a repair while this is
	// non-zero: the deferred messages are requeued once there is room.
	if len(deferred) > 0 {
		r.deferred.Add(uint64(len(deferred)))
	}
	// 3. Free the entries no slot refers to any more. The repairer entry
	// keeps what was parked on it.
	if parked {
		keep[parkOn-1] = true
	}
	rep.Done = append(rep.Done, r.tab.FreedFindings(base, r.tab.FreeDead(dead, keep), reports)...)
	if rep.Changed() {
		r.repairs.Add(1)
	}
	// Wake sleepers only when a slot or an entry changed. A repair that
	// only re-defers the leases of entries already marked dead gives no
	// sleeper anything; and a consumer whose own inline repair (when it
	// finds the ring empty with leases deferred) woke it would spin,
	// repairing again at once, thousands of times a second.
	for _, f := range rep.Done {
		if f.Action != check.ActionDefer {
			r.wakeConsumers()
			r.wakeProducers()
			break
		}
	}
	return rep, nil
}

// park moves the lease or read of dead owner in slot i to the repairer
// entry (stamp to), changing nothing else in the word, so that the dead
// owner's entry can be freed; the repairer entry, left marked dead, is
// finished by a later repair once there is room. false when the slot no
// longer names owner (another repair got it).
func (r *Ring) park(i uint64, owner, to uint16) bool {
	raw, sw, ok := r.stillHeld(i, owner)
	for ok {
		moved := sw
		moved.Owner = to
		if r.slotWord(i).CompareAndSwap(raw, moved.Pack()) {
			return true
		}
		raw, sw, ok = r.stillHeld(i, owner) // producers burned past it: its lap moved
	}
	return false
}

// slotDone is a repair's finding for the action a it took on slot i,
// whose word was raw, worded as Check words it.
func (r *Ring) slotDone(base, i, raw uint64, peers []check.Peer, head uint64, a check.Action) check.Finding {
	sr := classifySlot(&r.lay.SlotGeometry, i, raw, peers)
	f := slotTemplate(&r.lay.SlotGeometry, base, sr, peers, head)
	f.Problem, f.Action = slotProblem(sr.Problem), a
	if f.Problem == "" { // an owner judged dead when marked, not now
		f.Problem = check.ProblemOrphanedRead
		switch sr.Word.State {
		case layout.SlotWriting:
			f.Problem = check.ProblemOrphanedWrite
		case layout.SlotLeased:
			f.Problem = check.ProblemOrphanedLease
		}
	}
	var p check.Peer
	if sr.Owner >= 0 && sr.Owner < len(peers) {
		p = peers[sr.Owner]
	}
	f.Detail = ringSlotDetail(sr, f.Position, p, a, "")
	return f
}

type recovered int

const (
	recoveredNothing   recovered = iota // the slot changed meanwhile: not ours to fix
	recoveredAbandoned                  // half-written slot released
	recoveredRequeued                   // message pushed again at the tail
	recoveredInPlace                    // message re-published in its own slot
	recoveredDeferred                   // no room to requeue now: left for a later repair
)

// recoverSlot undoes what an owner that will never finish left in slot i,
// whose word was raw. Its callers guarantee the owner is dead (Repair) or
// is this very handle (Release, Close). Each step is a CAS from a word
// naming that owner, so a slot that changed meanwhile is left alone; a CAS
// that fails because producers burned past the lease (the word still names
// the owner, one lap on) is retried from the new word, so recoveredNothing
// means the slot no longer names the owner: never that the message was
// left where nobody will deliver it.
func (r *Ring) recoverSlot(i, raw uint64, sw layout.SlotWord) (recovered, error) {
	owner := sw.Owner
	for {
		if sw.State != layout.SlotReading && sw.State != layout.SlotLeased {
			return r.recoverWithoutPush(i, raw, sw), nil
		}
		// Deliver it again: a copy at the tail is seen soon. Without room,
		// the message is re-published in place only where that is
		// immediately deliverable, and deferred otherwise.
		// The copy keeps the message id (0 in a ring without ids): a
		// redelivered message is the same message.
		err := r.push(r.payload(i, sw.Length), sw.Deliveries, r.leaseID(i))
		if err == ErrFull {
			// The failed push may have burned past this very lease (its
			// lap moved on with the tail): judge the slot as it is now,
			// or a re-publish in place that the tail now allows would be
			// deferred, and a consumer's repair after a consumer's take
			// (the head caught up with the tail) would defer it forever.
			var ok bool
			if raw, sw, ok = r.stillHeld(i, owner); !ok {
				return recoveredNothing, nil
			}
			what, lost := r.recoverInPlace(i, raw, sw)
			if !lost {
				return what, nil
			}
			// Producers burned past the lease between our look at the
			// tail and the CAS (a pop made room for them): there may be
			// room for a copy now, or the tail is at the slot again.
			if raw, sw, ok = r.stillHeld(i, owner); !ok {
				return recoveredNothing, nil
			}
			continue
		}
		if err != nil {
			return recoveredNothing, err
		}
		shm.CrashPoint(crashRingRepairAfterRequeue)
		w := r.slotWord(i)
		for {
			if w.CompareAndSwap(raw, layout.SlotWord{Lap: (sw.Lap + 1) & layout.SlotLapMask}.Pack()) {
				r.requeued.Add(1)
				return recoveredRequeued, nil
			}
			// Producers may have burned past the lease meanwhile (its lap
			// moved); anything else means the slot is no longer ours to fix.
			var ok bool
			if raw, sw, ok = r.stillHeld(i, owner); !ok {
				return recoveredNothing, nil
			}
		}
	}
}

// stillHeld re-reads slot i after a failed CAS: ok while its word still
// names owner as reading or leasing a valid message (producers burning
// past a lease move only its lap).
func (r *Ring) stillHeld(i uint64, owner uint16) (uint64, layout.SlotWord, bool) {
	raw := r.slotWord(i).Load()
	sw := layout.UnpackSlot(raw)
	ok := sw.Owner == owner && (sw.State == layout.SlotReading || sw.State == layout.SlotLeased) &&
		sw.Validate(&r.lay.SlotGeometry) == nil
	return raw, sw, ok
}

// recoverWithoutPush recovers a slot without taking a new position, which
// needs no owner stamp and no room:
//
//   - a half-written slot is released (its lap moves on; producers and
//     consumers step past the position);
//   - a message being read or leased is re-published in its own slot one
//     lap on, but only when the tail is exactly at that position (the slot
//     is what producers reach next): then it is the very next message;
//   - anything else is deferred: re-publishing a message at a position the
//     tail has not reached would hide it until the ring wraps.
//
// A re-publish that loses its CAS to producers burning past the lease
// looks again at the new word (then usually defers: the tail has moved on).
func (r *Ring) recoverWithoutPush(i, raw uint64, sw layout.SlotWord) recovered {
	switch sw.State {
	case layout.SlotWriting:
		// Nobody but the (dead) writer changes a WRITING word: a failed
		// CAS means another repair released it first.
		if r.slotWord(i).CompareAndSwap(raw, layout.SlotWord{Lap: (sw.Lap + 1) & layout.SlotLapMask}.Pack()) {
			r.abandoned.Add(1)
			r.wakeIfWaiting()
			return recoveredAbandoned
		}
		return recoveredNothing
	case layout.SlotReading, layout.SlotLeased:
		owner := sw.Owner
		for {
			what, lost := r.recoverInPlace(i, raw, sw)
			if !lost {
				return what
			}
			var ok bool
			if raw, sw, ok = r.stillHeld(i, owner); !ok {
				return recoveredNothing
			}
		}
	}
	return recoveredNothing
}

// recoverInPlace re-publishes the message being read or leased in slot i
// (word raw) as READY one lap on when the tail is exactly at that
// position, and defers it otherwise. lost reports a CAS that failed: the
// word changed between the look at the tail and the CAS. The tail cannot
// pass a reading slot, but producers pass a leased one by burning it
// (moving its lap) once consumers have made room, and that can happen in
// that window; the caller then re-reads the word and tries again, or the
// message would stay leased by an owner nobody recovers for.
func (r *Ring) recoverInPlace(i, raw uint64, sw layout.SlotWord) (what recovered, lost bool) {
	next := (sw.Lap + 1) & layout.SlotLapMask
	t := r.tail.Load()
	if t&r.mask != i || r.lay.LapOf(t) != next {
		return recoveredDeferred, false
	}
	if h := r.inPlaceHook; h != nil {
		h(i)
	}
	ready := layout.SlotWord{State: layout.SlotReady, Deliveries: sw.Deliveries, Length: sw.Length, Lap: next}
	if !r.slotWord(i).CompareAndSwap(raw, ready.Pack()) {
		return recoveredNothing, true
	}
	r.tail.CompareAndSwap(t, t+1) // position t is taken now
	r.requeued.Add(1)
	r.wakeIfWaiting()
	return recoveredInPlace, false
}
