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
// entry of the table belongs to a live process (or to one whose work no
// repair could recover).
var ErrTooManyPeers = errors.New("transport: participant table full")

// ErrRepairBusy is transport.ErrRepairBusy (the same value).
var ErrRepairBusy = errors.New("transport: another live process is repairing the file")

// Entry is the words of one participant entry.
type Entry struct {
	Ctl, Start, Boot, Attached, PidNS *atomic.Uint64
}

// Table is one handle's view of a participant table and of the repair
// lock word that goes with it.
type Table struct {
	reg     *shm.Region
	area    shm.Words
	off     uint64 // area offset of entry 0
	fileOff uint64 // file offset of entry 0 (entry locks are taken there)
	n       uint64 // participants: entries 0..n-1; entry n is the repairer entry
	lock    *atomic.Uint64
	boot    uint64 // our boot tag
	Self    uint16 // our entry's index + 1; 0 when not attached
	selfCtl uint64 // our entry's control word, to detach exactly

	rs *repairerState // set while this handle holds the repairer entry (AsRepairer); a pointer, so that handles that embed a Table stay small
}

// repairerState is what a handle holding the repairer entry knows.
type repairerState struct {
	inherited bool       // taken over from a holder that died: what it stamped is dead
	prev      check.Peer // that holder, as its entry recorded it before we took it over
	prevCtl   uint64     // and the entry's control word then
	keepSelf  bool       // the repair left things stamped with the repairer entry
}

// inherited reports whether this handle holds the repairer entry taken
// over from a holder that died.
func (t *Table) inherited() bool { return t.rs != nil && t.rs.inherited }

// New is the table of n participants (layout.PeerEntries(n) entries) at
// area offset off of reg's kind area, with its repair lock word. The
// handle is not attached (Self is 0).
func New(reg *shm.Region, area shm.Words, off, n uint64, lock *atomic.Uint64) Table {
	return Table{reg: reg, area: area, off: off, fileOff: uint64(reg.Header().HeaderSize) + off, n: n, lock: lock, boot: shm.BootTag()}
}

// Entry returns the words of entry i; i must be below Len.
func (t *Table) Entry(i uint64) Entry {
	off := t.off + i*layout.PeerEntrySize
	return Entry{Ctl: t.area.U64(off + layout.PeerOffCtl), Start: t.area.U64(off + layout.PeerOffStart), Boot: t.area.U64(off + layout.PeerOffBoot),
		Attached: t.area.U64(off + layout.PeerOffAttached), PidNS: t.area.U64(off + layout.PeerOffPidNS)}
}

// Len is the number of entries, the repairer entry included.
func (t *Table) Len() uint64 { return layout.PeerEntries(t.n) }

// Participants is the number of entries processes attach to.
func (t *Table) Participants() uint64 { return t.n }

// RepairerIndex is the index of the repairer entry.
func (t *Table) RepairerIndex() uint64 { return t.n }

// RepairLock is the repair lock word that goes with the table.
func (t *Table) RepairLock() *atomic.Uint64 { return t.lock }

// Boot is this process's boot tag, as Attach records it.
func (t *Table) Boot() uint64 { return t.boot }

func (t *Table) entryFileOff(i uint64) uint64 { return t.fileOff + i*layout.PeerEntrySize }

// Recover frees entries of dead participants for an attach that found
// none free: the kind's repair, run as the repairer (AsRepairer). Attach
// counts the participant entries its report says it freed.
type Recover func() (check.RepairReport, error)

// Attach takes a free entry. When none is free and some belong to
// processes proven dead, recover (a repair as the repairer, which
// requeues what they held and frees them) runs, and Attach tries again.
// It waits, at most the region's AttachTimeout, on states that pass by
// themselves: an entry read free while another process holds its lock
// (claiming it, or releasing it), holders that released their lock but
// still run (dying), another live process repairing. An attach changes
// no entry but the one it takes (and the repairer entry, while recover
// runs): a failed one leaves the table as it found it.
func (t *Table) Attach(recover Recover) error {
	wait := t.reg.AttachTimeout()
	deadline := time.Now().Add(wait)
	backoff := time.Millisecond
	// pause waits a little longer each time, up to 50 ms, never past the
	// deadline; false once the deadline has passed.
	pause := func() bool {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(backoff, left))
		backoff = min(2*backoff, 50*time.Millisecond)
		return true
	}
	for {
		ok, err := t.tryAttach()
		if ok || err != nil {
			return err
		}
		c := t.census()
		if c.free > 0 {
			// An entry read free that tryAttach could not take: another
			// process holds its lock, claiming it (between its lock and
			// its word; it may be descheduled there) or releasing it
			// (between its word and its unlock). Or one was freed since
			// tryAttach looked. Look again after a pause.
			if !pause() {
				return t.fullErr(c, fmt.Sprintf("; %d read free but stayed locked by other processes (claiming or releasing them) for %v", c.free, wait))
			}
			continue
		}
		if c.dead == 0 && c.unknown > 0 {
			// Undecided entries are most often processes that are dying
			// right now (the kernel drops their locks before they become
			// zombies): a moment later they are proven dead.
			if !pause() {
				return t.fullErr(c, fmt.Sprintf(" (waited %v for them to be decided)", wait))
			}
			continue
		}
		if c.dead == 0 {
			return t.fullErr(c, "")
		}
		rep, err := recover()
		freed := 0 // participant entries: the repairer entry is no use to an attach
		for _, f := range rep.Done {
			if f.Action == check.ActionFreeEntry && f.Owner >= 0 && uint64(f.Owner) < t.n {
				freed++
			}
		}
		switch {
		case errors.Is(err, ErrRepairBusy):
			if !pause() {
				return t.fullErr(c, fmt.Sprintf("; a live repairer held the repair lock for %v", wait))
			}
			continue
		case err != nil:
			return fmt.Errorf("%w: %s: recovering dead participants' entries: %w", ErrTooManyPeers, t.reg.Path(), err)
		case freed == 0:
			if c2 := t.census(); c2.dead >= c.dead && c2.free == 0 {
				return t.fullErr(c, "; a repair could not recover what the dead ones hold")
			}
		}
		if !time.Now().Before(deadline) {
			return t.fullErr(c, fmt.Sprintf("; other processes kept taking the entries freed for this attach for %v", wait))
		}
	}
}

func (t *Table) fullErr(c census, why string) error {
	s := fmt.Sprintf("%s: %d entries: %d of live processes", t.reg.Path(), t.n, c.live)
	if c.unknown > 0 {
		s += fmt.Sprintf(", %d of processes that can be proven neither alive nor dead", c.unknown)
	}
	if c.dead > 0 {
		s += fmt.Sprintf(", %d of dead ones", c.dead)
	}
	return fmt.Errorf("%w: %s%s", ErrTooManyPeers, s, why)
}

// census is the participant entries (not the repairer entry) counted by
// verdict.
type census struct{ free, live, dead, unknown int }

func (t *Table) census() census {
	var c census
	for i := uint64(0); i < t.n; i++ {
		ps, _ := t.Status(i)
		switch {
		case ps.State == "free":
			c.free++
		case ps.Dead:
			c.dead++
		case ps.Unknown:
			c.unknown++
		default:
			c.live++
		}
	}
	return c
}

// tryAttach claims a free entry: lock first (so that a live claimer is
// never judged dead), then move the control word free -> claiming, record
// our identity, and activate.
func (t *Table) tryAttach() (bool, error) {
	for i := uint64(0); i < t.n; i++ {
		v := t.Entry(i).Ctl.Load()
		if c := layout.UnpackPeer(v); c.State != layout.PeerFree {
			continue
		}
		ok, err := t.claim(i, v, layout.UnpackPeer(v).Gen)
		if ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// claim locks entry i and moves it from word v to active at generation
// gen with our identity. false without an error: another process got
// there first.
func (t *Table) claim(i, v uint64, gen uint32) (bool, error) {
	off := t.entryFileOff(i)
	if err := t.reg.LockEntry(off, layout.PeerEntrySize); err != nil {
		if errors.Is(err, shm.ErrEntryLocked) {
			return false, nil // being claimed by another, or still held while its holder detaches
		}
		return false, err
	}
	self := shm.Self()
	e := t.Entry(i)
	claiming := layout.PeerCtl{State: layout.PeerClaiming, Gen: gen, PID: uint32(self.PID)}.Pack()
	if !e.Ctl.CompareAndSwap(v, claiming) {
		t.reg.UnlockEntry(off, layout.PeerEntrySize)
		return false, nil
	}
	e.Start.Store(self.Start)
	e.Boot.Store(t.boot)
	e.PidNS.Store(shm.PidNamespace())
	e.Attached.Store(uint64(time.Now().UnixNano()))
	shm.CrashPoint(CrashPeersAttachAfterClaimEntry)
	active := layout.PeerCtl{State: layout.PeerActive, Gen: gen, PID: uint32(self.PID)}.Pack()
	if !e.Ctl.CompareAndSwap(claiming, active) {
		// Only a judge that found our lock released could change it:
		// impossible while we hold it.
		t.reg.UnlockEntry(off, layout.PeerEntrySize)
		return false, nil
	}
	t.Self, t.selfCtl = uint16(i+1), active
	return true, nil
}

// Release frees our entry, or, when keep is set (things stamped with it
// are left for a later Repair), marks it dead so a Repair finishes them;
// then it drops the entry lock (the word first: a free or dead entry
// needs no proof of life).
func (t *Table) Release(keep bool) {
	i := uint64(t.Self - 1)
	e := t.Entry(i)
	c := layout.UnpackPeer(t.selfCtl)
	next := layout.PeerCtl{State: layout.PeerFree, Gen: c.Gen + 1}
	if keep {
		// Left for a repair, and we live on: record no process, so that
		// no check or repair calls us dead (closedReason).
		e.Start.Store(0)
		e.PidNS.Store(0)
		next = layout.PeerCtl{State: layout.PeerDead, Gen: c.Gen}
	}
	e.Ctl.CompareAndSwap(t.selfCtl, next.Pack())
	t.reg.UnlockEntry(t.entryFileOff(i), layout.PeerEntrySize)
	t.Self, t.selfCtl = 0, 0
}

// AsRepairer runs repair (the kind's repair, which takes the repair lock
// itself) as the holder of the repairer entry, for a handle without an
// entry of its own (an attached handle runs it as itself). The entry is
// locked and claimed like any other, so the repairer's death is proven as
// anyone's; if its previous holder died, this one takes it over and what
// that holder stamped is dead (MarkDead lists the entry). The entry is
// freed afterwards, or left marked dead when the repair left things
// stamped with it (FreeDead was told to keep it) or failed, for the next
// repair to finish. It fails with ErrRepairBusy while another live
// process holds the repairer entry.
func (t *Table) AsRepairer(repair func() error) error {
	if t.Self != 0 {
		return repair()
	}
	i := t.n
	off := t.entryFileOff(i)
	if err := t.reg.LockEntry(off, layout.PeerEntrySize); err != nil {
		if errors.Is(err, shm.ErrEntryLocked) {
			return fmt.Errorf("%w: %s: another process holds the repairer entry", ErrRepairBusy, t.reg.Path())
		}
		return err
	}
	defer t.reg.UnlockEntry(off, layout.PeerEntrySize)
	self := shm.Self()
	e := t.Entry(i)
	var claiming uint64
	var gen uint32
	inherited := false
	rs := &repairerState{}
	for tries := 0; ; tries++ {
		// We hold the lock: no live process holds the entry (lock before
		// claim), whatever its word says. Only attached repairers that
		// judged it dead (MarkDead, FreeDead) change it meanwhile.
		v := e.Ctl.Load()
		c := layout.UnpackPeer(v)
		gen, inherited = c.Gen, c.State != layout.PeerFree
		if inherited {
			gen = (c.Gen + 1) & layout.RoleGenMask
		}
		claiming = layout.PeerCtl{State: layout.PeerClaiming, Gen: gen, PID: uint32(self.PID)}.Pack()
		// The dead holder's identity, read before ours overwrites it:
		// what MarkDead and LockTakeover report it as.
		prev, _ := t.recorded(i, v)
		if e.Ctl.CompareAndSwap(v, claiming) {
			rs.prev, rs.prevCtl = prev, v
			break
		}
		if tries > 100 {
			return fmt.Errorf("%w: %s: the repairer entry keeps changing", ErrRepairBusy, t.reg.Path())
		}
	}
	e.Start.Store(self.Start)
	e.Boot.Store(t.boot)
	e.PidNS.Store(shm.PidNamespace())
	e.Attached.Store(uint64(time.Now().UnixNano()))
	active := layout.PeerCtl{State: layout.PeerActive, Gen: gen, PID: uint32(self.PID)}.Pack()
	e.Ctl.CompareAndSwap(claiming, active) // nobody else writes it while we hold the lock and it is claiming
	rs.inherited = inherited
	t.Self, t.selfCtl, t.rs = uint16(i+1), active, rs
	finished := false
	defer func() {
		if !finished {
			// The repair panicked (a fault on a file truncated under
			// it, recovered by the caller's guard): leave the entry dead
			// for the next repair, as for a failed one, not active under
			// a released lock (undecided for as long as we live).
			e.Start.Store(0)
			e.PidNS.Store(0)
			e.Ctl.CompareAndSwap(active, layout.PeerCtl{State: layout.PeerDead, Gen: gen}.Pack())
			t.Self, t.selfCtl, t.rs = 0, 0, nil
		}
	}()
	shm.CrashPoint(CrashPeersRepairerAfterClaim)
	err := repair()
	finished = true
	shm.CrashPoint(CrashPeersRepairerBeforeRelease)
	next := layout.PeerCtl{State: layout.PeerFree, Gen: gen + 1}
	// A repair that found the repair lock held by another live process
	// did nothing (it fails before it stamps anything): the entry is
	// freed, not left dead for the next repairer to report as a death.
	// But an entry taken over from a dead holder still holds what that
	// holder parked in it: it stays dead whatever the repair did.
	if err != nil && (inherited || !errors.Is(err, ErrRepairBusy)) || rs.keepSelf {
		// Left marked dead for the next repair. What is stamped with the
		// entry now (leases parked here) belonged to processes proven
		// dead, not to us, and we live on: record no process, so that no
		// check or repair blames us for it (parkedReason).
		e.Start.Store(0)
		e.PidNS.Store(0)
		next = layout.PeerCtl{State: layout.PeerDead, Gen: gen}
	}
	e.Ctl.CompareAndSwap(active, next.Pack())
	t.Self, t.selfCtl, t.rs = 0, 0, nil
	return err
}

// recorded is what entry i, whose control word is v, records of its
// holder, unjudged: as a check.Peer, and as the shm.Holder a judge asks
// about. Each word is read once.
func (t *Table) recorded(i, v uint64) (check.Peer, shm.Holder) {
	e := t.Entry(i)
	c := layout.UnpackPeer(v)
	h := shm.Holder{PID: int32(c.PID), Start: e.Start.Load(), Boot: e.Boot.Load(), PidNS: e.PidNS.Load(), Complete: c.State != layout.PeerClaiming}
	ps := check.Peer{Index: int(i), State: layout.PeerStateName(c.State), ID: h.ID(), PidNS: h.PidNS, Repairer: i == t.n}
	if ns := e.Attached.Load(); ns != 0 {
		ps.Attached = time.Unix(0, int64(ns))
	}
	if here := shm.PidNamespace(); h.PidNS != 0 && here != 0 && h.PidNS != here {
		ps.OtherNS = true
	}
	return ps, h
}

// Inherited reports, inside AsRepairer's repair, whether this handle took
// the repairer entry over from a holder that died, and the entry's
// control word as that holder left it.
func (t *Table) Inherited() (prevCtl uint64, ok bool) {
	if t.rs == nil {
		return 0, false
	}
	return t.rs.prevCtl, t.rs.inherited
}

// RepairerDead reports whether the repairer entry is marked dead (left
// for the next repair to finish).
func (t *Table) RepairerDead() bool {
	return layout.UnpackPeer(t.Entry(t.n).Ctl.Load()).State == layout.PeerDead
}

// IsRepairer reports whether this handle holds the repairer entry now
// (inside AsRepairer's repair).
func (t *Table) IsRepairer() bool { return t.Self != 0 && uint64(t.Self-1) == t.n }

// Status judges entry i. It acts on nothing; a dead verdict is a proof
// (the entry lock released, with the pid witness agreeing where it can be
// asked, or a different boot), never a timeout.
func (t *Table) Status(i uint64) (check.Peer, uint64) {
	v := t.Entry(i).Ctl.Load()
	c := layout.UnpackPeer(v)
	ps, h := t.recorded(i, v)
	ps.Self = t.Self == uint16(i+1)
	switch c.State {
	case layout.PeerFree:
		return ps, v
	case layout.PeerClaiming, layout.PeerActive, layout.PeerDead:
	default:
		ps.Reason = "corrupt state"
		return ps, v
	}
	if ps.Self {
		ps.Proc, ps.Lock, ps.Reason = shm.ProcAlive, shm.LockHeld, "this handle"
		return ps, v
	}
	verdict := t.reg.JudgeEntry(t.entryFileOff(i), layout.PeerEntrySize, h)
	ps.Proc, ps.Lock, ps.Dead, ps.Unknown, ps.Reason = verdict.State, verdict.Lock, verdict.Dead, verdict.Unknown, verdict.Reason
	if c.State == layout.PeerDead {
		// A repair already proved it (or its holder left things for a
		// repair); finishing is idempotent.
		ps.Dead, ps.Unknown = true, false
		ps.Reason = "marked dead by a repair or by its holder's detach; " + verdict.Reason
		if c.PID == 0 {
			ps.Reason = closedReason
			if i == t.n {
				ps.Reason = parkedReason
			}
		}
	}
	return ps, v
}

// closedReason is the verdict on a participant entry marked dead that
// records no process: its holder closed its handle alive, leaving leases
// it could not requeue for want of room (Release(true)).
const closedReason = "left marked dead by its holder's Close, holding leases it could not requeue for want of room (the holder detached alive); no process of its own"

// parkedReason is the verdict on a dead entry that records no process:
// the repairer entry as AsRepairer leaves it for the next repair.
const parkedReason = "left marked dead by a repair, holding what it parked there for the next one (their holders proven dead); no process of its own"

// All reports every entry, the repairer entry last.
func (t *Table) All() []check.Peer {
	out := make([]check.Peer, t.Len())
	for i := range out {
		out[i], _ = t.Status(uint64(i))
	}
	return out
}

// StampDead reports whether the participant a stamp names is proven dead.
func (t *Table) StampDead(stamp uint16) bool {
	if stamp == 0 || uint64(stamp) > t.Len() {
		return false
	}
	ps, _ := t.Status(uint64(stamp - 1))
	return ps.Dead
}

// MarkDead proves deaths for a repair: every claiming or active entry of a
// dead process is marked dead (so an interrupted repair is finished by the
// next one), and entries already marked dead are included. When this
// handle holds the repairer entry taken over from a dead holder, that
// entry is in the set too: what the dead holder stamped with it is ours to
// finish (we stamp nothing that outlives one call). It returns the dead
// set, indexed by entry, and the reports of its members.
func (t *Table) MarkDead() (dead []bool, reports []check.Peer) {
	dead = make([]bool, t.Len())
	for i := uint64(0); i < t.Len(); i++ {
		ps, v := t.Status(i)
		if ps.Self {
			if t.inherited() {
				dead[i] = true
				ps = t.rs.prev // not us: the holder we took the entry over from
				ps.Lock, ps.Dead = shm.LockReleased, true
				ps.Reason = "the repairer entry's previous holder, proven dead when this repair took it over (its entry lock was free)"
				if ps.ID.PID == 0 {
					ps.Reason = parkedReason
				}
				reports = append(reports, ps)
			}
			continue
		}
		if !ps.Dead {
			continue
		}
		c := layout.UnpackPeer(v)
		switch c.State {
		case layout.PeerClaiming, layout.PeerActive:
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
// control word each had. The repairer entry, when this handle holds it,
// is not freed here: AsRepairer frees it (or leaves it dead when keep says
// so) as it leaves.
func (t *Table) FreeDead(dead, keep []bool) []Freed {
	var freed []Freed
	for i := uint64(0); i < t.Len(); i++ {
		if t.Self == uint16(i+1) {
			switch {
			case i < uint64(len(keep)) && keep[i]:
				if t.rs != nil { // the repairer entry (an attached handle's own entry needs no note)
					t.rs.keepSelf = true
				}
			case t.inherited():
				// Taken over from a dead holder and owing nothing now:
				// AsRepairer frees it as the repair returns. Reported
				// here, with the word the dead holder left, as a plan
				// (peers' Check) lists it.
				freed = append(freed, Freed{Index: int(i), Ctl: t.rs.prevCtl})
			}
			continue
		}
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
				f.Detail = fmt.Sprintf("%s, proven dead (%s): marked dead, then freed", p.Where(), p.Reason)
			}
		}
		out = append(out, f)
	}
	return out
}

// LockTakeover is a repair's finding for taking the repair lock over from
// the word prev (lockLoc at area offset lockOff, base the area's file
// offset).
func (t *Table) LockTakeover(base uint64, lockLoc string, lockOff uint64, prev uint64) check.Finding {
	f := check.Finding{Problem: check.ProblemRepairLock, Location: lockLoc, Offset: base + lockOff, Raw: prev, Owner: -1, Action: check.ActionTakeOverLock}
	if layout.ValidateRole(prev, t.Len()) != nil {
		f.Detail = fmt.Sprintf("word %#016x named no entry of the table of %d entries: taken over", prev, t.Len())
		return f
	}
	r := layout.UnpackRole(prev)
	p, _ := t.Status(uint64(r.Index()))
	if p.Self && t.inherited() && r.Gen != layout.UnpackPeer(t.selfCtl).Gen {
		p.ID = t.rs.prev.ID // the dead holder's identity, not ours
		p.Reason = "the repairer entry's previous holder, proven dead when this repair took it over"
	}
	f.Owner, f.OwnerID, f.Verdict, f.Dead = r.Index(), p.ID, p.Reason, p.Dead
	switch {
	case p.Self:
		f.Detail = fmt.Sprintf("held by the repairer entry's previous holder (generation %d), proven dead: taken over", r.Gen)
	case p.Dead:
		f.Detail = fmt.Sprintf("held by %s, %s, proven dead (%s): taken over", p.Entry(), p.Where(), p.Reason)
	default:
		f.Detail = fmt.Sprintf("held by participant %d at generation %d, an entry freed or taken since: taken over", r.Index(), r.Gen)
	}
	return f
}

// LockValue is the role word (layout.Role) of a holder: its entry's stamp
// and the entry's generation. The generation makes takeover exact: a lock
// naming an entry that has since been freed and taken again is not that
// entry's new owner's lock.
func LockValue(stamp uint16, gen uint32) uint64 { return layout.Role{Stamp: stamp, Gen: gen}.Pack() }

// MyLock is this handle's role word.
func (t *Table) MyLock() uint64 { return LockValue(t.Self, layout.UnpackPeer(t.selfCtl).Gen) }

// LockRepairFrom takes the repairer role, replacing a holder proven dead
// (or whose entry has since been reused, which happens only after its
// death), and returns the word it replaced: 0 when the role was free,
// else the word of the holder taken over (proven dead, its entry reused
// since, or corrupt).
func (t *Table) LockRepairFrom() (prev uint64, ok bool) { return t.TakeRoleFrom(t.lock) }

// UnlockRepair releases the repair lock if this handle holds it.
func (t *Table) UnlockRepair() { t.lock.CompareAndSwap(t.MyLock(), 0) }

// TakeRole takes a role word (the repair lock, a deque's owner word) that
// holds LockValue of its holder: free, or held by a holder proven dead, or
// corrupt. A live holder keeps it, and so does one whose liveness is
// unknown.
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

// HolderAlive reports whether a role word names a holder that may be
// alive: its entry is active or being claimed, still has the generation
// the word records, and is not proven dead (an undecided holder counts as
// alive). A free entry holds nothing. A claim never revives a word stamped
// with an earlier generation. A word naming the repairer entry at its
// previous generation, which this handle took over from a dead holder, is
// dead.
func (t *Table) HolderAlive(v uint64) bool {
	if v == 0 || layout.ValidateRole(v, t.Len()) != nil {
		return false
	}
	r := layout.UnpackRole(v)
	ps, ctl := t.Status(uint64(r.Index()))
	c := layout.UnpackPeer(ctl)
	return (c.State == layout.PeerActive || c.State == layout.PeerClaiming) && c.Gen == r.Gen && !ps.Dead
}

// Check reports the participant entries and the repair lock: entries
// whose words no operation writes, entries proven dead (or marked dead by a
// repair that has not finished), entries whose holder's liveness is
// undecided, and a repair lock held by a dead or vanished holder or
// corrupt. base is the file offset of the kind's area (the header size),
// lockOff the lock word's offset in that area and lockLoc its name
// ("ring.repair_lock"). held(i) is how many things of entry i the findings
// before this list as orphaned (what a repair recovers before it frees the
// entry), and markedDead says why the kind can leave an entry marked dead.
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
				f.Detail = fmt.Sprintf("%s entry of %s, proven dead (%s): a repair marks it dead", p.State, p.Where(), p.Reason)
			}
			switch n := held(p.Index); n {
			case 0:
				f.Detail += " and frees it: it holds nothing"
			case 1:
				f.Detail += " and frees it once the one thing it held (listed above) is recovered"
			default:
				f.Detail += fmt.Sprintf(" and frees it once the %d things it held (listed above) are recovered", n)
			}
		case p.Unknown:
			f.Problem, f.Detail = check.ProblemUnknownLiveness, fmt.Sprintf("%s entry of %s: %s: left alone", p.State, p.Where(), p.Reason)
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
	if err := layout.ValidateRole(raw, t.Len()); err != nil {
		f.Detail = fmt.Sprintf("word %#016x names no entry of the table of %d entries: the next repair takes it over", raw, t.Len())
		out = append(out, f)
		return out
	}
	r := layout.UnpackRole(raw)
	p := peers[r.Index()]
	f.Owner, f.OwnerID, f.Verdict, f.Dead = r.Index(), p.ID, p.Reason, p.Dead
	ctl := layout.UnpackPeer(t.Entry(uint64(r.Index())).Ctl.Load())
	switch {
	case p.Dead:
		f.Detail = fmt.Sprintf("held by %s, %s, proven dead (%s): the next repair takes it over and finishes its work", p.Entry(), p.Where(), p.Reason)
	case ctl.Gen != r.Gen || ctl.State == layout.PeerFree:
		f.Detail = fmt.Sprintf("held by participant %d at generation %d, an entry freed since: the next repair takes it over", r.Index(), r.Gen)
	case ctl.State != layout.PeerActive && ctl.State != layout.PeerClaiming:
		// As HolderAlive judges: only an active or claiming entry holds.
		f.Detail = fmt.Sprintf("held by participant %d, whose entry is in state %d (no live holder): the next repair takes it over", r.Index(), ctl.State)
	default:
		return out // a live repairer at work (or one whose liveness is undecided)
	}
	out = append(out, f)
	return out
}
