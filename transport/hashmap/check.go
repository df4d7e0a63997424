package hashmap

import (
	"fmt"
	"strings"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// The hash map's Check and PlanRepair, and the findings its Repair
// reports: one wording for all three, built on Scan's classification
// (judgeBucket, judgeHome).

// Check reads the whole map and reports every problem it finds: header
// bytes and the map's area bytes that format x.0 leaves reserved and that
// are not zero, every bucket control word that is corrupt or left by a
// dead writer (an insert or a locked update or delete), every home lock
// held by a holder that is not alive or naming no entry, participant
// entries proven dead or holding words no operation writes, and a repair
// lock a repair would take over. Each finding says what a Repair would do
// about it now. It changes nothing and works on read-only and attached
// handles alike (a closed handle reports nothing). Under live writers each
// word is judged as Scan judges it: a problem is reported only once the
// word was read again and found unchanged across a fresh judgement of its
// owner, so a live writer's lock is never reported.
//
// It runs under the file's fault guard: a file truncated or holed under
// it gives a report whose Fault is set (and which is not Clean) instead of
// a crash.
func (m *Map) Check() check.Report {
	rep, err := guarded(m.reg, "check", func() (check.Report, error) { return m.check(), nil })
	if err != nil {
		return check.Report{Path: m.Path(), Kind: layout.KindHashMap, Units: m.lay.Capacity, Participants: m.lay.Participants, Findings: []check.Finding{}, Fault: err}
	}
	return rep
}

func (m *Map) check() check.Report {
	rep := check.Report{Path: m.Path(), Kind: layout.KindHashMap, Units: m.lay.Capacity, Participants: m.lay.Participants, Findings: []check.Finding{}}
	if m.area == nil {
		return rep
	}
	h := m.Header()
	hdr := make([]byte, layout.HeaderSize)
	copy(hdr, m.reg.Bytes())
	fs := append([]check.Finding{}, check.ReservedHeader(h, hdr)...)
	base := uint64(h.HeaderSize)
	if h.Minor == 0 {
		const lo, hi = layout.HashMapOffRepairLock + 8, layout.HashMapOffParticipants
		var res [hi - lo]byte
		copy(res[:], m.area[lo:hi])
		if res != [hi - lo]byte{} {
			fs = append(fs, check.Finding{Problem: check.ProblemReservedNonzero, Location: "hashmap.reserved", Offset: base + lo, Owner: -1, Action: check.ActionNone,
				Detail: fmt.Sprintf("reserved bytes %d-%d are not zero", base+lo, base+hi-1)})
		}
	}
	peers := m.Peers()
	held := make([]int, len(peers)) // orphaned buckets and home locks a repair recovers, by entry
	for i := uint64(0); i < m.lay.Capacity; i++ {
		if br := m.judgeBucket(i, peers); br.Problem != OK {
			f := m.bucketFinding(base, br, false)
			if f.Action != check.ActionNone {
				held[br.Owner]++
			}
			fs = append(fs, f)
		}
		if hr, ok := m.judgeHome(i, peers); ok && hr.Problem != OK {
			if hr.Holder >= 0 && hr.Dead {
				held[hr.Holder]++
			}
			fs = append(fs, m.homeFinding(base, hr, false))
		}
	}
	fs = append(fs, m.tab.Check(base, peers, "hashmap.repair_lock", layout.HashMapOffRepairLock,
		func(i int) int { return held[i] }, "marked dead, what it held not yet rolled back")...)
	rep.Findings = fs
	return rep
}

// PlanRepair is what a Repair would do now: Check's findings that a
// repair acts on, in Check's order (Repair takes over the repair lock
// first, so its report lists check.ActionTakeOverLock first).
func (m *Map) PlanRepair() []check.Finding { return m.Check().Plan() }

// bucketFinding words the bucket problem br (not OK) and says what
// a repair does about it (done: what Repair did): a bucket whose owner's
// entry is proven dead is rolled back (an insert made a tombstone, a
// locked entry unlocked, also when its lengths are corrupt); everything
// else is left alone.
func (m *Map) bucketFinding(base uint64, br BucketReport, done bool) check.Finding {
	f := check.Finding{Location: fmt.Sprintf("bucket[%d].ctl", br.Index), Offset: base + m.lay.BucketOff(br.Index), Raw: br.Raw,
		Owner: br.Owner, OwnerID: br.OwnerID, Verdict: br.Verdict, Dead: br.Dead, Action: check.ActionNone}
	by := fmt.Sprintf("participant %d, %s, proven dead (%s)", br.Owner, br.Where, br.Verdict)
	switch br.Problem {
	case OrphanedInsert, OrphanedLock:
		f.Problem = check.ProblemOrphanedInsert
		what := "key being inserted by"
		if br.Problem == OrphanedLock {
			f.Problem, what = check.ProblemOrphanedLock, "entry locked for an update or delete by"
		}
		switch {
		case br.Problem == OrphanedInsert:
			f.Action = check.ActionTombstone
			f.Detail = fmt.Sprintf("%s %s, and the insert never returned: %s (nobody was promised the entry)", what, by, remedy(done, "a repair makes the bucket a tombstone", "made a tombstone"))
		default:
			f.Action = check.ActionUnlock
			f.Detail = fmt.Sprintf("%s %s, which never returned: %s (the entry keeps its old value)", what, by, remedy(done, "a repair unlocks it", "unlocked"))
		}
	default:
		f.Problem = check.ProblemCorruptBucket
		w := layout.UnpackHashMapWord(br.Raw)
		why := strings.TrimPrefix(br.Err, "layout: ")
		if br.Dead && w.State == layout.BucketFull && w.Validate(&m.lay) == nil {
			f.Action = check.ActionUnlock
			f.Detail = fmt.Sprintf("word %#016x: %s; locked by %s: %s (the lengths stay as they are)", br.Raw, why, by, remedy(done, "a repair unlocks it", "unlocked"))
		} else {
			f.Detail = fmt.Sprintf("word %#016x, which no map operation writes (%s): left alone", br.Raw, why)
		}
	}
	return f
}

// homeFinding words the home lock problem hr (not OK; done: Repair
// released it). A repair releases every home lock whose holder is not
// alive, also one naming no entry.
func (m *Map) homeFinding(base uint64, hr HomeLockReport, done bool) check.Finding {
	f := check.Finding{Location: fmt.Sprintf("bucket[%d].home_lock", hr.Bucket), Offset: base + m.lay.BucketOff(hr.Bucket) + layout.HashMapBucketHomeLock,
		Raw: hr.Raw, Owner: hr.Holder, OwnerID: hr.HolderID, Verdict: hr.Verdict, Dead: hr.Dead, Action: check.ActionReleaseHome}
	release := remedy(done, "a repair releases it", "released")
	if hr.Problem == Corrupt {
		f.Problem = check.ProblemBadHomeLock
		f.Detail = fmt.Sprintf("word %#016x names no entry of the table of %d entries: %s", hr.Raw, m.lay.Entries, release)
		return f
	}
	f.Problem = check.ProblemOrphanedHome
	if hr.Dead {
		f.Detail = fmt.Sprintf("held by participant %d, %s, proven dead (%s): %s", hr.Holder, hr.Where, hr.Verdict, release)
		return f
	}
	r := layout.UnpackRole(hr.Raw & layout.HashMapHomeHolderMask)
	c := layout.UnpackPeer(m.tab.Entry(uint64(hr.Holder)).Ctl.Load())
	f.Detail = fmt.Sprintf("held by participant %d at generation %d, an entry now %s at generation %d, which holds no home lock: %s",
		hr.Holder, r.Gen, layout.PeerStateName(c.State), c.Gen, release)
	return f
}

// remedy is plan, what a repair will do, or, when done, did, what it did.
func remedy(done bool, plan, did string) string {
	if done {
		return did
	}
	return plan
}
