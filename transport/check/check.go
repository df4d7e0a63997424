package check

import (
	"fmt"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// Problem names a kind of finding. The names are stable (tools print them
// and emit them in JSON; docs/cli.md lists them).
type Problem string

// Problems of slotted files (rings and deques).
const (
	ProblemOrphanedWrite Problem = "orphaned_write" // half-written by a dead producer (or owner, or loaner)
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
	ProblemUncounted     Problem = "uncounted"      // a deque's message published at the bottom that bottom was never moved past (its owner dead or gone)
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
	ProblemUnknownLiveness Problem = "unknown_liveness" // an entry whose holder can be proven neither alive nor dead: left alone
	ProblemRepairLock      Problem = "repair_lock"      // the repair lock held by a dead participant, an entry freed since, or corrupt
)

// Action names what a repair does about a finding. The names are stable.
type Action string

const (
	ActionNone Action = "none" // left alone (poison, corrupt words, live owners)

	// Rings and deques.
	ActionRelease        Action = "release"          // a half-written slot freed; its push never returned (or its loan was never published)
	ActionRequeue        Action = "requeue"          // ring: a dead consumer's message pushed again at the tail
	ActionRequeueInPlace Action = "requeue_in_place" // ring: re-published in its own slot (the ring was full and the tail there)
	ActionDefer          Action = "defer"            // ring: no room to requeue yet; left for a later repair
	ActionReturn         Action = "return"           // deque: a dead consumer's message handed back, taken again after the newer ones
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

// Report is what a Check found. It is a value: tools print it.
type Report struct {
	Path         string
	Kind         layout.Kind
	Units        uint64 // slots or buckets checked
	Participants uint64 // participant entries checked
	Findings     []Finding

	// Fault is set when reading the file faulted (it was truncated, or
	// has holes that could not be backed, under the check): the check did
	// not finish, Findings is empty, and the file is unusable. It wraps
	// shm.ErrFault.
	Fault error
}

// Clean reports whether the check found nothing. A check that faulted is
// not clean.
func (r Report) Clean() bool { return r.Fault == nil && len(r.Findings) == 0 }

// Plan is the findings a repair acts on (Action other than ActionNone), in
// order: what PlanRepair returns.
func (r Report) Plan() []Finding {
	out := []Finding{}
	for _, f := range r.Findings {
		if f.Action != ActionNone {
			out = append(out, f)
		}
	}
	return out
}

// RepairReport says what a Repair did: the participants it proved dead and
// one finding per action taken (Action says which), in the order taken.
type RepairReport struct {
	Path      string
	DeadPeers []Peer
	Done      []Finding // every action taken (ActionNone never); for rings ActionDefer rows are the final pass's deferrals
	Corrupt   int       // words left alone because no operation writes them
}

// Count is how many of the actions taken were a.
func (r RepairReport) Count(a Action) int {
	n := 0
	for _, f := range r.Done {
		if f.Action == a {
			n++
		}
	}
	return n
}

// Changed reports whether the repair changed anything: an action other
// than a deferral, or a participant proven dead.
func (r RepairReport) Changed() bool {
	if len(r.DeadPeers) > 0 {
		return true
	}
	for _, f := range r.Done {
		if f.Action != ActionDefer {
			return true
		}
	}
	return false
}

// Peer says what a file knows of one participant entry: who it records
// and the judgement of that process (Dead is a proof: the entry lock
// released with the pid witness agreeing where it can be asked, or
// another boot; never a timeout).
type Peer struct {
	Index    int
	State    string // free, claiming, active, dead
	ID       shm.ProcessID
	Attached time.Time
	Proc     shm.ProcState // the pid witness (same pid namespace only), for claiming/active/dead entries
	Lock     shm.LockState // the entry lock: held by a live holder, released, or unreadable
	PidNS    uint64        // the holder's pid namespace inode, 0 if unknown
	OtherNS  bool          // recorded in another pid namespace than this process's: ID.PID names another process here
	Dead     bool          // proven dead: what it owns may be repaired
	Unknown  bool          // liveness undecided: treated as alive, nothing of it is repaired
	Repairer bool          // the repairer entry (layout.PeerEntries), held only while repairing without an entry of one's own
	Reason   string        // why it is judged dead or alive
	Self     bool          // this handle
}

// Entry names the entry as findings do: "participant 3", or "the
// repairer entry (3)".
func (p Peer) Entry() string {
	if p.Repairer {
		return fmt.Sprintf("the repairer entry (%d)", p.Index)
	}
	return fmt.Sprintf("participant %d", p.Index)
}

// Where names the holder as a human should read it: "pid 1 (start 42)",
// or "pid 1 in another pid namespace (pid:[4026532...])" when its pid
// means another process here.
func (p Peer) Where() string {
	if p.ID.PID == 0 {
		return "no process" // a free entry, or the repairer entry left holding what a repair parked there
	}
	if p.OtherNS {
		return shm.Holder{PID: p.ID.PID, PidNS: p.PidNS}.Where()
	}
	return p.ID.String()
}

// ReservedHeader reports the header bytes a format x.0 leaves reserved (a
// later minor version may use them) that are not zero. hdr is the file's
// first layout.HeaderSize bytes, h its decoded header.
func ReservedHeader(h layout.Header, hdr []byte) []Finding {
	if h.Minor != 0 {
		return nil
	}
	var out []Finding
	for _, f := range layout.HeaderFields() {
		if len(f.Name) > 8 && f.Name[:8] == "reserved" && !allZero(hdr[f.Offset:f.Offset+f.Size]) {
			out = append(out, Finding{Problem: ProblemReservedNonzero, Location: "header." + f.Name, Offset: f.Offset, Owner: -1, Action: ActionNone,
				Detail: fmt.Sprintf("reserved bytes %d-%d are not zero", f.Offset, f.Offset+f.Size-1)})
		}
	}
	return out
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
