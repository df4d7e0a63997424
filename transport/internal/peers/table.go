package peers

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// ErrTooManyPeers is transport.ErrTooManyPeers (the same value): every
// entry of the table belongs to a live process.
var ErrTooManyPeers = errors.New("transport: participant table full")

// Entry is the words of one participant entry.
type Entry struct {
	Ctl, Start, Boot, Attached *atomic.Uint64
}

// Table is one handle's view of a participant table and of the repair
// lock word that goes with it.
type Table struct {
	area    shm.Words
	off     uint64 // area offset of entry 0
	n       uint64 // entries
	lock    *atomic.Uint64
	path    string
	boot    uint64 // our boot tag
	Self    uint16 // our entry's index + 1; 0 when not attached
	selfCtl uint64 // our entry's control word, to detach exactly
}

// New is the table of n entries at area offset off, with its repair lock
// word, in the file at path. The handle is not attached (Self is 0).
func New(area shm.Words, off, n uint64, lock *atomic.Uint64, path string) Table {
	return Table{area: area, off: off, n: n, lock: lock, path: path, boot: shm.BootTag()}
}

// Entry returns the words of entry i; i must be below Len.
func (t *Table) Entry(i uint64) Entry {
	off := t.off + i*layout.PeerEntrySize
	return Entry{Ctl: t.area.U64(off), Start: t.area.U64(off + 8), Boot: t.area.U64(off + 16), Attached: t.area.U64(off + 24)}
}

// Len is the number of entries.
func (t *Table) Len() uint64 { return t.n }

// RepairLock is the repair lock word that goes with the table.
func (t *Table) RepairLock() *atomic.Uint64 { return t.lock }

// Boot is this process's boot tag, as Attach records it.
func (t *Table) Boot() uint64 { return t.boot }

// Reclaim recovers, without a repair, whatever an earlier owner proven
// dead left stamped with stamp (roles it held carry LockValue(stamp,
// prevGen)). It returns false to hand the rest to a Repair instead: the
// entry is then marked dead and the next one is tried.
type Reclaim func(stamp uint16, prevGen uint32) bool

// Attach takes a free entry. When none is free it takes over the entry of
// a process proven dead, first letting reclaim recover what that process
// left behind.
func (t *Table) Attach(reclaim Reclaim) error {
	if t.tryAttach(reclaim) || t.takeOverDead(reclaim) {
		return nil
	}
	return fmt.Errorf("%w: %s: all %d entries belong to live processes", ErrTooManyPeers, t.path, t.n)
}

func (t *Table) tryAttach(reclaim Reclaim) bool {
	for i := uint64(0); i < t.n; i++ {
		v := t.Entry(i).Ctl.Load()
		if c := layout.UnpackPeer(v); c.State == layout.PeerFree && t.claimEntry(i, v, c.Gen, reclaim) {
			return true
		}
	}
	return false
}

// takeOverDead claims the entry of a dead participant (claiming or active;
// entries marked dead belong to a Repair in progress).
func (t *Table) takeOverDead(reclaim Reclaim) bool {
	for i := uint64(0); i < t.n; i++ {
		ps, v := t.Status(i)
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
func (t *Table) claimEntry(i, v uint64, gen uint32, reclaim Reclaim) bool {
	self := shm.Self()
	e := t.Entry(i)
	claiming := layout.PeerCtl{State: layout.PeerClaiming, Gen: gen, PID: uint32(self.PID)}.Pack()
	if !e.Ctl.CompareAndSwap(v, claiming) {
		return false
	}
	e.Start.Store(self.Start)
	e.Boot.Store(t.boot)
	e.Attached.Store(uint64(time.Now().UnixNano()))
	shm.CrashPoint(CrashPeersAttachAfterClaimEntry)
	stamp := uint16(i + 1)
	if !reclaim(stamp, layout.UnpackPeer(v).Gen) {
		e.Ctl.CompareAndSwap(claiming, layout.PeerCtl{State: layout.PeerDead, Gen: gen, PID: uint32(self.PID)}.Pack())
		return false
	}
	// A dead owner of this entry may have held the repair role.
	t.lock.CompareAndSwap(LockValue(stamp, layout.UnpackPeer(v).Gen), 0)
	active := layout.PeerCtl{State: layout.PeerActive, Gen: gen, PID: uint32(self.PID)}.Pack()
	if !e.Ctl.CompareAndSwap(claiming, active) {
		// Only a repairer that proved our pid gone could change it:
		// impossible while we run.
		return false
	}
	t.Self, t.selfCtl = stamp, active
	return true
}

// Release frees our entry, or, when keep is set (things stamped with it
// are left for a later Repair), marks it dead so a Repair finishes them.
func (t *Table) Release(keep bool) {
	e := t.Entry(uint64(t.Self - 1))
	c := layout.UnpackPeer(t.selfCtl)
	next := layout.PeerCtl{State: layout.PeerFree, Gen: c.Gen + 1}
	if keep {
		next = layout.PeerCtl{State: layout.PeerDead, Gen: c.Gen, PID: c.PID}
	}
	e.Ctl.CompareAndSwap(t.selfCtl, next.Pack())
	t.Self = 0
}

// Status judges entry i. It acts on nothing; a dead verdict is a proof
// (pid gone, zombie, pid reused, or a different boot), never a timeout.
func (t *Table) Status(i uint64) (check.Peer, uint64) {
	e := t.Entry(i)
	v := e.Ctl.Load()
	c := layout.UnpackPeer(v)
	ps := check.Peer{Index: int(i), State: layout.PeerStateName(c.State), ID: shm.ProcessID{PID: int32(c.PID), Start: e.Start.Load()}}
	if ns := e.Attached.Load(); ns != 0 {
		ps.Attached = time.Unix(0, int64(ns))
	}
	ps.Self = t.Self == uint16(i+1)
	switch c.State {
	case layout.PeerFree:
		return ps, v
	case layout.PeerClaiming, layout.PeerActive, layout.PeerDead:
	default:
		ps.Reason = "corrupt state"
		return ps, v
	}
	verdict := shm.Judge(int32(c.PID), ps.ID.Start, e.Boot.Load(), c.State != layout.PeerClaiming)
	ps.Proc, ps.Dead, ps.Reason = verdict.State, verdict.Dead, verdict.Reason
	if c.State == layout.PeerDead {
		ps.Dead = true // a repair already proved it; finishing is idempotent
	}
	return ps, v
}

// All reports every entry.
func (t *Table) All() []check.Peer {
	out := make([]check.Peer, t.n)
	for i := range out {
		out[i], _ = t.Status(uint64(i))
	}
	return out
}

// StampDead reports whether the participant a stamp names is proven dead.
func (t *Table) StampDead(stamp uint16) bool {
	if stamp == 0 || uint64(stamp) > t.n {
		return false
	}
	ps, _ := t.Status(uint64(stamp - 1))
	return ps.Dead
}

// MarkDead proves deaths for a repair: every claiming or active entry of a
// dead process is marked dead (so an interrupted repair is finished by the
// next one), and entries already marked dead are included. It returns the
// dead set, indexed by entry, and the reports of its members.
func (t *Table) MarkDead() (dead []bool, reports []check.Peer) {
	dead = make([]bool, t.n)
	for i := uint64(0); i < t.n; i++ {
		ps, v := t.Status(i)
		if !ps.Dead || ps.Self {
			continue
		}
		c := layout.UnpackPeer(v)
		switch c.State {
		case layout.PeerClaiming, layout.PeerActive:
			// A dead claimer may have been taking over an entry whose
			// slots it had not finished recovering: treat both alike.
			c.State = layout.PeerDead
			if t.Entry(i).Ctl.CompareAndSwap(v, c.Pack()) {
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

// FreeDead frees the dead entries nothing refers to any more (keep marks
// those that still own something) and returns the ones it freed, with the
// control word each had.
func (t *Table) FreeDead(dead, keep []bool) []Freed {
	var freed []Freed
	for i := uint64(0); i < t.n; i++ {
		if !dead[i] || keep[i] {
			continue
		}
		e := t.Entry(i)
		v := e.Ctl.Load()
		if c := layout.UnpackPeer(v); c.State == layout.PeerDead {
			if e.Ctl.CompareAndSwap(v, layout.PeerCtl{State: layout.PeerFree, Gen: c.Gen + 1}.Pack()) {
				freed = append(freed, Freed{Index: int(i), Ctl: v})
			}
		}
	}
	return freed
}

// Freed is an entry FreeDead freed, with the control word it had.
type Freed struct {
	Index int
	Ctl   uint64
}

// FreedFindings are a repair's findings for the entries it freed. base is
// the file offset of the kind's area; reports are the dead participants'
// statuses (MarkDead's).
func (t *Table) FreedFindings(base uint64, freed []Freed, reports []check.Peer) []check.Finding {
	out := make([]check.Finding, 0, len(freed))
	for _, e := range freed {
		f := check.Finding{Problem: check.ProblemDeadParticipant, Location: fmt.Sprintf("participant[%d].ctl", e.Index),
			Offset: base + t.off + uint64(e.Index)*layout.PeerEntrySize, Raw: e.Ctl, Owner: e.Index, Dead: true,
			Action: check.ActionFreeEntry, Detail: fmt.Sprintf("pid %d proven dead: marked dead, then freed", layout.UnpackPeer(e.Ctl).PID)}
		for _, p := range reports {
			if p.Index == e.Index {
				f.OwnerID, f.Verdict = p.ID, p.Reason
				f.Detail = fmt.Sprintf("%s, proven dead (%s): marked dead, then freed", p.ID, p.Reason)
			}
		}
		out = append(out, f)
	}
	return out
}

// LockTakeover is a repair's finding for taking the repair lock over from
// the word prev (lockLoc at area offset lockOff, base the area's file
// offset); peers are the participants' statuses.
func (t *Table) LockTakeover(base uint64, lockLoc string, lockOff uint64, prev uint64) check.Finding {
	f := check.Finding{Problem: check.ProblemRepairLock, Location: lockLoc, Offset: base + lockOff, Raw: prev, Owner: -1, Action: check.ActionTakeOverLock}
	if layout.ValidateRole(prev, t.n) != nil {
		f.Detail = fmt.Sprintf("word %#016x named no entry of the table of %d participants: taken over", prev, t.n)
		return f
	}
	r := layout.UnpackRole(prev)
	p, _ := t.Status(uint64(r.Index()))
	f.Owner, f.OwnerID, f.Verdict, f.Dead = r.Index(), p.ID, p.Reason, p.Dead
	if p.Dead {
		f.Detail = fmt.Sprintf("held by participant %d, %s, proven dead (%s): taken over", r.Index(), p.ID, p.Reason)
	} else {
		f.Detail = fmt.Sprintf("held by participant %d at generation %d, an entry freed or taken since: taken over", r.Index(), r.Gen)
	}
	return f
}

// LockValue is the role word (layout.Role) of a holder: its entry's stamp
// and the entry's generation. The generation makes takeover exact: a lock
// naming an entry that has since been freed and taken again is not that
// entry's new owner's lock.
func LockValue(stamp uint16, gen uint32) uint64 { return layout.Role{Stamp: stamp, Gen: gen}.Pack() }

func (t *Table) MyLock() uint64 { return LockValue(t.Self, layout.UnpackPeer(t.selfCtl).Gen) }

// LockRepairFrom takes the repairer role, replacing a holder proven dead
// (or whose entry has since been reused, which happens only after its
// death), and returns the word it replaced: 0 when the role was free,
// else the word of the holder taken over (proven dead, its entry reused
// since, or corrupt).
func (t *Table) LockRepairFrom() (prev uint64, ok bool) { return t.TakeRoleFrom(t.lock) }

func (t *Table) UnlockRepair() { t.lock.CompareAndSwap(t.MyLock(), 0) }

// TakeRole takes a role word (the repair lock, a deque's owner word) that
// holds LockValue of its holder: free, or held by a holder proven dead, or
// corrupt. A live holder keeps it.
func (t *Table) TakeRole(w *atomic.Uint64) bool {
	_, ok := t.TakeRoleFrom(w)
	return ok
}

// TakeRoleFrom is TakeRole that also returns the word it replaced (0 when
// the role was free).
func (t *Table) TakeRoleFrom(w *atomic.Uint64) (prev uint64, ok bool) {
	mine := t.MyLock()
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
		if t.HolderAlive(v) {
			return 0, false
		}
		// Corrupt, dead, or an entry reused since: take over, but only
		// from the exact word judged.
		if w.CompareAndSwap(v, mine) {
			return v, true
		}
	}
}

// HolderAlive reports whether a role word names a live holder: its entry
// is active or being claimed, still has the generation the word records,
// and is not proven dead. A free entry holds nothing. A claiming entry may:
// a deque's attach that takes over a dead owner's entry repairs its bottom
// under the repair lock while the entry is still claiming (LockValue of
// the new generation), and nobody else may repair meanwhile. A claim never
// revives a word stamped with an earlier generation.
func (t *Table) HolderAlive(v uint64) bool {
	if v == 0 || layout.ValidateRole(v, t.n) != nil {
		return false
	}
	r := layout.UnpackRole(v)
	ps, ctl := t.Status(uint64(r.Index()))
	c := layout.UnpackPeer(ctl)
	return (c.State == layout.PeerActive || c.State == layout.PeerClaiming) && c.Gen == r.Gen && !ps.Dead
}

// Check reports the participant entries and the repair lock: entries
// whose words no operation writes, entries proven dead (or marked dead by a
// repair that has not finished), and a repair lock held by a dead or
// vanished holder or corrupt. base is the file offset of the kind's area
// (the header size), lockOff the lock word's offset in that area and
// lockLoc its name ("ring.repair_lock"). held(i) is how many things of
// entry i the findings before this list as orphaned (what a repair
// recovers before it frees the entry), and markedDead says why the kind
// can leave an entry marked dead.
func (t *Table) Check(base uint64, peers []check.Peer, lockLoc string, lockOff uint64, held func(i int) int, markedDead string) []check.Finding {
	var out []check.Finding
	for _, p := range peers {
		off := base + t.off + uint64(p.Index)*layout.PeerEntrySize
		loc := fmt.Sprintf("participant[%d].ctl", p.Index)
		raw := t.Entry(uint64(p.Index)).Ctl.Load()
		ctl := layout.UnpackPeer(raw)
		f := check.Finding{Location: loc, Offset: off, Raw: raw, Owner: p.Index, OwnerID: p.ID, Verdict: p.Reason, Dead: p.Dead, Action: check.ActionNone}
		switch {
		case ctl.State > layout.PeerDead:
			f.Problem, f.Detail = check.ProblemBadParticipant, fmt.Sprintf("entry state %d does not exist: left alone", ctl.State)
		case ctl.State == layout.PeerFree && ctl.PID != 0:
			f.Problem, f.Detail = check.ProblemBadParticipant, fmt.Sprintf("free entry with pid %d: left alone", ctl.PID)
		case ctl.State == layout.PeerFree:
			continue
		case ctl.State == layout.PeerDead || p.Dead:
			f.Problem, f.Action = check.ProblemDeadParticipant, check.ActionFreeEntry
			if ctl.State == layout.PeerDead {
				f.Detail = fmt.Sprintf("pid %d %s: a repair finishes it", ctl.PID, markedDead)
			} else {
				f.Detail = fmt.Sprintf("%s entry of %s, proven dead (%s): a repair marks it dead", p.State, p.ID, p.Reason)
			}
			switch n := held(p.Index); n {
			case 0:
				f.Detail += " and frees it: it holds nothing"
			case 1:
				f.Detail += " and frees it once the one thing it held (listed above) is recovered"
			default:
				f.Detail += fmt.Sprintf(" and frees it once the %d things it held (listed above) are recovered", n)
			}
		default:
			continue
		}
		out = append(out, f)
	}
	raw := t.lock.Load()
	if raw == 0 {
		return out
	}
	f := check.Finding{Problem: check.ProblemRepairLock, Location: lockLoc, Offset: base + lockOff, Raw: raw, Owner: -1, Action: check.ActionTakeOverLock}
	if err := layout.ValidateRole(raw, t.n); err != nil {
		f.Detail = fmt.Sprintf("word %#016x names no entry of the table of %d participants: the next repair takes it over", raw, t.n)
		out = append(out, f)
		return out
	}
	r := layout.UnpackRole(raw)
	p := peers[r.Index()]
	f.Owner, f.OwnerID, f.Verdict, f.Dead = r.Index(), p.ID, p.Reason, p.Dead
	ctl := layout.UnpackPeer(t.Entry(uint64(r.Index())).Ctl.Load())
	switch {
	case p.Dead:
		f.Detail = fmt.Sprintf("held by participant %d, %s, proven dead (%s): the next repair takes it over and finishes its work", r.Index(), p.ID, p.Reason)
	case ctl.Gen != r.Gen || ctl.State == layout.PeerFree:
		f.Detail = fmt.Sprintf("held by participant %d at generation %d, an entry freed since: the next repair takes it over", r.Index(), r.Gen)
	case ctl.State != layout.PeerActive && ctl.State != layout.PeerClaiming:
		// As HolderAlive judges: only an active or claiming entry holds.
		f.Detail = fmt.Sprintf("held by participant %d, whose entry is in state %d (no live holder): the next repair takes it over", r.Index(), ctl.State)
	default:
		return out // a live repairer at work
	}
	out = append(out, f)
	return out
}
