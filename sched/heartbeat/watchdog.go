package heartbeat

import (
	"fmt"
	"sync"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// ExitUnknown is published when a slot was reused between two scans, so
// how its earlier participant left is no longer recorded.
const ExitUnknown ExitReason = 0

// WatchdogConfig configures a failover watchdog.
type WatchdogConfig struct {
	// Stale is how long an alive participant may go without beating
	// before it is reported stale (never reclaimed). 0 disables it.
	Stale time.Duration
	// Queues are the transports (rings, deques) whose leases dead
	// participants are requeued into: with apply every scan repairs each
	// of them. A dead participant holding a lease in a queue not listed
	// here is reported, and its slot is kept until a watchdog that has the
	// queue reclaims it.
	Queues []Repairable
	// Events, if set, receives an exit event when a participant's exit is
	// final (it unregistered, or was reclaimed); a participant proven dead
	// that cannot be reclaimed yet is announced as ExitFoundDead first. A
	// member that registered and left between two scans is announced from
	// its slot's last-exit word.
	Events *ExitEvents
}

// Repairable is a transport file a watchdog can repair: the ring and the
// deque are, and so is every transport.Queue.
type Repairable interface {
	ID() uint64
	Path() string
	Repair() (check.RepairReport, error)
}

// Watchdog finds dead and stale participants of a heartbeat table and
// reclaims the dead (proven by their released entry locks, see
// Table.Register; an undecided verdict is never acted on): their leases go back to their queues (at-least-once)
// and their slots are freed. Scans from several watchdogs, in several
// processes, may run at once: every change is a CAS from the exact word a
// scan observed, and requeueing goes through each queue's Repair, which
// admits one repairer at a time and never requeues a message twice.
type Watchdog struct {
	hb  *Table
	cfg WatchdogConfig

	mu    sync.Mutex
	known map[int]seenSlot // what the last scan saw in each slot
}

type seenSlot struct {
	ctl          uint64
	id           shm.ProcessID // the member's, once its start time is written (active, reclaiming)
	deadReported bool
}

// NewWatchdog makes a watchdog over table hb.
func NewWatchdog(hb *Table, cfg WatchdogConfig) *Watchdog {
	return &Watchdog{hb: hb, cfg: cfg, known: map[int]seenSlot{}}
}

// WatchReport is what one scan found and did. Tools print it.
type WatchReport struct {
	Table        string
	Participants []Participant // every slot, as read at the start of the scan
	Alive        int
	Stale        int
	Unknown      int // undecided verdicts (shm.Verdict.Unknown): treated as alive, never reclaimed
	Dead         int
	Free         int
	Corrupt      int           // slots in a state the format does not define: left alone
	Decisions    []Decision    // one per dead participant, in slot order: what the scan did, or in a dry run would do, with it
	Reclaimed    []Participant // dead participants whose slots this scan freed
	QueueRepairs []QueueRepair // what each queue's repair did
	Problems     []string      // what could not be done, and why
	Events       []ExitEvent   // exit events this scan published
	StaleAfter   time.Duration // the stale threshold used
	Applied      bool          // false for a dry run

	given    map[uint64]bool // queues this watchdog can repair, by id
	repaired map[uint64]bool // queues repaired by this scan
}

// QueueRepair is the outcome of one queue's repair during a scan.
type QueueRepair struct {
	Path   string
	ID     uint64
	Report check.RepairReport
	Err    string
}

// Action is what a scan does with a dead participant.
type Action uint8

const (
	// ActionReclaim frees the slot: every queue the participant holds
	// leases in was given to the watchdog (and, with apply, repaired, which
	// requeued those leases).
	ActionReclaim Action = iota + 1
	// ActionKeep leaves the slot as it is (with apply: reclaiming, so that
	// the next scan of any watchdog continues); Decision.Why says why.
	ActionKeep
)

func (a Action) String() string {
	switch a {
	case ActionReclaim:
		return "reclaim"
	case ActionKeep:
		return "keep"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// KeepReason says why a dead participant's slot is kept.
type KeepReason uint8

const (
	// KeepQueueNotGiven: a recorded lease is in a queue the watchdog was
	// not given (Decision.Queue names it); a watchdog that has it can
	// reclaim the slot.
	KeepQueueNotGiven KeepReason = iota + 1
	// KeepQueueNotRepaired: a recorded lease is in a queue whose repair
	// failed during this scan (Decision.Queue names it; the report's
	// QueueRepairs and Problems say how). Only with apply.
	KeepQueueNotRepaired
	// KeepSlotChanged: the slot changed after the scan read it (another
	// watchdog is reclaiming it, or it was freed). Only with apply.
	KeepSlotChanged
)

func (r KeepReason) String() string {
	switch r {
	case KeepQueueNotGiven:
		return "lease in a queue not given"
	case KeepQueueNotRepaired:
		return "lease in a queue not repaired"
	case KeepSlotChanged:
		return "slot changed during the scan"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Decision is the watchdog's judgement of one dead participant: what it
// does (or, in a dry run, would do) and why. Tools render it rather than
// re-derive the rule.
type Decision struct {
	Participant Participant // as read at the start of the scan
	Action      Action
	Why         KeepReason // for ActionKeep
	Queue       uint64     // for KeepQueueNotGiven and KeepQueueNotRepaired: the queue's id (layout.FileID)
	Reclaimed   bool       // this scan freed the slot (never in a dry run; false too when another watchdog freed it first)
}

// Scan classifies every participant and, when apply is true, repairs every
// queue it was given and reclaims the dead participants. Stale
// participants that are alive are only reported. The report's Decisions
// say, for each dead participant, what the scan did with it, or without
// apply (a dry run, which changes nothing) what it would do: reclaim it,
// or keep its slot because a lease is in a queue the watchdog was not
// given. What could not be done is listed in the report's Problems.
func (w *Watchdog) Scan(apply bool) WatchReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	rep := WatchReport{Table: w.hb.Path(), StaleAfter: w.cfg.Stale, Applied: apply,
		given: map[uint64]bool{}, repaired: map[uint64]bool{}}
	for _, q := range w.cfg.Queues {
		rep.given[q.ID()] = true
	}
	rep.Participants = w.hb.Snapshots()
	for _, p := range rep.Participants {
		switch p.Health(w.cfg.Stale) {
		case "free":
			rep.Free++
		case "alive":
			rep.Alive++
		case "stale":
			rep.Stale++
		case "unknown":
			rep.Unknown++
		case "dead":
			rep.Dead++
		case "corrupt":
			rep.Corrupt++
		}
	}
	w.noteDepartures(&rep)
	if apply {
		// Requeue first: a slot is freed only after its work is back.
		// Every queue is repaired even when no participant of the table
		// is dead: a process may die after attaching to a queue and
		// before registering here, and only the queue's own table knows.
		for _, q := range w.cfg.Queues {
			w.repair(&rep, q)
		}
	}
	for _, p := range rep.Participants {
		if p.Health(0) == "dead" {
			rep.Decisions = append(rep.Decisions, w.reclaim(&rep, p, apply))
		}
	}
	for _, p := range rep.Participants {
		if p.Health(0) == "dead" && !w.known[p.Slot].deadReported && !reclaimedIn(rep, p.Slot) {
			w.publish(&rep, ExitEvent{PID: p.ID.PID, ID: p.ID, Slot: p.Slot, Reason: ExitFoundDead, Detail: p.Verdict.Reason})
			s := w.known[p.Slot]
			s.deadReported = true
			w.known[p.Slot] = s
		}
	}
	return rep
}

func reclaimedIn(rep WatchReport, slot int) bool {
	for _, p := range rep.Reclaimed {
		if p.Slot == slot {
			return true
		}
	}
	return false
}

func (w *Watchdog) repair(rep *WatchReport, q Repairable) {
	qr := QueueRepair{Path: q.Path(), ID: q.ID()}
	res, err := q.Repair()
	qr.Report = res
	if err != nil {
		qr.Err = err.Error()
		rep.Problems = append(rep.Problems, fmt.Sprintf("ring %s: %v", q.Path(), err))
	} else {
		rep.repaired[q.ID()] = true
	}
	rep.QueueRepairs = append(rep.QueueRepairs, qr)
}

// reclaim judges a dead participant and, with apply, frees its slot once
// every queue it holds leases in has been repaired by this scan. A dry run
// only judges: a slot is kept when a lease is in a queue not given.
func (w *Watchdog) reclaim(rep *WatchReport, p Participant, apply bool) Decision {
	d := Decision{Participant: p, Action: ActionReclaim}
	h := w.hb
	ctl := h.ctl(uint64(p.Slot))
	c := layout.UnpackPeer(p.ctl)
	reclaiming := layout.PeerCtl{State: layout.HBReclaiming, Gen: c.Gen, PID: c.PID}.Pack()
	if apply && c.State != layout.HBReclaiming && !ctl.CompareAndSwap(p.ctl, reclaiming) {
		// Changed since the snapshot: another watchdog has it.
		d.Action, d.Why = ActionKeep, KeepSlotChanged
		return d
	}
	leases := p.Leases
	for _, ring := range p.HalfWritten {
		// Died inside RecordLease: the record names the lease's ring, which
		// must then be given and repaired like any other; or it names none
		// yet, and there is nothing to account for here: the lease is
		// requeued by its ring's own repair (the member's entry there is
		// dead too), which a freed slot cannot prevent.
		if ring != 0 {
			leases = append(leases, LeaseInfo{Ring: ring})
		}
	}
	for _, l := range leases {
		switch {
		case !rep.given[l.Ring]:
			d.Action, d.Why, d.Queue = ActionKeep, KeepQueueNotGiven, l.Ring
			if apply {
				rep.Problems = append(rep.Problems, fmt.Sprintf("slot %d (%s): lease in ring %016x, which this watchdog was not given: slot kept", p.Slot, p.ID, l.Ring))
			}
			return d
		case apply && !rep.repaired[l.Ring]:
			d.Action, d.Why, d.Queue = ActionKeep, KeepQueueNotRepaired, l.Ring
			rep.Problems = append(rep.Problems, fmt.Sprintf("slot %d (%s): ring %016x not repaired this scan: slot kept", p.Slot, p.ID, l.Ring))
			return d
		}
	}
	if !apply {
		return d
	}
	shm.CrashPoint(crashHbReclaimBeforeFree)
	exit := layout.LastExit{PID: c.PID, Reason: layout.ExitReclaimed, Gen: c.Gen}.Pack()
	h.area.U64(h.lay.SlotOff(uint64(p.Slot)) + layout.HBSlotLastExit).Store(exit)
	if !ctl.CompareAndSwap(reclaiming, layout.PeerCtl{State: layout.HBFree, Gen: c.Gen + 1}.Pack()) {
		return d // another watchdog freed it first, and published it
	}
	h.area.U64(layout.HBOffReclaimed).Add(1)
	d.Reclaimed = true
	rep.Reclaimed = append(rep.Reclaimed, p)
	w.publish(rep, ExitEvent{PID: p.ID.PID, ID: p.ID, Slot: p.Slot, Reason: ExitReclaimed, Detail: p.Verdict.Reason})
	// Published: the next scan starts from the free slot we left.
	w.known[p.Slot] = seenSlot{ctl: layout.PeerCtl{State: layout.HBFree, Gen: c.Gen + 1}.Pack()}
	return d
}

// noteDepartures publishes exits that happened between scans: slots whose
// participant unregistered, or was reclaimed by another watchdog, and
// participants that registered and left again between two scans (never
// seen by a scan: the slot's generation moved on, and its last-exit word
// names the one that left last).
func (w *Watchdog) noteDepartures(rep *WatchReport) {
	for _, p := range rep.Participants {
		before, seen := w.known[p.Slot]
		cur := layout.UnpackPeer(p.ctl)
		if cur.State > layout.HBReclaiming {
			delete(w.known, p.Slot) // corrupt: left alone
			continue
		}
		if seen && before.ctl != p.ctl {
			prev := layout.UnpackPeer(before.ctl)
			// Generations from here on left without this watchdog
			// publishing their departure.
			from := prev.Gen
			if prev.State != layout.HBFree && (prev.Gen != cur.Gen || cur.State == layout.HBFree) {
				// The member the last scan saw has left. (The same member
				// moving claiming -> active -> reclaiming has not.)
				id := shm.ProcessID{PID: int32(prev.PID)}
				if before.id.PID == id.PID {
					id = before.id
				}
				ev := ExitEvent{PID: id.PID, ID: id, Slot: p.Slot, Reason: ExitUnknown, Detail: "slot reused before this scan"}
				if p.LastExit.PID == prev.PID && p.LastExit.Gen == prev.Gen {
					ev.Reason, ev.Detail = exitReason(p.LastExit.Reason)
				}
				w.publish(rep, ev)
				before.deadReported = false
				from = prev.Gen + 1
			}
			if le := p.LastExit; le.Reason != 0 && genIn(le.Gen, from, cur.Gen) {
				// A member no scan saw: it registered at generation
				// le.Gen (>= from) and left before cur.Gen.
				// Its start time was never read: the outcome's ID has none.
				ev := ExitEvent{PID: int32(le.PID), ID: shm.ProcessID{PID: int32(le.PID)}, Slot: p.Slot}
				ev.Reason, ev.Detail = exitReason(le.Reason)
				ev.Detail = join(ev.Detail, "registered and left between two scans")
				if skipped := (le.Gen - from) & genMask; skipped > 0 {
					ev.Detail = join(ev.Detail, fmt.Sprintf("%d earlier occupants of the slot left unrecorded", skipped))
				}
				w.publish(rep, ev)
			}
		}
		// Every slot is remembered, free ones too: a free slot's
		// generation is how the next scan sees who came and went.
		s := seenSlot{ctl: p.ctl, deadReported: seen && before.deadReported}
		if cur.State == layout.HBActive || cur.State == layout.HBReclaiming {
			s.id = p.ID
		}
		w.known[p.Slot] = s
	}
}

const genMask = 0xffffff // slot generations are 24 bits

// genIn reports whether generation g is in [from, to), modulo 2^24.
func genIn(g, from, to uint32) bool {
	return (g-from)&genMask < (to-from)&genMask
}

// exitReason maps a last-exit word's reason to an event's.
func exitReason(r uint8) (ExitReason, string) {
	switch r {
	case layout.ExitUnregistered:
		return ExitUnregistered, ""
	case layout.ExitReclaimed:
		return ExitReclaimed, "reclaimed by another watchdog"
	}
	return ExitUnknown, fmt.Sprintf("last-exit reason %d", r)
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func (w *Watchdog) publish(rep *WatchReport, e ExitEvent) {
	rep.Events = append(rep.Events, e)
	if w.cfg.Events != nil {
		w.cfg.Events.Publish(e)
	}
}
