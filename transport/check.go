package transport

import (
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// One vocabulary for every kind's judgement. Check reads a file and lists
// every problem it finds, each with what a repair would do about it now;
// PlanRepair is that list cut to the findings a repair acts on; Repair runs
// the same classification under the repair lock and reports what it did as
// findings too. Tools render these values and decide nothing themselves.

// Problem names a kind of finding. The names are stable (tools print them
// and emit them in JSON; docs/cli.md lists them).
type Problem string

// Problems of slotted files (rings and deques).
const (
	ProblemOrphanedWrite Problem = "orphaned_write" // half-written by a dead producer (or owner)
	ProblemOrphanedRead  Problem = "orphaned_read"  // being popped or stolen by a dead consumer
	ProblemOrphanedLease Problem = "orphaned_lease" // leased by a dead consumer
	ProblemPoisoned      Problem = "poisoned"       // set aside after too many deliveries
	ProblemCorruptSlot   Problem = "corrupt_slot"   // a slot word no operation writes
	ProblemBadDeliveries Problem = "bad_deliveries" // a delivery count the state machine does not allow
	ProblemBadLap        Problem = "bad_lap"        // a slot lap too far from the live positions
	ProblemHeadTail      Problem = "head_tail"      // a ring's head and tail out of bounds
	ProblemTopBottom     Problem = "top_bottom"     // a deque's top and bottom out of bounds
	ProblemDeadOwner     Problem = "dead_owner"     // a deque's owner proven dead (or its entry freed since)
	ProblemBadOwner      Problem = "bad_owner"      // a deque's owner word that names no entry
	ProblemForeignWrite  Problem = "foreign_write"  // a deque slot being written by a participant that is not the owner
	ProblemPendingHint   Problem = "pending_hint"   // a deque's pending count below its returned slots
)

// Problems of hash maps.
const (
	ProblemOrphanedInsert Problem = "orphaned_insert" // inserting, its writer dead
	ProblemOrphanedLock   Problem = "orphaned_lock"   // full and locked by a dead writer
	ProblemOrphanedHome   Problem = "orphaned_home"   // a home lock held by a dead participant or an entry freed since
	ProblemBadHomeLock    Problem = "bad_home_lock"   // a home lock word that names no entry
	ProblemCorruptBucket  Problem = "corrupt_bucket"  // a bucket word no operation writes
)

// Problems every kind with a participant table can have.
const (
	ProblemReservedNonzero Problem = "reserved_nonzero" // reserved bytes (of format x.0) not zero
	ProblemDeadParticipant Problem = "dead_participant" // an entry whose process is proven dead, or one a repair marked dead
	ProblemBadParticipant  Problem = "bad_participant"  // an entry word no operation writes
	ProblemRepairLock      Problem = "repair_lock"      // the repair lock held by a dead participant, an entry freed since, or corrupt
)

// Action names what a repair does about a finding. The names are stable.
type Action string

const (
	ActionNone Action = "none" // left alone (poison, corrupt words, live owners)

	// Rings and deques.
	ActionRelease        Action = "release"          // a half-written slot freed; its push never returned
	ActionRequeue        Action = "requeue"          // ring: a dead consumer's message pushed again at the tail
	ActionRequeueInPlace Action = "requeue_in_place" // ring: re-published in its own slot (the ring was full and the tail there)
	ActionDefer          Action = "defer"            // ring: no room to requeue yet; left for a later repair
	ActionReturn         Action = "return"           // deque: a dead consumer's message handed back, to be taken again
	ActionRollBack       Action = "roll_back"        // deque: the dead owner's pop put back at the bottom
	ActionCountIn        Action = "count_in"         // deque: the dead owner's published message counted in (bottom moved past it)
	ActionFreeOwner      Action = "free_owner"       // deque: the dead owner's role freed for Adopt
	ActionRaiseHint      Action = "raise_hint"       // deque: the pending count raised to the returned slots

	// Hash maps.
	ActionTombstone   Action = "tombstone"    // a dead writer's insert made a tombstone
	ActionUnlock      Action = "unlock"       // a dead writer's update or delete undone (old value kept)
	ActionReleaseHome Action = "release_home" // a dead holder's home lock released

	// Every kind.
	ActionFreeEntry    Action = "free_entry"     // a dead participant's entry marked dead, then freed
	ActionTakeOverLock Action = "take_over_lock" // the repair lock of a dead repairer taken over
)

// Finding is one problem a Check found, or one thing a Repair did: where,
// what, whose, and the action.
type Finding struct {
	Problem  Problem
	Location string // the field as layout's field tables name it: "slot[3].word", "participant[1].ctl", "ring.repair_lock"
	Offset   uint64 // file offset of that field
	Raw      uint64 // the word as read (0 where the finding is not about one word)

	// Position is the queue position a slot finding is at (HasPosition).
	Position    uint64
	HasPosition bool

	// Owner is the participant entry the word names, -1 for none; OwnerID
	// and Verdict are that entry's identity and judgement (why it is dead
	// or alive) when there is one.
	Owner   int
	OwnerID shm.ProcessID
	Verdict string
	Dead    bool // the owner is proven dead

	Action Action // what a repair does about it now (ActionNone: left alone)
	Detail string // one or two sentences for people, with the numbers
}

// CheckReport is what a Check found. It is a value: tools print it.
type CheckReport struct {
	Path         string
	Kind         layout.Kind
	Units        uint64 // slots or buckets checked
	Participants uint64 // participant entries checked
	Findings     []Finding
}

// Clean reports whether the check found nothing.
func (r CheckReport) Clean() bool { return len(r.Findings) == 0 }

// Plan is the findings a repair acts on (Action other than ActionNone), in
// order: what PlanRepair returns.
func (r CheckReport) Plan() []Finding {
	out := []Finding{}
	for _, f := range r.Findings {
		if f.Action != ActionNone {
			out = append(out, f)
		}
	}
	return out
}

// findings accumulates a Check's findings.
type findings struct{ list []Finding }

// add records a finding about the field loc at offset off.
func (fs *findings) add(f Finding) { fs.list = append(fs.list, f) }

// addf records a finding with no owner and a formatted detail.
func (fs *findings) addf(p Problem, loc string, off uint64, act Action, format string, args ...any) {
	fs.add(Finding{Problem: p, Location: loc, Offset: off, Owner: -1, Action: act, Detail: fmt.Sprintf(format, args...)})
}

// checkReserved reports the header bytes a format x.0 leaves reserved (a
// later minor version may use them) that are not zero. hdr is the file's
// first layout.HeaderSize bytes.
func checkReserved(fs *findings, h layout.Header, hdr []byte) {
	if h.Minor != 0 {
		return
	}
	for _, f := range layout.HeaderFields() {
		if len(f.Name) > 8 && f.Name[:8] == "reserved" && !allZero(hdr[f.Offset:f.Offset+f.Size]) {
			fs.addf(ProblemReservedNonzero, "header."+f.Name, f.Offset, ActionNone, "reserved bytes %d-%d are not zero", f.Offset, f.Offset+f.Size-1)
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkPeers reports the participant entries and the repair lock: entries
// whose words no operation writes, entries proven dead (or marked dead by a
// repair that has not finished), and a repair lock held by a dead or
// vanished holder or corrupt. base is the file offset of the kind's area
// (the header size), lockOff the lock word's offset in that area and
// lockLoc its name ("ring.repair_lock"). held(i) is how many things of
// entry i the findings before this list as orphaned (what a repair
// recovers before it frees the entry), and markedDead says why the kind
// can leave an entry marked dead.
func (t *peerTable) checkPeers(fs *findings, base uint64, peers []PeerStatus, lockLoc string, lockOff uint64, held func(i int) int, markedDead string) {
	for _, p := range peers {
		off := base + t.off + uint64(p.Index)*layout.PeerEntrySize
		loc := fmt.Sprintf("participant[%d].ctl", p.Index)
		raw := t.entry(uint64(p.Index)).ctl.Load()
		ctl := layout.UnpackPeer(raw)
		f := Finding{Location: loc, Offset: off, Raw: raw, Owner: p.Index, OwnerID: p.ID, Verdict: p.Reason, Dead: p.Dead, Action: ActionNone}
		switch {
		case ctl.State > layout.PeerDead:
			f.Problem, f.Detail = ProblemBadParticipant, fmt.Sprintf("entry state %d does not exist: left alone", ctl.State)
		case ctl.State == layout.PeerFree && ctl.PID != 0:
			f.Problem, f.Detail = ProblemBadParticipant, fmt.Sprintf("free entry with pid %d: left alone", ctl.PID)
		case ctl.State == layout.PeerFree:
			continue
		case ctl.State == layout.PeerDead || p.Dead:
			f.Problem, f.Action = ProblemDeadParticipant, ActionFreeEntry
			if ctl.State == layout.PeerDead {
				f.Detail = fmt.Sprintf("pid %d %s: a repair finishes it", ctl.PID, markedDead)
			} else {
				f.Detail = fmt.Sprintf("%s entry of %s, proven dead (%s): marked dead", p.State, p.ID, p.Reason)
			}
			switch n := held(p.Index); n {
			case 0:
				f.Detail += ", and freed: it holds nothing"
			case 1:
				f.Detail += ", then freed once the one thing it held (listed above) is recovered"
			default:
				f.Detail += fmt.Sprintf(", then freed once the %d things it held (listed above) are recovered", n)
			}
		default:
			continue
		}
		fs.add(f)
	}
	raw := t.lock.Load()
	if raw == 0 {
		return
	}
	f := Finding{Problem: ProblemRepairLock, Location: lockLoc, Offset: base + lockOff, Raw: raw, Owner: -1, Action: ActionTakeOverLock}
	if err := layout.ValidateRole(raw, t.n); err != nil {
		f.Detail = fmt.Sprintf("word %#016x names no entry of the table of %d participants: the next repair takes it over", raw, t.n)
		fs.add(f)
		return
	}
	r := layout.UnpackRole(raw)
	p := peers[r.Index()]
	f.Owner, f.OwnerID, f.Verdict, f.Dead = r.Index(), p.ID, p.Reason, p.Dead
	c := layout.UnpackPeer(t.entry(uint64(r.Index())).ctl.Load())
	switch {
	case p.Dead:
		f.Detail = fmt.Sprintf("held by participant %d, %s, proven dead (%s): the next repair takes it over and finishes its work", r.Index(), p.ID, p.Reason)
	case c.Gen != r.Gen || (c.State != layout.PeerActive && c.State != layout.PeerClaiming): // as holderAlive judges it
		f.Detail = fmt.Sprintf("held by participant %d at generation %d, an entry freed since: the next repair takes it over", r.Index(), r.Gen)
	default:
		return // a live repairer at work
	}
	fs.add(f)
}
