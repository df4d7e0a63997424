package transport

import (
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// Check reads the whole deque and reports every problem it finds: reserved
// header bytes, top and bottom, every slot word (state, length, owner,
// deliveries, lap), owners proven dead, poison, slots written by a
// participant that is not the owner, the owner word, the pending hint, the
// participant entries and the repair lock, each with the action a repair
// would take now. It changes nothing and works on read-only handles; each
// shared word is read once, validated, then used.
//
// It runs under the file's fault guard: a file truncated or holed under
// it gives a report whose Fault is set (and which is not Clean) instead of
// a crash.
func (d *Deque) Check() check.Report {
	rep, err := guarded(d.reg, "check", func() (check.Report, error) { return confirmed(d.check), nil })
	if err != nil {
		h := d.Header()
		return check.Report{Path: d.Path(), Kind: h.Kind, Units: d.lay.Capacity, Participants: d.lay.Participants, Fault: err}
	}
	return rep
}

func (d *Deque) check() check.Report {
	h := d.Header()
	base := uint64(h.HeaderSize)
	rep := check.Report{Path: d.Path(), Kind: h.Kind, Units: d.lay.Capacity, Participants: d.lay.Participants}
	fs := &findings{}
	checkReserved(fs, h, d.reg.Bytes()[:layout.HeaderSize])
	top, bottom := d.top.Load(), d.bottom.Load()
	switch {
	case bottom > top+d.lay.Capacity:
		fs.addf(check.ProblemTopBottom, "deque.bottom", base+layout.DequeOffBottom, check.ActionNone, "bottom %d is more than a deque (%d slots) above top %d", bottom, d.lay.Capacity, top)
	case top > bottom+d.lay.Capacity:
		// Thieves take published messages above bottom while the owner
		// is inside a batch (a pop batch announces bottom below its run,
		// a push batch publishes its run before it moves bottom), so
		// top passes bottom by at most a batch's run, never a deque.
		fs.addf(check.ProblemTopBottom, "deque.top", base+layout.DequeOffTop, check.ActionNone, "top %d is more than a deque (%d slots) above bottom %d", top, d.lay.Capacity, bottom)
	}
	v := d.ownerWord.Load()
	peers := d.Peers()
	words := make([]uint64, d.lay.Capacity)
	for i := range words {
		words[i] = d.slotWord(uint64(i)).Load()
	}
	pending := d.pending.Load()

	ownerStamp := uint16(0) // the owner word's stamp when it is valid
	if layout.ValidateRole(v, d.lay.Entries) == nil {
		ownerStamp = layout.UnpackRole(v).Stamp
	}
	// What Repair decides: a dead or vanished owner's bottom is set right
	// and its role freed; with no owner, bottom is set right.
	ownerGone := v != 0 && v != d.tab.MyLock() && !d.tab.HolderAlive(v)
	var walk map[uint64]check.Action
	if v == 0 || ownerGone {
		walk = d.planBottom(words, top, bottom, layout.UnpackRole(v).Stamp, ownerStamp)
	}
	returns, returned := 0, uint64(0)
	held := make([]int, d.lay.Entries)
	checkSlots(fs, &d.lay.SlotGeometry, "top", base, words, peers, top, bottom, func(sr SlotReport, pos uint64) []check.Finding {
		var out []check.Finding
		var p check.Peer
		if sr.Owner >= 0 && sr.Owner < len(peers) {
			p = peers[sr.Owner]
		}
		if a, ok := walk[sr.Index]; ok {
			out = append(out, check.Finding{Problem: dequeProblem(sr, a), Action: a, Detail: dequeSlotDetail(sr, pos, p, a)})
			if sr.Owner >= 0 && sr.Owner < len(held) {
				held[sr.Owner]++
			}
		} else if orphaned(sr.Problem) {
			a := check.ActionReturn
			if sr.Problem == SlotOrphanedWrite {
				a = check.ActionNone
			} else {
				returns++
				held[sr.Owner]++
			}
			out = append(out, check.Finding{Problem: slotProblem(sr.Problem), Action: a, Detail: dequeSlotDetail(sr, pos, p, a)})
		}
		if sr.Problem == SlotCorrupt {
			return out
		}
		switch {
		case sr.Word.State == layout.SlotReturned:
			returned++
		case sr.Word.State == layout.SlotWriting && (ownerStamp == 0 || sr.Word.Owner != ownerStamp):
			out = append(out, check.Finding{Problem: check.ProblemForeignWrite, Action: check.ActionNone,
				Detail: fmt.Sprintf("writing slot stamped with participant %d, which is not the owner: only the owner writes (a repair leaves it alone)", sr.Owner)})
		}
		return out
	})
	if ownerGone {
		fs.add(d.ownerFinding(base, v, peers))
	}
	if pending < returned {
		f := check.Finding{Problem: check.ProblemPendingHint, Location: "deque.pending", Offset: base + layout.DequeOffPending, Raw: pending, Owner: -1, Action: check.ActionNone}
		what := fmt.Sprintf("hint %d is below the %d returned slots (returns count before they mark, so the word was damaged): consumers may not look for them", pending, returned)
		switch alive := othersAlive(peers); {
		case alive >= 0:
			f.Detail = fmt.Sprintf("%s; a repair raises it only when no other participant is alive (with others at work a count taken during its scan can be off), and participant %d is alive", what, alive)
		case returns > 0:
			f.Detail = fmt.Sprintf("%s; a repair hands %d messages back first, which moves the count, so only the repair after it raises the hint", what, returns)
		default:
			f.Action = check.ActionRaiseHint
			f.Detail = fmt.Sprintf("%s; a repair raises it to %d (no other participant is alive)", what, returned)
		}
		fs.add(f)
	}
	fs.addAll(d.tab.Check(base, peers, "deque.repair_lock", layout.DequeOffRepairLock, func(i int) int { return held[i] },
		"marked dead, what it held not yet recovered"))
	rep.Findings = fs.list
	return rep
}

// PlanRepair is what a Repair would do now: Check's findings that a repair
// acts on.
func (d *Deque) PlanRepair() []check.Finding { return d.Check().Plan() }

// othersAlive returns a participant other than this handle that is in use
// and not proven dead, or -1 when there is none (aloneAlive).
func othersAlive(peers []check.Peer) int {
	for _, p := range peers {
		if !p.Self && p.State != "free" && !p.Dead {
			return p.Index
		}
	}
	return -1
}

// planBottom runs fixBottom on a copy of the slot words: what a repair
// does at the bottom for an owner stamp (0: none) that is dead, vanished
// or absent. ownerStamp is the owner word's valid stamp, as consumedAtTop
// reads it.
func (d *Deque) planBottom(words []uint64, top, bottom uint64, stamp, ownerStamp uint16) map[uint64]check.Action {
	steps := map[uint64]check.Action{}
	b := max(bottom, top)
	for range d.lay.Capacity {
		lap := d.lay.LapOf(b)
		i := b & d.mask
		sw := layout.UnpackSlot(words[i])
		if sw.Validate(&d.lay.SlotGeometry) != nil {
			break
		}
		diff := layout.LapDiff(sw.Lap, lap)
		if diff == 0 && sw.State == layout.SlotWriting && sw.Owner == stamp && stamp != 0 {
			// fixBottom releases the run of the owner's claims from here.
			for q := b; q < b+d.lay.Capacity; q++ {
				sq := layout.UnpackSlot(words[q&d.mask])
				if sq.Validate(&d.lay.SlotGeometry) != nil || sq.State != layout.SlotWriting || sq.Owner != stamp || sq.Lap != d.lay.LapOf(q) {
					break
				}
				steps[q&d.mask] = check.ActionRelease
			}
			break
		}
		if diff == 0 && sw.State == layout.SlotReading && sw.Owner == stamp && stamp != 0 {
			steps[i] = check.ActionRollBack
			b++
			continue
		}
		if diff == 0 && sw.State == layout.SlotReady {
			steps[i] = check.ActionCountIn
			b++
			continue
		}
		if consumedAtTopFor(sw, diff, ownerStamp) {
			b++
			continue
		}
		break
	}
	return steps
}

// dequeProblem is the problem behind a bottom action.
func dequeProblem(sr SlotReport, a check.Action) check.Problem {
	switch a {
	case check.ActionRelease:
		return check.ProblemOrphanedWrite
	case check.ActionRollBack:
		return check.ProblemOrphanedRead
	case check.ActionCountIn:
		return check.ProblemUncounted
	}
	return slotProblem(sr.Problem)
}

// dequeSlotDetail says what a deque slot a repair acts on (or leaves) is,
// and what the repair does.
func dequeSlotDetail(sr SlotReport, pos uint64, p check.Peer, a check.Action) string {
	w := sr.Word
	who := fmt.Sprintf("%s, %s", ownerName(sr.Owner, p), p.Where())
	gone := fmt.Sprintf("proven dead (%s)", p.Reason)
	if !p.Dead {
		gone = "whose entry was freed or taken since"
	}
	switch a {
	case check.ActionRelease:
		return fmt.Sprintf("writing slot at the bottom (position %d) stamped with the owner, %s, %s: the push never returned, so nobody was promised the message; a repair frees the slot and bottom stays before it", pos, who, gone)
	case check.ActionRollBack:
		return fmt.Sprintf("%d-byte message being popped at the bottom (position %d) by the owner, %s, %s, and the pop never returned: a repair puts it back in place, ready (delivery count %d kept), and moves bottom past it", w.Length, pos, who, gone, w.Deliveries)
	case check.ActionCountIn:
		return fmt.Sprintf("%d-byte message published at the bottom (position %d), but bottom was never moved past it (its owner is dead, gone or none): a repair counts it in, moving bottom past it", w.Length, pos)
	case check.ActionReturn:
		if w.State == layout.SlotLeased {
			return fmt.Sprintf("%d-byte message at position %d leased by %s, %s, and never acked: a repair hands it back (returned, delivery count %d kept): taken again after the newer messages, once the deque is otherwise empty, or re-published as the newest when the owner's pushes reach its slot", w.Length, pos, who, gone, w.Deliveries)
		}
		return fmt.Sprintf("%d-byte message at position %d being taken by %s, %s, and the take never returned: a repair hands it back (returned, delivery count %d kept): taken again after the newer messages, once the deque is otherwise empty, or re-published as the newest when the owner's pushes reach its slot", w.Length, pos, who, gone, w.Deliveries)
	}
	return fmt.Sprintf("%s slot (position %d) owned by %s, %s, and not the owner's push at the bottom: no deque operation writes there; a repair leaves it alone (counted corrupt)", w.State, pos, who, gone)
}

// ownerFinding is the finding about an owner word v that a repair frees
// (corrupt, or naming a dead or vanished owner).
func (d *Deque) ownerFinding(base, v uint64, peers []check.Peer) check.Finding {
	f := check.Finding{Problem: check.ProblemDeadOwner, Location: "deque.owner", Offset: base + layout.DequeOffOwner, Raw: v, Owner: -1, Action: check.ActionFreeOwner}
	const then = "; the deque then has no owner (thieves can still take its messages) until a process calls Adopt"
	if layout.ValidateRole(v, d.lay.Entries) != nil {
		f.Problem = check.ProblemBadOwner
		f.Detail = fmt.Sprintf("word %#016x names no entry of the table of %d entries: a repair sets bottom right and frees the role%s", v, d.lay.Entries, then)
		return f
	}
	r := layout.UnpackRole(v)
	p := peers[r.Index()]
	f.Owner, f.OwnerID, f.Verdict, f.Dead = r.Index(), p.ID, p.Reason, p.Dead
	if p.Dead {
		f.Detail = fmt.Sprintf("the owner, %s, %s, is proven dead (%s): a repair undoes its half-done push or pop at the bottom, sets bottom right and frees the role%s", p.Entry(), p.Where(), p.Reason, then)
	} else {
		f.Detail = fmt.Sprintf("the owner word names participant %d at generation %d, an entry freed since: a repair sets bottom right and frees the role%s", r.Index(), r.Gen, then)
	}
	return f
}
