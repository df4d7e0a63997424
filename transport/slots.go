package transport

import (
	"fmt"
	"strings"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// Slot classification shared by the ring and the deque: what Scan calls
// each slot word (SlotProblem, SlotReport), and the slot part of Check
// (checkSlots), which both kinds run over the same slot word format
// (layout.SlotWord) with their own judge of what a repair does.

// SlotProblem classifies a slot found by Scan.
type SlotProblem uint8

const (
	SlotOK            SlotProblem = iota // free, ready, or owned by a live participant
	SlotOrphanedWrite                    // half-written by a dead producer: released by Repair
	SlotOrphanedRead                     // being popped by a dead consumer: requeued by Repair
	SlotOrphanedLease                    // leased by a dead consumer: requeued by Repair
	SlotPoison                           // set aside after too many deliveries
	SlotCorrupt                          // a word no ring operation writes
)

var slotProblemNames = [...]string{"ok", "orphaned write", "orphaned read", "orphaned lease", "poisoned", "corrupt"}

func (p SlotProblem) String() string {
	if int(p) < len(slotProblemNames) {
		return slotProblemNames[p]
	}
	return fmt.Sprintf("problem(%d)", uint8(p))
}

// SlotReport describes one non-free slot.
type SlotReport struct {
	Index   uint64
	Raw     uint64
	Word    layout.SlotWord
	Problem SlotProblem
	Owner   int           // participant index, -1 for none
	OwnerID shm.ProcessID // the owner's identity as the table records it
	Alive   bool          // the owner is not proven dead
	Err     string        // why the word is corrupt
}

// scanSlots classifies every slot of a ring or deque (word loads slot i's
// word): the count of slots in each state, every slot that is not free or
// has a problem, how many have problems, how many are corrupt.
func scanSlots(lay *layout.SlotGeometry, word func(i uint64) uint64, peers []check.Peer) (states map[layout.SlotState]int, slots []SlotReport, problems, corrupt int) {
	states = map[layout.SlotState]int{}
	for i := uint64(0); i < lay.Capacity; i++ {
		sr := classifySlot(lay, i, word(i), peers)
		if sr.Problem == SlotCorrupt {
			corrupt++
		} else {
			states[sr.Word.State]++
		}
		if sr.Word.State != layout.SlotFree || sr.Problem != SlotOK {
			slots = append(slots, sr)
		}
		if sr.Problem != SlotOK {
			problems++
		}
	}
	return states, slots, problems, corrupt
}

// classifySlot judges slot i of a ring or deque by its word and the
// participant table's verdicts.
func classifySlot(lay *layout.SlotGeometry, i, raw uint64, peers []check.Peer) SlotReport {
	sw := layout.UnpackSlot(raw)
	sr := SlotReport{Index: i, Raw: raw, Word: sw, Owner: int(sw.Owner) - 1, Alive: true}
	if err := sw.Validate(lay); err != nil {
		sr.Problem, sr.Err = SlotCorrupt, err.Error()
		return sr
	}
	if sw.State == layout.SlotPoisoned {
		sr.Problem = SlotPoison
	}
	if sr.Owner < 0 {
		return sr
	}
	p := peers[sr.Owner]
	sr.OwnerID, sr.Alive = p.ID, !p.Dead
	if p.State == "free" || (p.State == "claiming" && !p.Dead) {
		// An owner stamp pointing at an unused entry: no process can be
		// proven to own it, and no repair may guess.
		sr.Problem, sr.Err, sr.Alive = SlotCorrupt, "owner entry is "+p.State, false
		return sr
	}
	if p.Dead {
		switch sw.State {
		case layout.SlotWriting:
			sr.Problem = SlotOrphanedWrite
		case layout.SlotReading:
			sr.Problem = SlotOrphanedRead
		case layout.SlotLeased:
			sr.Problem = SlotOrphanedLease
		}
	}
	return sr
}

func orphaned(p SlotProblem) bool {
	return p == SlotOrphanedWrite || p == SlotOrphanedRead || p == SlotOrphanedLease
}

// slotProblem names a Scan classification in Check's vocabulary.
func slotProblem(p SlotProblem) check.Problem {
	switch p {
	case SlotOrphanedWrite:
		return check.ProblemOrphanedWrite
	case SlotOrphanedRead:
		return check.ProblemOrphanedRead
	case SlotOrphanedLease:
		return check.ProblemOrphanedLease
	case SlotPoison:
		return check.ProblemPoisoned
	case SlotCorrupt:
		return check.ProblemCorruptSlot
	}
	return ""
}

// slotPosition reconstructs the queue position a slot word refers to: slot
// words keep the lap modulo 2^27, so the full lap is taken as the one
// nearest near's (live words are never more than two laps from head or
// top). A word whose lap would fall before position 0 (only a corrupt one)
// is given its lap as stored.
func slotPosition(l *layout.SlotGeometry, index uint64, lap uint32, near uint64) uint64 {
	nearLap := near >> l.CapShift
	full := int64(nearLap) + int64(layout.LapDiff(lap, uint32(nearLap)&layout.SlotLapMask))
	if full < 0 {
		full = int64(lap)
	}
	return uint64(full)<<l.CapShift | index
}

// slotTemplate is a finding about slot i (word raw, classified as sr):
// where it is, its position near lo, and its owner.
func slotTemplate(l *layout.SlotGeometry, base uint64, sr SlotReport, peers []check.Peer, lo uint64) check.Finding {
	f := check.Finding{Location: fmt.Sprintf("slot[%d].word", sr.Index), Offset: base + l.SlotOff(sr.Index), Raw: sr.Raw,
		Position: slotPosition(l, sr.Index, sr.Word.Lap, lo), HasPosition: true, Owner: -1}
	if sr.Owner >= 0 && sr.Owner < len(peers) {
		p := peers[sr.Owner]
		f.Owner, f.OwnerID, f.Verdict, f.Dead = sr.Owner, p.ID, p.Reason, p.Dead
	}
	return f
}

// slotJudge gives a kind's findings about one slot (check.Problem, check.Action and
// Detail; checkSlots fills in where and whose). It is called for every
// slot, corrupt ones included.
type slotJudge func(sr SlotReport, pos uint64) []check.Finding

// checkSlots checks every slot word of a ring or deque (words, read once):
// its classification (state, length, owner, proof of death), what the
// kind's judge says of it, then what the state machine allows of
// deliveries and laps. lo and hi are the positions the live words cluster
// around (head and tail; top and bottom), loName names lo ("head", "top").
// Corrupt and poisoned words are left alone by every repair.
func checkSlots(fs *findings, l *layout.SlotGeometry, loName string, base uint64, words []uint64, peers []check.Peer, lo, hi uint64, judge slotJudge) {
	loLap, hiLap := l.LapOf(lo), l.LapOf(hi)
	limit := uint8(l.DeliveryLimit)
	for i, raw := range words {
		sr := classifySlot(l, uint64(i), raw, peers)
		t := slotTemplate(l, base, sr, peers, lo)
		add := func(p check.Problem, a check.Action, format string, args ...any) {
			f := t
			f.Problem, f.Action, f.Detail = p, a, fmt.Sprintf(format, args...)
			fs.add(f)
		}
		w := sr.Word
		if sr.Problem == SlotCorrupt {
			add(check.ProblemCorruptSlot, check.ActionNone, "word %#016x: %s: left alone", raw, strings.ReplaceAll(sr.Err, "layout: ", ""))
		}
		if sr.Problem == SlotPoison {
			add(check.ProblemPoisoned, check.ActionNone, "message at position %d set aside after %d deliveries (limit %d): left alone; take it with TakePoisoned",
				t.Position, w.Deliveries, l.DeliveryLimit)
		}
		for _, f := range judge(sr, t.Position) {
			g := t
			g.Problem, g.Action, g.Detail = f.Problem, f.Action, f.Detail
			fs.add(g)
		}
		if sr.Problem == SlotCorrupt {
			continue
		}
		switch {
		case w.State == layout.SlotWriting && (w.Length != 0 || w.Deliveries != 0):
			add(check.ProblemBadDeliveries, check.ActionNone, "writing slot with length %d and %d deliveries: a producer writes both as 0", w.Length, w.Deliveries)
		case w.State == layout.SlotReady && w.Deliveries > limit,
			(w.State == layout.SlotReading || w.State == layout.SlotLeased || w.State == layout.SlotReturned) && (w.Deliveries == 0 || w.Deliveries > limit):
			add(check.ProblemBadDeliveries, check.ActionNone, "%s slot with %d deliveries (limit %d)", w.State, w.Deliveries, limit)
		case w.State == layout.SlotPoisoned && w.Deliveries < limit:
			add(check.ProblemBadDeliveries, check.ActionNone, "poisoned slot with %d deliveries, under the limit of %d", w.Deliveries, limit)
		}
		if d1, d2 := layout.LapDiff(w.Lap, loLap), layout.LapDiff(w.Lap, hiLap); min(abs32(d1), abs32(d2)) > 2 {
			add(check.ProblemBadLap, check.ActionNone, "%s slot at lap %d, %d laps from the %s's lap %d (live words are at most 2 laps away)",
				w.State, w.Lap, d1, loName, loLap)
		}
	}
}

func abs32(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

// ownerName names the entry owner (an index) whose status is p, as
// findings do; p may be the zero Peer when the owner is not in the table.
func ownerName(owner int, p check.Peer) string {
	if p.Index != owner {
		return fmt.Sprintf("participant %d", owner)
	}
	return p.Entry()
}
