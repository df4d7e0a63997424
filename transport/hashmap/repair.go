package hashmap

import (
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// Problem classifies a bucket or home lock found by Scan.
type Problem uint8

const (
	OK             Problem = iota // unlocked, or held by a participant not proven dead
	OrphanedInsert                // inserting, its writer dead: Repair makes it a tombstone
	OrphanedLock                  // full and locked by a dead writer (an update or a delete): Repair unlocks it, the old value kept
	OrphanedHome                  // a home lock held by a dead participant, or naming no possible holder: Repair releases it
	Corrupt                       // a word no map operation writes
)

var hashMapProblemNames = [...]string{"ok", "orphaned insert", "orphaned lock", "orphaned home lock", "corrupt"}

func (p Problem) String() string {
	if int(p) < len(hashMapProblemNames) {
		return hashMapProblemNames[p]
	}
	return fmt.Sprintf("problem(%d)", uint8(p))
}

// BucketReport describes one bucket that is locked, being inserted
// or corrupt.
type BucketReport struct {
	Index   uint64
	Raw     uint64 // the control word
	Word    layout.HashMapWord
	Problem Problem
	Owner   int           // participant index of the writer holding it, -1 for none
	OwnerID shm.ProcessID // the owner's identity as the table records it
	Where   string        // the owner as humans read it (check.Peer.Where: "pid 1 in another pid namespace (...)")
	Alive   bool          // the owner is not proven dead
	Dead    bool          // the owner's entry is proven dead: what a Repair rolls back
	Verdict string        // why the owner is judged dead or alive
	Err     string        // why the bucket is corrupt
}

// HomeLockReport describes one held home lock.
type HomeLockReport struct {
	Bucket   uint64 // the home bucket whose lock word this is
	Raw      uint64
	Holder   int           // participant index, -1 when the word names none
	HolderID shm.ProcessID // the holder's identity as the table records it
	Where    string        // the holder as humans read it (check.Peer.Where)
	Alive    bool          // the holder is alive: its entry is active, still has the generation the word records, and is not proven dead
	Dead     bool          // the holder's entry is proven dead
	Verdict  string        // why the holder's entry is judged dead or alive
	Problem  Problem
}

// ScanReport is what Scan finds. It is a value: tools print it.
type ScanReport struct {
	Path      string
	Counters  Counters
	Peers     []check.Peer
	States    map[layout.BucketState]int // buckets in each state (corrupt ones not counted)
	Buckets   []BucketReport             // every bucket that is locked, inserting or corrupt
	HomeLocks []HomeLockReport           // every held home lock
	Problems  int                        // orphaned or corrupt buckets and home locks
	Corrupt   int
	Fault     error // reading the file faulted (truncated or holed under the scan): the rest is empty; wraps shm.ErrFault
}

// Scan reads the whole map and reports every locked or half-inserted
// bucket with its owner and whether that owner is proven dead, every held
// home lock, and every corrupt word. It changes nothing and works on
// read-only maps; values read from the mapping are validated, never
// trusted. Under live writers it is a snapshot of each word, not a
// consistent cut; but a problem (orphaned or corrupt) is reported only
// after the word was read again, its owner judged again from the table as
// it is then, and the word found unchanged across that judgement, so that
// a process attaching or a writer finishing during the scan is not
// reported as one.
//
// It runs under the file's fault guard: a file truncated or holed under
// it gives a report with only Path and Fault set instead of a crash.
func (m *Map) Scan() ScanReport {
	rep, err := guarded(m.reg, "scan", func() (ScanReport, error) { return m.scan(), nil })
	if err != nil {
		return ScanReport{Path: m.Path(), Fault: err}
	}
	return rep
}

func (m *Map) scan() ScanReport {
	rep := ScanReport{Path: m.Path(), Counters: m.Counters(), States: map[layout.BucketState]int{}}
	if m.area == nil {
		return rep
	}
	rep.Peers = m.Peers()
	for i := uint64(0); i < m.lay.Capacity; i++ {
		br := m.judgeBucket(i, rep.Peers)
		switch {
		case br.Problem == Corrupt:
			rep.Corrupt++
		default:
			rep.States[br.Word.State]++
		}
		if br.Problem != OK || br.Word.Owner != 0 {
			rep.Buckets = append(rep.Buckets, br)
		}
		if br.Problem != OK {
			rep.Problems++
		}
		if hr, held := m.judgeHome(i, rep.Peers); held {
			rep.HomeLocks = append(rep.HomeLocks, hr)
			if hr.Problem != OK {
				rep.Problems++
			}
			if hr.Problem == Corrupt {
				rep.Corrupt++
			}
		}
	}
	return rep
}

// judgeBucket reads bucket i's control word and judges it as Scan and
// Check report it: against peers (the table as read first), and, when that
// finds a problem, again by recheckBucket.
func (m *Map) judgeBucket(i uint64, peers []check.Peer) BucketReport {
	br := m.classifyBucket(i, m.ctl(i).Load(), func(o int) check.Peer { return peers[o] })
	if br.Problem != OK {
		br = m.recheckBucket(i, br)
	}
	return br
}

// judgeHome reads bucket i's home lock word and judges it as Scan and
// Check report it (see judgeBucket). It reports false when the lock is
// not held.
func (m *Map) judgeHome(i uint64, peers []check.Peer) (HomeLockReport, bool) {
	v := m.home(i).Load()
	if v == 0 {
		return HomeLockReport{}, false
	}
	hr := m.classifyHome(i, v, peers)
	if hr.Problem == OK {
		return hr, true
	}
	return m.recheckHome(i, hr)
}

// hmScanRechecks bounds Scan's re-reads of a word found with a problem that
// changed under each re-read (live writers: the last reading is reported).
const hmScanRechecks = 8

// recheckBucket judges a bucket found with a problem again: the word is
// re-read, its owner judged from the table as it is now (read after the
// word), and the result kept only if the word has not changed meanwhile.
func (m *Map) recheckBucket(i uint64, br BucketReport) BucketReport {
	ctl := m.ctl(i)
	for try := 0; try < hmScanRechecks; try++ {
		raw := ctl.Load()
		br = m.classifyBucket(i, raw, func(o int) check.Peer {
			ps, _ := m.tab.Status(uint64(o))
			return ps
		})
		if br.Problem == OK || ctl.Load() == raw {
			return br
		}
	}
	return br
}

// classifyBucket judges bucket i, whose control word was raw; peer reports
// on the participant entry of the word's owner (an index in the table).
func (m *Map) classifyBucket(i, raw uint64, peer func(int) check.Peer) BucketReport {
	ctl := m.ctl(i)
	w := layout.UnpackHashMapWord(raw)
	br := BucketReport{Index: i, Raw: raw, Word: w, Owner: int(w.Owner) - 1, Alive: true}
	if err := w.Validate(&m.lay); err != nil {
		br.Problem, br.Err = Corrupt, err.Error()
		return br
	}
	var lengths error
	if w.State == layout.BucketFull {
		// The active copy's length and the key's length are stable while
		// the word is; a change means a writer, not corruption.
		kl, vl := m.keyLen(i).Load(), m.valueLen(i, w.Active).Load()
		if err := m.lay.CheckLengths(kl, vl); err != nil && ctl.Load() == raw {
			lengths = err
		}
	}
	if br.Owner < 0 {
		if lengths != nil {
			br.Problem, br.Err = Corrupt, lengths.Error()
		}
		return br
	}
	// The owner is judged also when the lengths are corrupt: a Repair
	// unlocks a dead writer's bucket whatever its lengths say.
	p := peer(br.Owner)
	br.OwnerID, br.Where, br.Alive, br.Dead, br.Verdict = p.ID, p.Where(), !p.Dead, p.Dead, p.Reason
	if lengths != nil {
		br.Problem, br.Err = Corrupt, lengths.Error()
		return br
	}
	switch {
	case p.State == "free":
		// An owner stamp naming an unused entry: no process can be proven
		// to own it, and no repair may guess.
		br.Problem, br.Err, br.Alive = Corrupt, "owner entry is free", false
		return br
	case p.State == "claiming" && !p.Dead:
		// A live process is claiming the entry. Attach claims only free
		// entries, and an entry is freed only once every bucket stamped
		// with it was rolled back (or by a clean detach, which leaves
		// none); the repairer entry, the one entry claimed from any
		// state, stamps no bucket. So no operation left this, neither
		// the claimer nor an earlier owner: as with a free entry, no
		// process can be proven to own it, and no repair may guess.
		br.Problem, br.Err, br.Alive = Corrupt, "owner entry is being claimed by a new process, which holds nothing yet", false
		return br
	}
	if p.Dead {
		if w.State == layout.BucketInserting {
			br.Problem = OrphanedInsert
		} else {
			br.Problem = OrphanedLock
		}
	}
	return br
}

// classifyHome judges the home lock word v of bucket i. Its holder is
// judged from the table as it is now (read after v); peers, when not nil,
// gives the holder's identity and verdict.
func (m *Map) classifyHome(i, v uint64, peers []check.Peer) HomeLockReport {
	hr := HomeLockReport{Bucket: i, Raw: v, Holder: -1}
	holder := v & layout.HashMapHomeHolderMask
	if holder == 0 || layout.ValidateRole(holder, m.lay.Entries) != nil {
		hr.Problem = Corrupt
		return hr
	}
	hr.Holder = layout.UnpackRole(holder).Index()
	if hr.Alive = m.homeHolderAlive(v); !hr.Alive {
		hr.Problem = OrphanedHome
	}
	var ps check.Peer
	if peers != nil {
		ps = peers[hr.Holder]
	} else {
		ps, _ = m.tab.Status(uint64(hr.Holder))
	}
	hr.HolderID, hr.Where, hr.Dead, hr.Verdict = ps.ID, ps.Where(), ps.Dead, ps.Reason
	return hr
}

// recheckHome judges a home lock found with a problem again, as
// recheckBucket does a bucket. It reports false if the lock was released
// meanwhile.
func (m *Map) recheckHome(i uint64, hr HomeLockReport) (HomeLockReport, bool) {
	hl := m.home(i)
	for try := 0; try < hmScanRechecks; try++ {
		v := hl.Load()
		if v == 0 {
			return hr, false
		}
		hr = m.classifyHome(i, v, nil)
		if hr.Problem == OK || hl.Load() == v {
			return hr, true
		}
	}
	return hr, true
}

// Repair rolls back what dead participants left behind: a half-done
// insert becomes a tombstone, a half-done update or delete is undone (the
// entry keeps its old value), home locks they held are released, and
// their table entries are freed. It acts only on proof of death (the
// dead participant's entry lock released, in whatever pid namespace it
// ran, with the pid and start time agreeing where they can be asked; or
// an earlier boot), never on a timeout or an undecided verdict, so it is
// safe while live processes use the map; every change is a CAS from the
// exact word that names the dead owner, with the version bumped so that
// readers that read across it read again. It is idempotent. One repairer
// runs at a time (transport.ErrRepairBusy otherwise); a repairer that died
// holding that role is replaced on proof of death.
//
// An attached handle repairs as its own entry. A handle without one
// (OpenForRepair) repairs as the table's repairer entry, which it locks
// and claims for the length of the call like any entry, so a repair needs
// no free participant entry and its own death is provable; it fails with
// transport.ErrRepairBusy while another live process holds that entry. A
// repair stamps only the repair lock with its entry (never a bucket or a
// home lock), at the entry's generation, so a repairer that took the
// repairer entry over from a dead holder tells that holder's repair lock
// from its own, and finishes what the dead one left.
//
// The report lists one finding per action taken, in the order taken
// (check.ActionTakeOverLock, then check.ActionTombstone, check.ActionUnlock and
// check.ActionReleaseHome bucket by bucket, then check.ActionFreeEntry), worded as
// Check words them: PlanRepair, run just before, lists the same.
// Corrupt counts the bucket control words left alone.
//
// Writers do not depend on it: one that needs a bucket or home lock a dead
// writer left rolls it back itself; and a process that attaches to a table
// with no free entry runs this repair (as the repairer entry) when some
// entries are dead, which frees them, so dead participants never exhaust
// the table. An attach never takes an entry that is not free, so an entry
// is reused only once everything stamped with it was rolled back.
//
// It runs under the file's fault guard (not the per-operation paths): a
// file truncated or holed under it gives an error wrapping shm.ErrFault,
// and ErrTruncated or ErrSparse when the file shows which, with an empty
// report, instead of a crash.
func (m *Map) Repair() (check.RepairReport, error) {
	rep, err := guarded(m.reg, "repair", m.repairAs)
	if rep.Path == "" {
		rep = check.RepairReport{Path: m.Path(), Done: []check.Finding{}}
	}
	return rep, err
}

// repairAs repairs as this handle's entry, or, for a writable handle
// without one (OpenForRepair, or an attach in progress), as the table's
// repairer entry, on a fresh view of the same mapping (so that this
// handle's own view of the table never changes under its other callers).
func (m *Map) repairAs() (check.RepairReport, error) {
	if m.tab.Self != 0 || m.area == nil || m.reg.ReadOnly() {
		return m.repair()
	}
	rm, err := viewMap(m.reg)
	if err != nil {
		return check.RepairReport{Path: m.Path(), Done: []check.Finding{}}, err
	}
	var rep check.RepairReport
	err = rm.tab.AsRepairer(func() error {
		var err error
		rep, err = rm.repair()
		return err
	})
	return rep, err
}

func (m *Map) repair() (check.RepairReport, error) {
	rep := check.RepairReport{Path: m.Path(), Done: []check.Finding{}}
	if m.tab.Self == 0 || m.area == nil {
		return rep, transport.ErrNotAttached
	}
	prev, ok := m.tab.LockRepairFrom()
	if !ok {
		return rep, fmt.Errorf("%w: %s", transport.ErrRepairBusy, m.Path())
	}
	defer m.tab.UnlockRepair()
	base := uint64(m.Header().HeaderSize)
	if prev != 0 {
		rep.Done = append(rep.Done, m.tab.LockTakeover(base, "hashmap.repair_lock", layout.HashMapOffRepairLock, prev))
	}
	// 1. Prove deaths. An entry marked dead stays dead until its buckets
	// are rolled back, so an interrupted repair is finished by the next.
	dead, reports := m.tab.MarkDead()
	rep.DeadPeers = reports
	deadPeer := func(o int) check.Peer {
		for _, p := range reports {
			if p.Index == o {
				return p
			}
		}
		return check.Peer{Index: o} // not reached: only the owners in dead are asked about
	}
	shm.CrashPoint(crashHashmapRepairAfterMark)
	// 2. Roll back every bucket a dead participant holds, and release
	// home locks whose holders are gone.
	for i := uint64(0); i < m.lay.Capacity; i++ {
		raw := m.ctl(i).Load()
		w := layout.UnpackHashMapWord(raw)
		switch {
		case w.Validate(&m.lay) != nil:
			rep.Corrupt++
		case w.Owner != 0 && dead[w.Owner-1]:
			// Judged (for the report) before the rollback changes it.
			br := m.classifyBucket(i, raw, deadPeer)
			if m.rollBack(i, raw) {
				f := m.bucketFinding(base, br, true)
				f.Action = check.ActionUnlock
				if w.State == layout.BucketInserting {
					f.Action = check.ActionTombstone
				}
				rep.Done = append(rep.Done, f)
				shm.CrashPoint(crashHashmapRepairAfterRollback)
			}
		}
		hl := m.home(i)
		if v := hl.Load(); v != 0 {
			// A holder not alive, or a word naming no possible holder.
			if hr := m.classifyHome(i, v, nil); hr.Problem != OK && hl.CompareAndSwap(v, 0) {
				m.homeTakeovers.Add(1)
				f := m.homeFinding(base, hr, true)
				f.Action = check.ActionReleaseHome
				rep.Done = append(rep.Done, f)
			}
		}
	}
	// 3. Free the dead entries: nothing refers to them any more. The
	// repairer entry, when this repair took it over from a dead holder,
	// is listed too and freed by AsRepairer as the repair returns
	// (peers.Table.FreeDead).
	freed := m.tab.FreeDead(dead, make([]bool, len(dead)))
	rep.Done = append(rep.Done, m.tab.FreedFindings(base, freed, reports)...)
	if rep.Changed() {
		m.repairs.Add(1)
	}
	return rep, nil
}
