package transport

import (
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// DequeScanReport is what Deque.Scan finds. It is a value: tools print it.
type DequeScanReport struct {
	Path       string
	Counters   DequeCounters
	Peers      []check.Peer
	OwnerAlive bool                     // an owner is recorded and not proven dead
	States     map[layout.SlotState]int // slots in each state
	Slots      []SlotReport             // every slot that is not free
	Problems   int                      // slots orphaned, poisoned or corrupt, plus a dead owner
	Corrupt    int
	Fault      error // reading the file faulted (truncated or holed under the scan): the rest is empty; wraps shm.ErrFault
}

// Scan reads the whole deque and reports every slot that is orphaned,
// half-written, poisoned or corrupt, with its owner, and whether the
// deque's owner is proven dead. It changes nothing and works read-only.
//
// It runs under the file's fault guard: a file truncated or holed under
// it gives a report with only Path and Fault set instead of a crash.
func (d *Deque) Scan() DequeScanReport {
	rep, err := guarded(d.reg, "scan", func() (DequeScanReport, error) { return d.scan(), nil })
	if err != nil {
		return DequeScanReport{Path: d.Path(), Fault: err}
	}
	return rep
}

func (d *Deque) scan() DequeScanReport {
	rep := DequeScanReport{Path: d.Path(), Counters: d.Counters(), Peers: d.Peers()}
	rep.States, rep.Slots, rep.Problems, rep.Corrupt = scanSlots(&d.lay.SlotGeometry, func(i uint64) uint64 { return d.slotWord(i).Load() }, rep.Peers)
	if v := d.ownerWord.Load(); v != 0 {
		rep.OwnerAlive = d.tab.HolderAlive(v)
		if !rep.OwnerAlive {
			rep.Problems++
		}
	}
	return rep
}

// Repair recovers what dead participants left behind, on proof of death
// only (pid and start time, or an earlier boot): messages dead consumers
// were stealing or had leased are returned, delivery count kept: taken
// again after the newer messages (once [top, bottom) is empty), or
// re-published as the newest when the owner's pushes reach the slot; if
// the owner is dead its half-done push is released, its half-done pop
// rolled back, bottom set right, and the owner role freed for Adopt. Safe while live processes use the deque;
// idempotent; one repairer at a time (ErrRepairBusy).
//
// It runs under the file's fault guard (not the per-message paths): a
// file truncated or holed under it gives an error wrapping shm.ErrFault,
// and ErrTruncated or ErrSparse when the file shows which, with an empty
// report, instead of a crash.
func (d *Deque) Repair() (check.RepairReport, error) {
	rep, err := guarded(d.reg, "repair", d.repairAs)
	if rep.Path == "" {
		rep.Path = d.Path()
	}
	return rep, err
}

// repairAs repairs as this handle's entry, or, for a writable handle
// without one (OpenDequeForRepair, or an attach in progress), as the
// table's repairer entry, on a fresh view of the same mapping (so that
// this handle's own view of the table never changes under its other
// callers).
func (d *Deque) repairAs() (check.RepairReport, error) {
	if d.tab.Self != 0 {
		return d.repair()
	}
	if d.reg.ReadOnly() {
		return check.RepairReport{Path: d.Path()}, ErrNotAttached
	}
	rd, err := viewDeque(d.reg)
	if err != nil {
		return check.RepairReport{Path: d.Path()}, err
	}
	var rep check.RepairReport
	err = rd.tab.AsRepairer(func() error {
		var err error
		rep, err = rd.repair()
		return err
	})
	return rep, err
}

func (d *Deque) repair() (check.RepairReport, error) {
	rep := check.RepairReport{Path: d.Path()}
	if d.tab.Self == 0 {
		return rep, ErrNotAttached
	}
	prev, ok := d.tab.LockRepairFrom()
	if !ok {
		return rep, fmt.Errorf("%w: %s", ErrRepairBusy, d.Path())
	}
	defer d.tab.UnlockRepair()
	base := uint64(d.Header().HeaderSize)
	if prev != 0 {
		rep.Done = append(rep.Done, d.tab.LockTakeover(base, "deque.repair_lock", layout.DequeOffRepairLock, prev))
	}
	dead, reports := d.tab.MarkDead()
	rep.DeadPeers = reports

	switch v := d.ownerWord.Load(); {
	case v == 0:
		// No owner, so nobody moves bottom: set it right in case an
		// owner died with a message published but not counted, and its
		// role was freed before a repair saw it.
		d.fixBottom(0, &rep)
	case v != d.tab.MyLock() && !d.tab.HolderAlive(v):
		peers := d.Peers() // before the role is freed: as Check judged it
		d.fixBottom(layout.UnpackRole(v).Stamp, &rep)
		shm.CrashPoint(crashDequeRepairAfterFixBottom)
		if d.ownerWord.CompareAndSwap(v, 0) {
			rep.Done = append(rep.Done, d.ownerFinding(base, v, peers))
		}
	}
	pending := d.pending.Load()
	marked := uint64(0)
	var peers []check.Peer
	top := d.top.Load()
	for i := uint64(0); i < d.lay.Capacity; i++ {
		raw := d.slotWord(i).Load()
		sw := layout.UnpackSlot(raw)
		if err := sw.Validate(&d.lay.SlotGeometry); err != nil {
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
				if peers == nil {
					peers = d.Peers()
				}
				rep.Done = append(rep.Done, d.slotDone(base, i, raw, peers, top, check.ActionReturn))
			}
		case layout.SlotWriting:
			// Only the owner writes, from bottom on, and fixBottom
			// released that; one anywhere else no operation writes.
			rep.Corrupt++
		}
	}
	// Returns count before they mark, so the count is never below the
	// marked slots unless the word was damaged. Raise it then, but only
	// when no other participant is alive: a scan that runs alongside
	// takes and returns can count one message twice (taken after the scan
	// passed it, its count given back by a return the scan reaches later),
	// and a CAS from the value read before the scan does not see that.
	if marked > pending && d.aloneAlive() && d.pending.CompareAndSwap(pending, marked) {
		rep.Done = append(rep.Done, check.Finding{Problem: check.ProblemPendingHint, Location: "deque.pending", Offset: base + layout.DequeOffPending,
			Raw: pending, Owner: -1, Action: check.ActionRaiseHint,
			Detail: fmt.Sprintf("hint %d was below the %d returned slots: raised to %d", pending, marked, marked)})
	}
	rep.Done = append(rep.Done, d.tab.FreedFindings(base, d.tab.FreeDead(dead, make([]bool, len(dead))), reports)...)
	if rep.Changed() {
		d.repairs.Add(1)
		d.wakeThieves()
		d.wakeOwner()
	}
	return rep, nil
}

// slotDone is a repair's finding for the action a it took on slot i,
// whose word was raw, worded as Check words it.
func (d *Deque) slotDone(base, i, raw uint64, peers []check.Peer, top uint64, a check.Action) check.Finding {
	sr := classifySlot(&d.lay.SlotGeometry, i, raw, peers)
	f := slotTemplate(&d.lay.SlotGeometry, base, sr, peers, top)
	f.Problem, f.Action = dequeProblem(sr, a), a
	if f.Problem == "" { // an owner judged dead when marked, not now
		f.Problem = check.ProblemOrphanedRead
		if sr.Word.State == layout.SlotLeased {
			f.Problem = check.ProblemOrphanedLease
		}
	}
	var p check.Peer
	if sr.Owner >= 0 && sr.Owner < len(peers) {
		p = peers[sr.Owner]
	}
	f.Detail = dequeSlotDetail(sr, f.Position, p, a)
	return f
}

// fixBottom finishes or undoes what a dead owner (stamp) was doing at the
// bottom, and sets bottom right. It runs under the repair lock, with the
// owner proven dead or absent, so nobody else moves bottom meanwhile:
//
//   - a half-written slot at bottom is released (the push never returned),
//     and so is each of a push batch's claims that follow it;
//   - the owner's pop in progress is rolled back: the message is READY
//     again at its position and bottom moves past it;
//   - a message published at bottom but not yet counted (killed between
//     the READY word and the bottom store, or after announcing a pop) is
//     counted in;
//   - a position a thief took while the owner was popping it is passed.
//
// Each of the first three is added to rep (when not nil) as a finding.
func (d *Deque) fixBottom(stamp uint16, rep *check.RepairReport) {
	b := d.bottom.Load()
	top := d.top.Load()
	if b < top {
		b = top
	}
	var peers []check.Peer
	done := func(pos, raw uint64, a check.Action) {
		if rep == nil {
			return
		}
		if peers == nil {
			peers = d.Peers()
		}
		rep.Done = append(rep.Done, d.slotDone(uint64(d.Header().HeaderSize), pos&d.mask, raw, peers, top, a))
	}
	for range d.lay.Capacity {
		lap := d.lay.LapOf(b)
		w := d.slotWord(b)
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		if sw.Validate(&d.lay.SlotGeometry) != nil {
			break
		}
		diff := layout.LapDiff(sw.Lap, lap)
		if diff == 0 && sw.State == layout.SlotWriting && sw.Owner == stamp && stamp != 0 {
			// The dead owner's push: a single push's claim at bottom, or
			// a push batch's run of claims from bottom on, each WRITING
			// at its own lap (the run's first messages, published, were
			// counted in above). Each is released, the last first, and
			// bottom stays before the first: a repair that dies part
			// way leaves what it did not release still a run of claims
			// from bottom, which the next repair finds here. (Released
			// first to last, a death after the first left the others
			// WRITING behind a free slot at bottom, where no repair
			// looks: found by models/deque.pml with two deaths.)
			end := b + 1
			for end < b+d.lay.Capacity && d.ownersClaim(end, d.slotWord(end).Load(), stamp) {
				end++
			}
			for q := end - 1; ; q-- {
				wq := d.slotWord(q)
				rq := wq.Load()
				if !d.ownersClaim(q, rq, stamp) || !wq.CompareAndSwap(rq, layout.SlotWord{Lap: d.lay.LapOf(q)}.Pack()) {
					break
				}
				d.abandoned.Add(1)
				done(q, rq, check.ActionRelease)
				if q == b {
					break
				}
				shm.CrashPoint(crashDequeRepairMidRelease)
			}
			break
		}
		if diff == 0 && sw.State == layout.SlotReading && sw.Owner == stamp && stamp != 0 {
			back := layout.SlotWord{State: layout.SlotReady, Deliveries: sw.Deliveries, Length: sw.Length, Lap: lap}
			if !w.CompareAndSwap(raw, back.Pack()) {
				break
			}
			d.rolledBack.Add(1)
			done(b, raw, check.ActionRollBack)
			b++
			continue
		}
		if diff == 0 && sw.State == layout.SlotReady {
			done(b, raw, check.ActionCountIn)
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

// ownersClaim reports whether raw, position p's slot word, is a claim of
// the owner with stamp: valid, WRITING, named by it, at p's own lap.
func (d *Deque) ownersClaim(p, raw uint64, stamp uint16) bool {
	sq := layout.UnpackSlot(raw)
	return sq.Validate(&d.lay.SlotGeometry) == nil && sq.State == layout.SlotWriting && sq.Owner == stamp && sq.Lap == d.lay.LapOf(p)
}

// Adopt makes this handle the deque's owner: when the deque has none (its
// owner closed it) or its owner is proven dead, in which case what that
// owner left half done at the bottom is repaired first. A live owner keeps
// the role (ErrOwnerAlive).
//
// Like Repair, it runs under the file's fault guard.
func (d *Deque) Adopt() (check.RepairReport, error) {
	rep, err := guarded(d.reg, "adopt", d.adopt)
	if rep.Path == "" {
		rep.Path = d.Path()
	}
	return rep, err
}

func (d *Deque) adopt() (check.RepairReport, error) {
	rep := check.RepairReport{Path: d.Path()}
	if d.tab.Self == 0 {
		return rep, ErrNotAttached
	}
	if d.owner.Load() {
		return rep, nil
	}
	prev, ok := d.tab.LockRepairFrom()
	if !ok {
		return rep, fmt.Errorf("%w: %s", ErrRepairBusy, d.Path())
	}
	defer d.tab.UnlockRepair()
	base := uint64(d.Header().HeaderSize)
	if prev != 0 {
		rep.Done = append(rep.Done, d.tab.LockTakeover(base, "deque.repair_lock", layout.DequeOffRepairLock, prev))
	}
	v := d.ownerWord.Load()
	if v != 0 && d.tab.HolderAlive(v) {
		return rep, fmt.Errorf("%w: %s: participant %d", ErrOwnerAlive, d.Path(), layout.UnpackRole(v).Index())
	}
	var peers []check.Peer
	if v != 0 {
		peers = d.Peers()
	}
	d.fixBottom(layout.UnpackRole(v).Stamp, &rep)
	shm.CrashPoint(crashDequeAdoptAfterFixBottom)
	if !d.ownerWord.CompareAndSwap(v, d.tab.MyLock()) {
		return rep, fmt.Errorf("%w: %s: the owner word changed", ErrOwnerAlive, d.Path())
	}
	if v != 0 {
		rep.Done = append(rep.Done, d.ownerFinding(base, v, peers))
	}
	d.owner.Store(true)
	d.adopted.Add(1)
	d.wakeIfWaiting()
	return rep, nil
}

// Disown gives the owner role up without closing the handle: the deque's
// messages stay for thieves and for the next owner (Adopt). The handle
// remains a thief.
func (d *Deque) Disown() error {
	if d.tab.Self == 0 {
		return ErrNotAttached
	}
	d.ownerMu.Lock()
	defer d.ownerMu.Unlock()
	if !d.owner.Load() {
		return fmt.Errorf("%w: %s", ErrNotOwner, d.Path())
	}
	d.ownerWord.CompareAndSwap(d.tab.MyLock(), 0)
	d.owner.Store(false)
	return nil
}

// aloneAlive reports whether every participant entry but ours is free or
// proven dead: nobody else can be taking or returning messages.
func (d *Deque) aloneAlive() bool { return othersAlive(d.Peers()) < 0 }
