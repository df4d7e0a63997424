package transport

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// The participant table records every process attached to a ring (pid,
// start time, boot), so that owner stamps in slot words can be proven dead
// from the ring file alone, after every process is gone.

type peerEntry struct {
	ctl, start, boot, attached *atomic.Uint64
}

func (r *Ring) peer(i uint64) peerEntry {
	off := r.lay.ParticipantOff(i)
	return peerEntry{ctl: r.area.U64(off), start: r.area.U64(off + 8), boot: r.area.U64(off + 16), attached: r.area.U64(off + 24)}
}

// attach takes a free participant entry. When none is free it takes over
// the entry of a process proven dead, first recovering in place whatever
// that process left in the ring (no Repair: an unattached handle cannot
// stamp slots, and the repair role needs a participant).
func (r *Ring) attach() error {
	if r.tryAttach() || r.takeOverDead() {
		return nil
	}
	return fmt.Errorf("%w: %s: all %d entries belong to live processes", ErrTooManyPeers, r.Path(), r.lay.Participants)
}

func (r *Ring) tryAttach() bool {
	for i := uint64(0); i < r.lay.Participants; i++ {
		e := r.peer(i)
		v := e.ctl.Load()
		if c := layout.UnpackPeer(v); c.State == layout.PeerFree && r.claimEntry(i, v, c.Gen) {
			return true
		}
	}
	return false
}

// takeOverDead claims the entry of a dead participant (claiming or active;
// entries marked dead belong to a Repair in progress). While the entry is
// ours but still "claiming", every slot stamped with its index is the dead
// process's: each is recovered without a push (an unattached handle has no
// stamp to push with). If one cannot be (a lease, or a read that no
// producer waits on), the entry is handed to Repair instead (marked dead)
// and the next one is tried.
func (r *Ring) takeOverDead() bool {
	for i := uint64(0); i < r.lay.Participants; i++ {
		ps, v := r.peerStatus(i)
		c := layout.UnpackPeer(v)
		if !ps.Dead || (c.State != layout.PeerActive && c.State != layout.PeerClaiming) {
			continue
		}
		if r.claimEntry(i, v, c.Gen+1) {
			return true
		}
	}
	return false
}

// claimEntry moves entry i from word v to claiming (generation gen),
// records our identity, recovers any slot still stamped with the entry's
// index (left by an earlier owner proven dead), and activates it.
func (r *Ring) claimEntry(i, v uint64, gen uint32) bool {
	self := shm.Self()
	e := r.peer(i)
	claiming := layout.PeerCtl{State: layout.PeerClaiming, Gen: gen, PID: uint32(self.PID)}.Pack()
	if !e.ctl.CompareAndSwap(v, claiming) {
		return false
	}
	e.start.Store(self.Start)
	e.boot.Store(r.boot)
	e.attached.Store(uint64(time.Now().UnixNano()))
	shm.CrashPoint("ring.attach.after-claim-entry")
	stamp := uint16(i + 1)
	for s := uint64(0); s < r.lay.Capacity; s++ {
		raw := r.slotWord(s).Load()
		sw := layout.UnpackSlot(raw)
		if sw.Owner != stamp || sw.Validate(&r.lay) != nil {
			continue
		}
		if r.recoverWithoutPush(s, raw, sw) == recoveredDeferred {
			// Leave it to Repair, which can push a copy.
			e.ctl.CompareAndSwap(claiming, layout.PeerCtl{State: layout.PeerDead, Gen: gen, PID: uint32(self.PID)}.Pack())
			r.deferred.Add(1)
			return false
		}
	}
	// A dead owner of this entry may have held the repair role.
	r.repairLock.CompareAndSwap(lockValue(stamp, layout.UnpackPeer(v).Gen), 0)
	active := layout.PeerCtl{State: layout.PeerActive, Gen: gen, PID: uint32(self.PID)}.Pack()
	if !e.ctl.CompareAndSwap(claiming, active) {
		// Only a repairer that proved our pid gone could change it:
		// impossible while we run.
		return false
	}
	r.self, r.selfCtl = stamp, active
	return true
}

// detach hands this participant's leases back to the ring and frees its
// entry. Slots it is writing or reading cannot exist: Close comes after
// every other call has returned.
func (r *Ring) detach() error {
	me := r.self
	var firstErr error
	deferred := false
	for i := uint64(0); i < r.lay.Capacity; i++ {
		w := r.slotWord(i)
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		if sw.Owner != me || sw.Validate(&r.lay) != nil {
			continue
		}
		what, err := r.recoverSlot(i, raw, sw)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		deferred = deferred || what == recoveredDeferred || err != nil
	}
	e := r.peer(uint64(me - 1))
	c := layout.UnpackPeer(r.selfCtl)
	next := layout.PeerCtl{State: layout.PeerFree, Gen: c.Gen + 1}
	if deferred {
		// Leases we could not queue again (no room) stay stamped with
		// our entry: mark it dead so a later Repair requeues them.
		next = layout.PeerCtl{State: layout.PeerDead, Gen: c.Gen, PID: c.PID}
		r.deferred.Add(1)
	}
	e.ctl.CompareAndSwap(r.selfCtl, next.Pack())
	r.self = 0
	return firstErr
}

// PeerStatus says what the ring file knows of one participant entry.
type PeerStatus struct {
	Index    int
	State    string // free, claiming, active, dead
	ID       shm.ProcessID
	Attached time.Time
	Proc     shm.ProcState // liveness of ID, for claiming/active/dead entries
	Dead     bool          // proven dead: the entry's slots may be repaired
	Reason   string        // why it is judged dead or alive
	Self     bool          // this handle
}

// peerStatus judges entry i. It acts on nothing; a dead verdict is a proof
// (pid gone, zombie, pid reused, or a different boot), never a timeout.
func (r *Ring) peerStatus(i uint64) (PeerStatus, uint64) {
	e := r.peer(i)
	v := e.ctl.Load()
	c := layout.UnpackPeer(v)
	ps := PeerStatus{Index: int(i), State: layout.PeerStateName(c.State), ID: shm.ProcessID{PID: int32(c.PID), Start: e.start.Load()}}
	if ns := e.attached.Load(); ns != 0 {
		ps.Attached = time.Unix(0, int64(ns))
	}
	ps.Self = r.self == uint16(i+1)
	switch c.State {
	case layout.PeerFree:
		return ps, v
	case layout.PeerClaiming, layout.PeerActive, layout.PeerDead:
	default:
		ps.Reason = "corrupt state"
		return ps, v
	}
	verdict := shm.Judge(int32(c.PID), ps.ID.Start, e.boot.Load(), c.State != layout.PeerClaiming)
	ps.Proc, ps.Dead, ps.Reason = verdict.State, verdict.Dead, verdict.Reason
	if c.State == layout.PeerDead {
		ps.Dead = true // a repair already proved it; finishing is idempotent
	}
	return ps, v
}

// Peers reports every participant entry.
func (r *Ring) Peers() []PeerStatus {
	out := make([]PeerStatus, r.lay.Participants)
	for i := range out {
		out[i], _ = r.peerStatus(uint64(i))
	}
	return out
}
