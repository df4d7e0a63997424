package transport

import (
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// Check reads the whole ring and reports every problem it finds: reserved
// header bytes, head and tail, every slot word (state, length, owner,
// deliveries, lap), owners proven dead, poison, the participant entries
// and the repair lock, each with the action a repair would take now. It
// changes nothing and works on read-only handles; each shared word is read
// once, validated, then used.
//
// It runs under the file's fault guard: a file truncated or holed under
// it gives a report whose Fault is set (and which is not Clean) instead of
// a crash.
func (r *Ring) Check() check.Report {
	rep, err := guarded(r.reg, "check", func() (check.Report, error) { return confirmed(r.check), nil })
	if err != nil {
		h := r.Header()
		return check.Report{Path: r.Path(), Kind: h.Kind, Units: r.lay.Capacity, Participants: r.lay.Participants, Fault: err}
	}
	return rep
}

func (r *Ring) check() check.Report {
	h := r.Header()
	base := uint64(h.HeaderSize)
	rep := check.Report{Path: r.Path(), Kind: h.Kind, Units: r.lay.Capacity, Participants: r.lay.Participants}
	fs := &findings{}
	checkReserved(fs, h, r.reg.Bytes()[:layout.HeaderSize])
	head, tail := r.head.Load(), r.tail.Load()
	capacity := r.lay.Capacity
	switch {
	case head > tail+capacity:
		fs.addf(check.ProblemHeadTail, "ring.head", base+layout.RingOffHead, check.ActionNone, "head %d is more than a lap ahead of tail %d", head, tail)
	case tail > head+3*capacity:
		fs.addf(check.ProblemHeadTail, "ring.tail", base+layout.RingOffTail, check.ActionNone, "tail %d is more than 3 laps ahead of head %d", tail, head)
	}
	peers := r.Peers()
	words := r.snapshotSlots()
	sim := r.planSlots(words, head, tail, peers)
	held := make([]int, r.lay.Entries)
	checkSlots(fs, &r.lay.SlotGeometry, "head", base, words, peers, head, tail, func(sr SlotReport, pos uint64) []check.Finding {
		if !orphaned(sr.Problem) {
			return nil
		}
		step, planned := sim.steps[sr.Index]
		switch {
		case !planned && sim.stopped:
			step = ringStep{action: check.ActionNone, why: fmt.Sprintf("a repair stops at slot %d first (see there) and does not reach this one", sim.stopAt)}
		case !planned:
			step = ringStep{action: check.ActionNone, why: "the slot changes before a repair reaches it"}
		case sim.stopped && step.action == check.ActionDefer && step.pass < sim.stopPass:
			// Deferred in an earlier pass; the pass that stops does not
			// reach it again, and a repair reports its last pass's
			// deferrals only.
			step = ringStep{action: check.ActionNone, why: fmt.Sprintf("a repair stops at slot %d before it gets here again", sim.stopAt)}
		}
		held[sr.Owner]++
		return []check.Finding{{Problem: slotProblem(sr.Problem), Action: step.action,
			Detail: ringSlotDetail(sr, pos, peers[sr.Owner], step.action, step.why)}}
	})
	n := len(fs.list)
	fs.addAll(r.tab.Check(base, peers, "ring.repair_lock", layout.RingOffRepairLock, func(i int) int { return held[i] },
		"marked dead by a repair that could not finish (messages deferred for room)"))
	for i := n; i < len(fs.list); i++ {
		f := &fs.list[i]
		if f.Problem == check.ProblemDeadParticipant && sim.stopped {
			f.Action = check.ActionNone
			f.Detail = fmt.Sprintf("%s, proven dead (%s): a repair marks it dead but stops at slot %d (a corrupt word where it pushes a copy) before it frees any entry", f.OwnerID, f.Verdict, sim.stopAt)
			continue
		}
		if f.Problem == check.ProblemDeadParticipant && f.Owner >= 0 && sim.keep[f.Owner] {
			f.Action = check.ActionNone
			f.Detail = fmt.Sprintf("%s, proven dead (%s): a repair marks it dead and keeps it while a message it held (listed above) waits for room; a later repair frees it", f.OwnerID, f.Verdict)
		}
	}
	rep.Findings = fs.list
	return rep
}

// PlanRepair is what a Repair would do now: Check's findings that a repair
// acts on.
func (r *Ring) PlanRepair() []check.Finding { return r.Check().Plan() }

// snapshotSlots reads every slot word once.
func (r *Ring) snapshotSlots() []uint64 {
	words := make([]uint64, r.lay.Capacity)
	for i := range words {
		words[i] = r.slotWord(uint64(i)).Load()
	}
	return words
}

// ringSlotDetail says what a ring's orphaned slot is and what a repair
// does about it (a, with why for a slot a repair cannot finish).
func ringSlotDetail(sr SlotReport, pos uint64, p check.Peer, a check.Action, why string) string {
	w := sr.Word
	head := fmt.Sprintf("%s slot (position %d, %d bytes) owned by %s, %s, proven dead (%s): ", w.State, pos, w.Length, ownerName(sr.Owner, p), p.Where(), p.Reason)
	switch a {
	case check.ActionRelease:
		return head + fmt.Sprintf("the push never returned (or the loan was never published), so nobody was promised the message; a repair frees the slot for the next lap and position %d is skipped", pos)
	case check.ActionRequeue:
		return head + fmt.Sprintf("a repair pushes a copy at the tail (delivery count %d kept) and frees the slot", w.Deliveries)
	case check.ActionRequeueInPlace:
		return head + fmt.Sprintf("the ring is full and the tail is at this slot: a repair re-publishes the message in place (delivery count %d kept), as the very next one", w.Deliveries)
	case check.ActionDefer:
		return head + "the ring is full: a repair leaves it, counted in ring.deferred, until there is room (a consumer that finds the ring empty repairs again)"
	}
	if why != "" {
		return head + why
	}
	return head + "the slot changes before a repair reaches it"
}

// ringPlan is what a Repair would do to each slot (by index) and which
// dead entries it would keep (they own a deferred message).
type ringPlan struct {
	steps    map[uint64]ringStep
	keep     []bool
	stopped  bool   // a push met a corrupt word: Repair returns an error there, before it frees any entry
	stopAt   uint64 // the slot whose recovery stopped it
	stopPass int    // in that pass
}

type ringStep struct {
	action check.Action
	why    string // for check.ActionNone: why a repair does not act
	pass   int    // the slot pass that decided it
}

// planSlots runs Repair's slot passes on a copy of the slot words: the
// same order, the same pushes (burning past leases, helping the tail),
// the same passes while they make progress.
func (r *Ring) planSlots(words []uint64, head, tail uint64, peers []check.Peer) ringPlan {
	plan := ringPlan{steps: map[uint64]ringStep{}, keep: make([]bool, r.lay.Entries)}
	dead := make([]bool, len(peers))
	anyDead := false
	for _, p := range peers {
		if p.Dead && !p.Self {
			dead[p.Index], anyDead = true, true
		}
	}
	sim := ringSim{lay: &r.lay.SlotGeometry, words: append([]uint64(nil), words...), head: head, tail: tail}
	for pass := 0; anyDead; pass++ {
		progress, deferred := false, 0
		clear(plan.keep)
		for i := uint64(0); i < r.lay.Capacity; i++ {
			raw := sim.words[i]
			sw := layout.UnpackSlot(raw)
			if sw.Validate(&r.lay.SlotGeometry) != nil || sw.Owner == 0 || !dead[sw.Owner-1] {
				continue
			}
			step := sim.recoverSlot(i, raw, sw)
			step.pass = pass
			plan.steps[i] = step
			switch step.action {
			case check.ActionRelease, check.ActionRequeue, check.ActionRequeueInPlace:
				progress = true
			case check.ActionDefer:
				deferred++
				plan.keep[sw.Owner-1] = true
			default:
				if sim.stopped {
					plan.stopped, plan.stopAt, plan.stopPass = true, i, pass
					return plan
				}
			}
		}
		if deferred == 0 || !progress || uint64(pass) >= r.lay.Capacity {
			break
		}
	}
	return plan
}

// ringSim is a ring's slot words, head and tail, changed as a Repair
// would change them.
type ringSim struct {
	lay        *layout.SlotGeometry
	words      []uint64
	head, tail uint64
	stopped    bool // a push met a corrupt word: Repair returns an error there
}

func (s *ringSim) recoverSlot(i, raw uint64, sw layout.SlotWord) ringStep {
	if sw.State != layout.SlotReading && sw.State != layout.SlotLeased {
		return s.withoutPush(i, sw)
	}
	ok, err := s.push(sw.Deliveries, sw.Length)
	if err != "" {
		s.stopped = true
		return ringStep{action: check.ActionNone, why: "a repair's push of a copy meets " + err + " and stops there"}
	}
	if !ok {
		// As in Ring.recoverSlot: the failed push may have burned past
		// this lease (its lap moved on), so judge it as it is now.
		return s.withoutPush(i, layout.UnpackSlot(s.words[i]))
	}
	// Our own push may have burned past this lease (its lap moved on).
	now := layout.UnpackSlot(s.words[i])
	if now.Owner != sw.Owner || (now.State != layout.SlotReading && now.State != layout.SlotLeased) {
		return ringStep{action: check.ActionNone, why: "the slot changes before a repair reaches it"}
	}
	s.words[i] = layout.SlotWord{Lap: (now.Lap + 1) & layout.SlotLapMask}.Pack()
	return ringStep{action: check.ActionRequeue}
}

func (s *ringSim) withoutPush(i uint64, sw layout.SlotWord) ringStep {
	next := (sw.Lap + 1) & layout.SlotLapMask
	switch sw.State {
	case layout.SlotWriting:
		s.words[i] = layout.SlotWord{Lap: next}.Pack()
		return ringStep{action: check.ActionRelease}
	case layout.SlotReading, layout.SlotLeased:
		t := s.tail
		if t&(s.lay.Capacity-1) != i || s.lay.LapOf(t) != next {
			return ringStep{action: check.ActionDefer}
		}
		s.words[i] = layout.SlotWord{State: layout.SlotReady, Deliveries: sw.Deliveries, Length: sw.Length, Lap: next}.Pack()
		s.tail = t + 1
		return ringStep{action: check.ActionRequeueInPlace}
	}
	return ringStep{action: check.ActionNone, why: ""}
}

// push mirrors Ring.push on the copy: ok when a message would be
// published, false when the ring is full, err when the push would fail on
// a corrupt word.
func (s *ringSim) push(deliveries uint8, length uint32) (ok bool, err string) {
	capacity := s.lay.Capacity
	burned := uint64(0)
	for range 4*capacity + 4 {
		t := s.tail
		lap := s.lay.LapOf(t)
		i := t & (capacity - 1)
		raw := s.words[i]
		sw := layout.UnpackSlot(raw)
		d := layout.LapDiff(sw.Lap, lap)
		switch {
		case d == 0 && sw.State == layout.SlotFree:
			if raw != (layout.SlotWord{Lap: lap}).Pack() {
				return false, fmt.Sprintf("the corrupt word %#016x of slot %d", raw, i)
			}
			s.words[i] = layout.SlotWord{State: layout.SlotReady, Deliveries: deliveries, Length: length, Lap: lap}.Pack()
			s.tail = t + 1
			return true, ""
		case d == 0 || d == 1:
			s.tail = t + 1
		case d == -1 && (sw.State == layout.SlotLeased || sw.State == layout.SlotPoisoned):
			if burned >= capacity || t-s.head >= capacity {
				return false, ""
			}
			if sw.Validate(s.lay) != nil {
				return false, fmt.Sprintf("the corrupt word %#016x of slot %d", raw, i)
			}
			sw.Lap = lap
			s.words[i] = sw.Pack()
			burned++
			s.tail = t + 1
		case d == -1 && (sw.State == layout.SlotReady || sw.State == layout.SlotWriting || sw.State == layout.SlotReading):
			return false, ""
		default:
			return false, fmt.Sprintf("the %s word of slot %d at lap %d, seen from tail %d", sw.State, i, sw.Lap, t)
		}
	}
	return false, ""
}
