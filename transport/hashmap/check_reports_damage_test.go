package hashmap

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// Invariant: Check reports every kind of damage a hash map can carry, each
// at the field layout names (Location, file Offset) with the right check.Problem,
// owner and the check.Action a repair takes now, on attached and read-only
// handles alike. The damaged maps are made by real processes killed at
// crash points (hashmap_crash_test.go's helpers) or by writing words into
// the file. The oracle for the crash cases is the raw words themselves,
// read here without the classification under test.

// hmFinding is the part of a check.Finding these tests pin.
type hmFinding struct {
	Problem  check.Problem
	Location string
	Offset   uint64
	Action   check.Action
	Owner    int
}

func hmPin(fs []check.Finding) []hmFinding {
	out := []hmFinding{}
	for _, f := range fs {
		out = append(out, hmFinding{f.Problem, f.Location, f.Offset, f.Action, f.Owner})
	}
	return out
}

var hmSortFindings = cmpopts.SortSlices(func(a, b hmFinding) bool {
	if a.Location != b.Location {
		return a.Location < b.Location
	}
	return a.Action < b.Action
})

// hmCase is one damaged map: damage makes it (m is the parent's attached
// handle, participant 0) and returns what Check must report, and the
// locations of the findings a repair leaves alone, which a Check after
// Repair must still report (with check.ActionNone).
type hmCase struct {
	name   string
	damage func(t *testing.T, m *Map) (want []hmFinding, leftAlone []string)
}

func hmBase(m *Map) uint64 { return uint64(m.Header().HeaderSize) }

func hmBucketWant(m *Map, i uint64, p check.Problem, a check.Action, owner int) hmFinding {
	return hmFinding{p, fmt.Sprintf("bucket[%d].ctl", i), hmBase(m) + m.lay.BucketOff(i), a, owner}
}

func hmHomeWant(m *Map, i uint64, p check.Problem, owner int) hmFinding {
	return hmFinding{p, fmt.Sprintf("bucket[%d].home_lock", i), hmBase(m) + m.lay.BucketOff(i) + layout.HashMapBucketHomeLock, check.ActionReleaseHome, owner}
}

func hmPeerWant(m *Map, i int, p check.Problem, a check.Action) hmFinding {
	return hmFinding{p, fmt.Sprintf("participant[%d].ctl", i), hmBase(m) + m.lay.ParticipantOff(uint64(i)), a, i}
}

func hmLockWant(m *Map, owner int) hmFinding {
	return hmFinding{check.ProblemRepairLock, "hashmap.repair_lock", hmBase(m) + layout.HashMapOffRepairLock, check.ActionTakeOverLock, owner}
}

// hmDeadWriterWants reads every bucket and home lock word and returns what
// Check must report when each owner or holder named is dead: locked and
// inserting buckets rolled back, home locks released. It fails the test
// unless it finds exactly buckets such buckets and homes home locks.
func hmDeadWriterWants(t *testing.T, m *Map, buckets, homes int) []hmFinding {
	t.Helper()
	var want []hmFinding
	nb, nh := 0, 0
	for i := uint64(0); i < m.lay.Capacity; i++ {
		if w := layout.UnpackHashMapWord(m.ctl(i).Load()); w.Owner != 0 {
			nb++
			if w.State == layout.BucketInserting {
				want = append(want, hmBucketWant(m, i, check.ProblemOrphanedInsert, check.ActionTombstone, int(w.Owner)-1))
			} else {
				want = append(want, hmBucketWant(m, i, check.ProblemOrphanedLock, check.ActionUnlock, int(w.Owner)-1))
			}
		}
		if v := m.home(i).Load(); v != 0 {
			nh++
			want = append(want, hmHomeWant(m, i, check.ProblemOrphanedHome, layout.UnpackRole(v&layout.HashMapHomeHolderMask).Index()))
		}
	}
	if nb != buckets || nh != homes {
		t.Fatalf("the dead writer left %d locked buckets and %d home locks, want %d and %d", nb, nh, buckets, homes)
	}
	return want
}

// hmDeadWriter kills a script child at point (the first time) and returns
// Check's findings for what it left: its buckets, its home lock, and its
// entry (participant 1).
func hmDeadWriter(point string, buckets int) func(t *testing.T, m *Map) ([]hmFinding, []string) {
	return func(t *testing.T, m *Map) ([]hmFinding, []string) {
		hmPreload(t, m)
		hmRunCrashChild(t, m.Path(), "script", point, 1)
		want := hmDeadWriterWants(t, m, buckets, 1)
		return append(want, hmPeerWant(m, 1, check.ProblemDeadParticipant, check.ActionFreeEntry)), nil
	}
}

// hmEmptyBucket returns an empty bucket, not one of skip.
func hmEmptyBucket(t *testing.T, m *Map, skip ...uint64) uint64 {
	t.Helper()
next:
	for i := uint64(0); i < m.lay.Capacity; i++ {
		for _, s := range skip {
			if s == i {
				continue next
			}
		}
		if m.ctl(i).Load() == 0 && m.home(i).Load() == 0 {
			return i
		}
	}
	t.Fatal("no empty bucket")
	return 0
}

var hmDamageCases = []hmCase{
	{"dead inserter", hmDeadWriter(crashHashmapInsertAfterClaim, 1)},
	{"dead inserter after the value", hmDeadWriter(crashHashmapInsertAfterValue, 1)},
	{"dead updater", hmDeadWriter(crashHashmapUpdateAfterWrite, 1)},
	{"dead deleter", hmDeadWriter(crashHashmapDeleteAfterLock, 1)},
	{"dead writer holding only its home lock", hmDeadWriter(crashHashmapPutAfterHomeLock, 0)},
	{"dead writer after its insert published", hmDeadWriter(crashHashmapInsertAfterPublish, 0)},
	{"dead repairer", func(t *testing.T, m *Map) ([]hmFinding, []string) {
		// A writer dies mid-update (participant 1), then a repairer
		// (participant 2) dies holding the repair lock, having marked
		// the writer dead and rolled back nothing.
		hmPreload(t, m)
		hmRunCrashChild(t, m.Path(), "script", crashHashmapUpdateAfterWrite, 1)
		hmRunCrashChild(t, m.Path(), "repair", crashHashmapRepairAfterMark, 1)
		if c := layout.UnpackPeer(m.tab.Entry(1).Ctl.Load()); c.State != layout.PeerDead {
			t.Fatalf("the dead repairer did not mark the writer dead: %+v", c)
		}
		want := hmDeadWriterWants(t, m, 1, 1)
		return append(want, hmPeerWant(m, 1, check.ProblemDeadParticipant, check.ActionFreeEntry), hmPeerWant(m, 2, check.ProblemDeadParticipant, check.ActionFreeEntry),
			hmLockWant(m, 2)), nil
	}},
	{"dead updater, lengths corrupt", func(t *testing.T, m *Map) ([]hmFinding, []string) {
		// A repair unlocks a dead writer's bucket whatever its lengths
		// say; the lengths stay corrupt.
		hmPreload(t, m)
		hmRunCrashChild(t, m.Path(), "script", crashHashmapUpdateAfterWrite, 1)
		want := hmDeadWriterWants(t, m, 1, 1)
		var locked uint64
		for i := uint64(0); i < m.lay.Capacity; i++ {
			if layout.UnpackHashMapWord(m.ctl(i).Load()).Owner != 0 {
				locked = i
			}
		}
		m.keyLen(locked).Store(uint32(m.lay.KeySize) + 1)
		for j := range want {
			if want[j].Problem == check.ProblemOrphanedLock {
				want[j].Problem = check.ProblemCorruptBucket
			}
		}
		return append(want, hmPeerWant(m, 1, check.ProblemDeadParticipant, check.ActionFreeEntry)), []string{fmt.Sprintf("bucket[%d].ctl", locked)}
	}},
	{"words no operation writes", func(t *testing.T, m *Map) ([]hmFinding, []string) {
		hmPreload(t, m)
		mem := m.reg.Bytes()
		base := hmBase(m)
		// Header reserved3 (not checksummed) and the map's reserved area.
		mem[layout.OffGeneration+8+3] = 1
		mem[base+layout.HashMapOffRepairLock+8+5] = 1
		// A bucket in a state that does not exist.
		bad := hmEmptyBucket(t, m)
		m.ctl(bad).Store(7)
		// Home locks naming no entry (stamp out of range; only an
		// acquisition count) and one naming a free entry.
		h1 := hmEmptyBucket(t, m, bad)
		h2 := hmEmptyBucket(t, m, bad, h1)
		h3 := hmEmptyBucket(t, m, bad, h1, h2)
		m.home(h1).Store(0xffff)
		m.home(h2).Store(3 << layout.HashMapHomeSeqShift)
		m.home(h3).Store(peers.LockValue(4, 0)) // entry 3: free, generation 0
		// A participant entry in a state that does not exist, and a
		// free entry with a pid.
		m.tab.Entry(2).Ctl.Store(layout.PeerCtl{State: 7, PID: 1}.Pack())
		m.tab.Entry(3).Ctl.Store(layout.PeerCtl{State: layout.PeerFree, PID: 99}.Pack())
		// A repair lock with bits no role word has.
		m.tab.RepairLock().Store(1<<50 | 1)
		want := []hmFinding{
			{check.ProblemReservedNonzero, "header.reserved3", layout.OffGeneration + 8, check.ActionNone, -1},
			{check.ProblemReservedNonzero, "hashmap.reserved", base + layout.HashMapOffRepairLock + 8, check.ActionNone, -1},
			hmBucketWant(m, bad, check.ProblemCorruptBucket, check.ActionNone, -1),
			hmHomeWant(m, h1, check.ProblemBadHomeLock, -1),
			hmHomeWant(m, h2, check.ProblemBadHomeLock, -1),
			hmHomeWant(m, h3, check.ProblemOrphanedHome, 3),
			hmPeerWant(m, 2, check.ProblemBadParticipant, check.ActionNone),
			hmPeerWant(m, 3, check.ProblemBadParticipant, check.ActionNone),
			hmLockWant(m, -1),
		}
		return want, []string{"header.reserved3", "hashmap.reserved", fmt.Sprintf("bucket[%d].ctl", bad), "participant[2].ctl", "participant[3].ctl"}
	}},
	{"bucket of an entry being claimed", func(t *testing.T, m *Map) ([]hmFinding, []string) {
		// Entry 2 is being claimed by a live process (this one, stopped
		// in its attach: it holds the entry's lock, as a claimer does
		// before it writes the word). Attach claims only free entries,
		// and an entry is freed only once nothing is stamped with it, so
		// a bucket stamped with it is no operation's: corrupt, and left
		// alone, as is the live claimer's entry.
		hmPreload(t, m)
		holdEntryLock(t, m.Path(), 2)
		m.tab.Entry(2).Ctl.Store(layout.PeerCtl{State: layout.PeerClaiming, PID: uint32(shm.Self().PID)}.Pack())
		i := hmEmptyBucket(t, m)
		m.ctl(i).Store(layout.HashMapWord{State: layout.BucketInserting, Owner: 3, Version: 1}.Pack())
		return []hmFinding{hmBucketWant(m, i, check.ProblemCorruptBucket, check.ActionNone, 2)}, []string{fmt.Sprintf("bucket[%d].ctl", i)}
	}},
}

func TestHashMapCheckReportsDamage(t *testing.T) {
	for _, tc := range hmDamageCases {
		t.Run(tc.name, func(t *testing.T) {
			m := hmCrashMap(t, 4)
			want, _ := tc.damage(t, m)
			rep := m.Check()
			if rep.Path != m.Path() || rep.Kind != layout.KindHashMap || rep.Units != m.Capacity() || rep.Participants != 4 {
				t.Fatalf("report header: %+v", rep)
			}
			if d := cmp.Diff(want, hmPin(rep.Findings), hmSortFindings); d != "" {
				t.Fatalf("Check findings (-want +got):\n%s\nall: %+v", d, rep.Findings)
			}
			for _, f := range rep.Findings {
				if f.Detail == "" {
					t.Errorf("%s: no detail", f.Location)
				}
				if f.Dead && f.OwnerID.PID == 0 {
					t.Errorf("%s: dead owner without an identity: %+v", f.Location, f)
				}
			}
			ro, err := OpenReadOnly(m.Path())
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if d := cmp.Diff(rep, ro.Check()); d != "" {
				t.Fatalf("read-only Check differs from the attached one (-attached +read-only):\n%s", d)
			}
		})
	}
}

// TestHashMapCheckWordsAsRead: a finding's Raw is the word in the file,
// and a reserved area is found wherever in it a byte is set.
func TestHashMapCheckWordsAsRead(t *testing.T) {
	m := hmCrashMap(t, 4)
	hmPreload(t, m)
	hmRunCrashChild(t, m.Path(), "script", crashHashmapInsertAfterClaim, 1)
	mem := m.reg.Bytes()
	for _, f := range m.Check().Findings {
		if got := binary.LittleEndian.Uint64(mem[f.Offset:]); got != f.Raw {
			t.Errorf("%s: Raw %#x, the file holds %#x", f.Location, f.Raw, got)
		}
	}
	base := hmBase(m)
	for off := uint64(layout.HashMapOffRepairLock + 8); off < layout.HashMapOffParticipants; off++ {
		mem[base+off] = 0x80
		n := 0
		for _, f := range m.Check().Findings {
			if f.Location == "hashmap.reserved" {
				n++
			}
		}
		mem[base+off] = 0
		if n != 1 {
			t.Fatalf("byte %d of the map's area set: %d hashmap.reserved findings", off, n)
		}
	}
}

var hmSortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })
