package transport

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// The participant table records every process attached to a file (pid,
// start time, boot), so that owner stamps in slot, bucket or lock words can
// be proven dead from the file alone, after every process is gone. The
// ring, the deque and the hash map each keep one (layout.PeerEntrySize
// bytes per entry) and share this code; what a takeover or a detach must
// recover is the kind's business and is passed in.

type peerEntry struct {
	ctl, start, boot, attached *atomic.Uint64
}

// peerTable is one handle's view of a participant table and of the repair
// lock word that goes with it.
type peerTable struct {
	area    shm.Words
	off     uint64 // area offset of entry 0
	n       uint64 // entries
	lock    *atomic.Uint64
	path    string
	boot    uint64 // our boot tag
	self    uint16 // our entry's index + 1; 0 when not attached
	selfCtl uint64 // our entry's control word, to detach exactly
}

func newPeerTable(area shm.Words, off, n uint64, lock *atomic.Uint64, path string) peerTable {
	return peerTable{area: area, off: off, n: n, lock: lock, path: path, boot: shm.BootTag()}
}

func (t *peerTable) entry(i uint64) peerEntry {
	off := t.off + i*layout.PeerEntrySize
	return peerEntry{ctl: t.area.U64(off), start: t.area.U64(off + 8), boot: t.area.U64(off + 16), attached: t.area.U64(off + 24)}
}

// reclaimFunc recovers, without a repair, whatever an earlier owner proven
// dead left stamped with stamp (roles it held carry lockValue(stamp,
// prevGen)). It returns false to hand the rest to a Repair instead: the
// entry is then marked dead and the next one is tried.
type reclaimFunc func(stamp uint16, prevGen uint32) bool

// attach takes a free entry. When none is free it takes over the entry of
// a process proven dead, first letting reclaim recover what that process
// left behind.
func (t *peerTable) attach(reclaim reclaimFunc) error {
	if t.tryAttach(reclaim) || t.takeOverDead(reclaim) {
		return nil
	}
	return fmt.Errorf("%w: %s: all %d entries belong to live processes", ErrTooManyPeers, t.path, t.n)
}

func (t *peerTable) tryAttach(reclaim reclaimFunc) bool {
	for i := uint64(0); i < t.n; i++ {
		v := t.entry(i).ctl.Load()
		if c := layout.UnpackPeer(v); c.State == layout.PeerFree && t.claimEntry(i, v, c.Gen, reclaim) {
			return true
		}
	}
	return false
}

// takeOverDead claims the entry of a dead participant (claiming or active;
// entries marked dead belong to a Repair in progress).
func (t *peerTable) takeOverDead(reclaim reclaimFunc) bool {
	for i := uint64(0); i < t.n; i++ {
		ps, v := t.status(i)
		c := layout.UnpackPeer(v)
		if !ps.Dead || (c.State != layout.PeerActive && c.State != layout.PeerClaiming) {
			continue
		}
		if t.claimEntry(i, v, c.Gen+1, reclaim) {
			return true
		}
	}
	return false
}

// claimEntry moves entry i from word v to claiming (generation gen),
// records our identity, lets reclaim recover anything still stamped with
// the entry (left by an earlier owner proven dead), and activates it.
// While the entry is ours but still "claiming", nothing can be stamped
// with it but by that dead owner.
func (t *peerTable) claimEntry(i, v uint64, gen uint32, reclaim reclaimFunc) bool {
	self := shm.Self()
	e := t.entry(i)
	claiming := layout.PeerCtl{State: layout.PeerClaiming, Gen: gen, PID: uint32(self.PID)}.Pack()
	if !e.ctl.CompareAndSwap(v, claiming) {
		return false
	}
	e.start.Store(self.Start)
	e.boot.Store(t.boot)
	e.attached.Store(uint64(time.Now().UnixNano()))
	shm.CrashPoint("peers.attach.after-claim-entry")
	stamp := uint16(i + 1)
	if !reclaim(stamp, layout.UnpackPeer(v).Gen) {
		e.ctl.CompareAndSwap(claiming, layout.PeerCtl{State: layout.PeerDead, Gen: gen, PID: uint32(self.PID)}.Pack())
		return false
	}
	// A dead owner of this entry may have held the repair role.
	t.lock.CompareAndSwap(lockValue(stamp, layout.UnpackPeer(v).Gen), 0)
	active := layout.PeerCtl{State: layout.PeerActive, Gen: gen, PID: uint32(self.PID)}.Pack()
	if !e.ctl.CompareAndSwap(claiming, active) {
		// Only a repairer that proved our pid gone could change it:
		// impossible while we run.
		return false
	}
	t.self, t.selfCtl = stamp, active
	return true
}

// release frees our entry, or, when keep is set (things stamped with it
// are left for a later Repair), marks it dead so a Repair finishes them.
func (t *peerTable) release(keep bool) {
	e := t.entry(uint64(t.self - 1))
	c := layout.UnpackPeer(t.selfCtl)
	next := layout.PeerCtl{State: layout.PeerFree, Gen: c.Gen + 1}
	if keep {
		next = layout.PeerCtl{State: layout.PeerDead, Gen: c.Gen, PID: c.PID}
	}
	e.ctl.CompareAndSwap(t.selfCtl, next.Pack())
	t.self = 0
}

// PeerStatus says what a file knows of one participant entry.
type PeerStatus struct {
	Index    int
	State    string // free, claiming, active, dead
	ID       shm.ProcessID
	Attached time.Time
	Proc     shm.ProcState // liveness of ID, for claiming/active/dead entries
	Dead     bool          // proven dead: what it owns may be repaired
	Reason   string        // why it is judged dead or alive
	Self     bool          // this handle
}

// status judges entry i. It acts on nothing; a dead verdict is a proof
// (pid gone, zombie, pid reused, or a different boot), never a timeout.
func (t *peerTable) status(i uint64) (PeerStatus, uint64) {
	e := t.entry(i)
	v := e.ctl.Load()
	c := layout.UnpackPeer(v)
	ps := PeerStatus{Index: int(i), State: layout.PeerStateName(c.State), ID: shm.ProcessID{PID: int32(c.PID), Start: e.start.Load()}}
	if ns := e.attached.Load(); ns != 0 {
		ps.Attached = time.Unix(0, int64(ns))
	}
	ps.Self = t.self == uint16(i+1)
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

// all reports every entry.
func (t *peerTable) all() []PeerStatus {
	out := make([]PeerStatus, t.n)
	for i := range out {
		out[i], _ = t.status(uint64(i))
	}
	return out
}

// stampDead reports whether the participant a stamp names is proven dead.
func (t *peerTable) stampDead(stamp uint16) bool {
	if stamp == 0 || uint64(stamp) > t.n {
		return false
	}
	ps, _ := t.status(uint64(stamp - 1))
	return ps.Dead
}

// markDead proves deaths for a repair: every claiming or active entry of a
// dead process is marked dead (so an interrupted repair is finished by the
// next one), and entries already marked dead are included. It returns the
// dead set, indexed by entry, and the reports of its members.
func (t *peerTable) markDead() (dead []bool, reports []PeerStatus) {
	dead = make([]bool, t.n)
	for i := uint64(0); i < t.n; i++ {
		ps, v := t.status(i)
		if !ps.Dead || ps.Self {
			continue
		}
		c := layout.UnpackPeer(v)
		switch c.State {
		case layout.PeerClaiming, layout.PeerActive:
			// A dead claimer may have been taking over an entry whose
			// slots it had not finished recovering: treat both alike.
			c.State = layout.PeerDead
			if t.entry(i).ctl.CompareAndSwap(v, c.Pack()) {
				dead[i] = true
				reports = append(reports, ps)
			}
		case layout.PeerDead:
			dead[i] = true
			reports = append(reports, ps)
		}
	}
	return dead, reports
}

// freeDead frees the dead entries nothing refers to any more (keep marks
// those that still own something) and returns the ones it freed, with the
// control word each had.
func (t *peerTable) freeDead(dead, keep []bool) []freedEntry {
	var freed []freedEntry
	for i := uint64(0); i < t.n; i++ {
		if !dead[i] || keep[i] {
			continue
		}
		e := t.entry(i)
		v := e.ctl.Load()
		if c := layout.UnpackPeer(v); c.State == layout.PeerDead {
			if e.ctl.CompareAndSwap(v, layout.PeerCtl{State: layout.PeerFree, Gen: c.Gen + 1}.Pack()) {
				freed = append(freed, freedEntry{index: int(i), ctl: v})
			}
		}
	}
	return freed
}

type freedEntry struct {
	index int
	ctl   uint64
}

// freedFindings are a repair's findings for the entries it freed. base is
// the file offset of the kind's area; reports are the dead participants'
// statuses (markDead's).
func (t *peerTable) freedFindings(base uint64, freed []freedEntry, reports []PeerStatus) []Finding {
	out := make([]Finding, 0, len(freed))
	for _, e := range freed {
		f := Finding{Problem: ProblemDeadParticipant, Location: fmt.Sprintf("participant[%d].ctl", e.index),
			Offset: base + t.off + uint64(e.index)*layout.PeerEntrySize, Raw: e.ctl, Owner: e.index, Dead: true,
			Action: ActionFreeEntry, Detail: fmt.Sprintf("pid %d proven dead: marked dead, then freed", layout.UnpackPeer(e.ctl).PID)}
		for _, p := range reports {
			if p.Index == e.index {
				f.OwnerID, f.Verdict = p.ID, p.Reason
				f.Detail = fmt.Sprintf("%s, proven dead (%s): marked dead, then freed", p.ID, p.Reason)
			}
		}
		out = append(out, f)
	}
	return out
}

// lockTakeover is a repair's finding for taking the repair lock over from
// the word prev (lockLoc at area offset lockOff, base the area's file
// offset); peers are the participants' statuses.
func (t *peerTable) lockTakeover(base uint64, lockLoc string, lockOff uint64, prev uint64) Finding {
	f := Finding{Problem: ProblemRepairLock, Location: lockLoc, Offset: base + lockOff, Raw: prev, Owner: -1, Action: ActionTakeOverLock}
	if layout.ValidateRole(prev, t.n) != nil {
		f.Detail = fmt.Sprintf("word %#016x named no entry of the table of %d participants: taken over", prev, t.n)
		return f
	}
	r := layout.UnpackRole(prev)
	p, _ := t.status(uint64(r.Index()))
	f.Owner, f.OwnerID, f.Verdict, f.Dead = r.Index(), p.ID, p.Reason, p.Dead
	if p.Dead {
		f.Detail = fmt.Sprintf("held by participant %d, %s, proven dead (%s): taken over", r.Index(), p.ID, p.Reason)
	} else {
		f.Detail = fmt.Sprintf("held by participant %d at generation %d, an entry freed or taken since: taken over", r.Index(), r.Gen)
	}
	return f
}

// lockValue is the role word (layout.Role) of a holder: its entry's stamp
// and the entry's generation. The generation makes takeover exact: a lock
// naming an entry that has since been freed and taken again is not that
// entry's new owner's lock.
func lockValue(stamp uint16, gen uint32) uint64 { return layout.Role{Stamp: stamp, Gen: gen}.Pack() }

func (t *peerTable) myLock() uint64 { return lockValue(t.self, layout.UnpackPeer(t.selfCtl).Gen) }

// lockRepair takes the repairer role, replacing a holder proven dead (or
// whose entry has since been reused, which happens only after its death).
func (t *peerTable) lockRepair() bool {
	return t.takeRole(t.lock)
}

// lockRepairFrom is lockRepair that also returns the word it replaced: 0
// when the role was free, else the word of the holder taken over (proven
// dead, its entry reused since, or corrupt).
func (t *peerTable) lockRepairFrom() (prev uint64, ok bool) { return t.takeRoleFrom(t.lock) }

func (t *peerTable) unlockRepair() { t.lock.CompareAndSwap(t.myLock(), 0) }

// takeRole takes a role word (the repair lock, a deque's owner word) that
// holds lockValue of its holder: free, or held by a holder proven dead, or
// corrupt. A live holder keeps it.
func (t *peerTable) takeRole(w *atomic.Uint64) bool {
	_, ok := t.takeRoleFrom(w)
	return ok
}

// takeRoleFrom is takeRole that also returns the word it replaced (0 when
// the role was free).
func (t *peerTable) takeRoleFrom(w *atomic.Uint64) (prev uint64, ok bool) {
	mine := t.myLock()
	for {
		v := w.Load()
		if v == 0 {
			if w.CompareAndSwap(0, mine) {
				return 0, true
			}
			continue
		}
		if v == mine {
			return 0, false // this handle holds it already (re-entry)
		}
		if t.holderAlive(v) {
			return 0, false
		}
		// Corrupt, dead, or an entry reused since: take over, but only
		// from the exact word judged.
		if w.CompareAndSwap(v, mine) {
			return v, true
		}
	}
}

// holderAlive reports whether a role word names a live holder: its entry
// is active or being claimed, still has the generation the word records,
// and is not proven dead. A free entry holds nothing. A claiming entry may:
// a deque's attach that takes over a dead owner's entry repairs its bottom
// under the repair lock while the entry is still claiming (lockValue of
// the new generation), and nobody else may repair meanwhile. A claim never
// revives a word stamped with an earlier generation.
func (t *peerTable) holderAlive(v uint64) bool {
	if v == 0 || layout.ValidateRole(v, t.n) != nil {
		return false
	}
	r := layout.UnpackRole(v)
	ps, ctl := t.status(uint64(r.Index()))
	c := layout.UnpackPeer(ctl)
	return (c.State == layout.PeerActive || c.State == layout.PeerClaiming) && c.Gen == r.Gen && !ps.Dead
}
