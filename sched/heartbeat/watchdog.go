package heartbeat

import (
	"fmt"
	"sync"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// ExitUnknown is published when a slot was reused between two scans, so
// how its earlier participant left is no longer recorded.
const ExitUnknown ExitReason = 0

// WatchdogConfig configures a failover watchdog.
type WatchdogConfig struct {
	// Stale is how long an alive participant may go without beating
	// before it is reported stale (never reclaimed). 0 disables it.
	Stale time.Duration
	// Rings are the rings whose leases dead participants are requeued
	// into. A dead participant holding a lease in a ring not listed here
	// is reported, and its slot is kept until a watchdog that has the ring
	// reclaims it.
	Rings []*transport.Ring
	// Queues are further transports repaired likewise (deques, or rings
	// behind the transport.Queue interface).
	Queues []Repairable
	// Events, if set, receives an exit event when a participant's exit is
	// final (it unregistered, or was reclaimed); a participant proven dead
	// that cannot be reclaimed yet is announced as ExitFoundDead first.
	Events *ExitEvents
}

// Repairable is a transport file a watchdog can repair: the ring and the
// deque are.
type Repairable interface {
	ID() uint64
	Path() string
	Repair() (transport.RepairReport, error)
}

// repairables lists every transport the watchdog was given.
func (c WatchdogConfig) repairables() []Repairable {
	out := make([]Repairable, 0, len(c.Rings)+len(c.Queues))
	for _, r := range c.Rings {
		out = append(out, r)
	}
	return append(out, c.Queues...)
}

// Watchdog finds dead and stale participants of a heartbeat table and
// reclaims the dead: their leases go back to their rings (at-least-once)
// and their slots are freed. Scans from several watchdogs, in several
// processes, may run at once: every change is a CAS from the exact word a
// scan observed, and requeueing goes through each ring's Repair, which
// admits one repairer at a time and never requeues a message twice.
type Watchdog struct {
	hb  *Table
	cfg WatchdogConfig

	mu    sync.Mutex
	known map[int]seenSlot // what the last scan saw in each slot
}

type seenSlot struct {
	ctl          uint64
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
	Dead         int
	Free         int
	Corrupt      int             // slots in a state the format does not define: left alone
	Reclaimed    []Participant   // dead participants whose slots this scan freed
	RingRepairs  []RingRepair    // what each ring's repair did
	Problems     []string        // what could not be done, and why
	Events       []ExitEvent     // exit events this scan published
	StaleAfter   time.Duration   // the stale threshold used
	Applied      bool            // false for a dry run
	ringsByID    map[uint64]bool // rings this watchdog can repair
	ringRepaired map[uint64]bool
}

// RingRepair is the outcome of one ring's repair during a scan.
type RingRepair struct {
	Path   string
	ID     uint64
	Report transport.RepairReport
	Err    string
}

// Scan classifies every participant and, when apply is true, reclaims the
// dead ones. Stale participants that are alive are only reported. What
// could not be done is listed in the report's Problems.
func (w *Watchdog) Scan(apply bool) WatchReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	rep := WatchReport{Table: w.hb.Path(), StaleAfter: w.cfg.Stale, Applied: apply,
		ringsByID: map[uint64]bool{}, ringRepaired: map[uint64]bool{}}
	for _, r := range w.cfg.repairables() {
		rep.ringsByID[r.ID()] = true
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
		case "dead":
			rep.Dead++
		case "corrupt":
			rep.Corrupt++
		}
	}
	w.noteDepartures(&rep)
	if apply {
		// Requeue first: a slot is freed only after its work is back.
		// Every ring is repaired even when no participant of the table
		// is dead: a process may die after attaching to a ring and
		// before registering here, and only the ring's own table knows.
		for _, r := range w.cfg.repairables() {
			w.repairRing(&rep, r)
		}
	}
	for _, p := range rep.Participants {
		if apply && p.Health(0) == "dead" {
			w.reclaim(&rep, p)
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

func (w *Watchdog) repairRing(rep *WatchReport, r Repairable) {
	rr := RingRepair{Path: r.Path(), ID: r.ID()}
	res, err := r.Repair()
	rr.Report = res
	if err != nil {
		rr.Err = err.Error()
		rep.Problems = append(rep.Problems, fmt.Sprintf("ring %s: %v", r.Path(), err))
	} else {
		rep.ringRepaired[r.ID()] = true
	}
	rep.RingRepairs = append(rep.RingRepairs, rr)
}

// reclaim frees a dead participant's slot once every ring it holds leases
// in has been repaired by this scan.
func (w *Watchdog) reclaim(rep *WatchReport, p Participant) {
	h := w.hb
	ctl := h.ctl(uint64(p.Slot))
	c := layout.UnpackPeer(p.ctl)
	reclaiming := layout.PeerCtl{State: layout.HBReclaiming, Gen: c.Gen, PID: c.PID}.Pack()
	if c.State != layout.HBReclaiming && !ctl.CompareAndSwap(p.ctl, reclaiming) {
		return // changed since the snapshot: another watchdog has it
	}
	for _, l := range p.Leases {
		switch {
		case !rep.ringsByID[l.Ring]:
			rep.Problems = append(rep.Problems, fmt.Sprintf("slot %d (%s): lease in ring %016x, which this watchdog was not given: slot kept", p.Slot, p.ID, l.Ring))
			return
		case !rep.ringRepaired[l.Ring]:
			rep.Problems = append(rep.Problems, fmt.Sprintf("slot %d (%s): ring %016x not repaired this scan: slot kept", p.Slot, p.ID, l.Ring))
			return
		}
	}
	shm.CrashPoint("hb.reclaim.before-free")
	exit := layout.LastExit{PID: c.PID, Reason: layout.ExitReclaimed, Gen: c.Gen}.Pack()
	h.area.U64(h.lay.SlotOff(uint64(p.Slot)) + layout.HBSlotLastExit).Store(exit)
	if !ctl.CompareAndSwap(reclaiming, layout.PeerCtl{State: layout.HBFree, Gen: c.Gen + 1}.Pack()) {
		return // another watchdog freed it first, and published it
	}
	h.area.U64(layout.HBOffReclaimed).Add(1)
	rep.Reclaimed = append(rep.Reclaimed, p)
	w.publish(rep, ExitEvent{PID: p.ID.PID, ID: p.ID, Slot: p.Slot, Reason: ExitReclaimed, Detail: p.Verdict.Reason})
	delete(w.known, p.Slot)
}

// noteDepartures publishes exits that happened between scans: slots whose
// participant unregistered, or was reclaimed by another watchdog.
func (w *Watchdog) noteDepartures(rep *WatchReport) {
	for _, p := range rep.Participants {
		before, seen := w.known[p.Slot]
		if seen && before.ctl != p.ctl {
			prev := layout.UnpackPeer(before.ctl)
			ev := ExitEvent{PID: int32(prev.PID), Slot: p.Slot, Reason: ExitUnknown, Detail: "slot reused before this scan"}
			if p.LastExit.PID == prev.PID && p.LastExit.Gen == prev.Gen {
				switch p.LastExit.Reason {
				case layout.ExitUnregistered:
					ev.Reason, ev.Detail = ExitUnregistered, ""
				case layout.ExitReclaimed:
					ev.Reason, ev.Detail = ExitReclaimed, "reclaimed by another watchdog"
				}
			}
			// Same participant moving claiming -> active -> reclaiming is
			// not a departure.
			if prev.Gen != p.Gen || p.State == "free" {
				w.publish(rep, ev)
				delete(w.known, p.Slot)
				seen = false
			}
		}
		if p.State == "active" || p.State == "reclaiming" {
			s := w.known[p.Slot]
			s.ctl = p.ctl
			w.known[p.Slot] = s
		} else if !seen {
			delete(w.known, p.Slot)
		}
	}
}

func (w *Watchdog) publish(rep *WatchReport, e ExitEvent) {
	rep.Events = append(rep.Events, e)
	if w.cfg.Events != nil {
		w.cfg.Events.Publish(e)
	}
}
