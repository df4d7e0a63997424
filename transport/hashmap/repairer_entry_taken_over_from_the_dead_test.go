package hashmap

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// Invariant: a repairer that takes the table's repairer entry over from a
// holder that died (at any point of its repair) finishes that holder's
// work: it takes over the dead holder's repair lock (stamped with the same
// entry at the previous generation, which it does not mistake for its
// own), rolls back what the dead writers left, frees their entries and
// the repairer entry, does exactly what PlanRepair said, and reports the
// dead holder by the dead process's identity, not its own.

func init() {
	// Check and repair without an entry of one's own, as tools do.
	hmUnattachedRoles["repair-unattached"] = func(path string) error {
		m, err := OpenForRepair(path)
		if err != nil {
			return err
		}
		defer m.Close()
		_, err = m.Repair()
		return err
	}
}

func TestRepairerEntryTakenOverFromADeadHolderFinishesItsWork(t *testing.T) {
	points := []struct {
		point      string
		lockHeld   bool // the dead repairer held the repair lock
		writerDone bool // and had freed the dead writer's entry
	}{
		{peers.CrashPeersRepairerAfterClaim, false, false},
		{crashHashmapRepairAfterMark, true, false},
		{crashHashmapRepairAfterRollback, true, false},
		{peers.CrashPeersRepairerBeforeRelease, false, true},
	}
	for _, tc := range points {
		t.Run(tc.point, func(t *testing.T) {
			m := hmCrashMap(t, 4) // this handle: entry 0, alive throughout
			model := hmPreload(t, m)
			// A writer (entry 1) dies mid-update of key 0, then a
			// repairer without an entry dies in the repairer entry.
			hmRunCrashChild(t, m.Path(), "script", crashHashmapUpdateAfterWrite, 1)
			dead := hmHelper.RunToCrash(t, "repair-unattached", tc.point, 1, proctest.PathArg(m.Path()))
			deadPID := int32(dead.PID())

			v, err := OpenForRepair(m.Path())
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			ri := v.tab.RepairerIndex()
			before := v.Peers()[ri]
			if !before.Repairer || before.State != "active" || !before.Dead || before.ID.PID != deadPID {
				t.Fatalf("the dead repairer's entry: %+v (its pid was %d)", before, deadPID)
			}
			deadGen := layout.UnpackPeer(v.tab.Entry(ri).Ctl.Load()).Gen
			lock := v.tab.RepairLock().Load()
			if want := peers.LockValue(uint16(ri+1), deadGen); tc.lockHeld != (lock == want) || !tc.lockHeld && lock != 0 {
				t.Fatalf("repair lock %#x, want the dead repairer's %#x: %v", lock, want, tc.lockHeld)
			}

			plan := v.PlanRepair()
			rep, err := v.Repair()
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(hmPin(plan), hmPin(rep.Done), hmSortFindings); d != "" {
				t.Fatalf("Repair did not do what PlanRepair said (-plan +done):\n%s\ndone: %+v", d, rep.Done)
			}
			wantDead := 2
			if tc.writerDone {
				wantDead = 1
			}
			if len(rep.DeadPeers) != wantDead || rep.Count(check.ActionFreeEntry) != wantDead {
				t.Fatalf("repair: %d dead peers, %d entries freed, want %d: %+v", len(rep.DeadPeers), rep.Count(check.ActionFreeEntry), wantDead, rep)
			}
			for _, p := range rep.DeadPeers {
				if p.Index == int(ri) && (p.ID.PID != deadPID || p.Self) {
					t.Fatalf("the dead repairer is reported as %+v, its pid was %d", p, deadPID)
				}
			}
			for _, f := range rep.Done {
				switch f.Action {
				case check.ActionTakeOverLock:
					if f.Owner != int(ri) || f.OwnerID.PID != deadPID || !strings.Contains(f.Detail, "previous holder") {
						t.Fatalf("lock takeover reported as %+v, the dead repairer's pid was %d", f, deadPID)
					}
				case check.ActionFreeEntry:
					if f.Owner == int(ri) && (f.OwnerID.PID != deadPID || layout.UnpackPeer(f.Raw).PID != uint32(deadPID)) {
						t.Fatalf("the repairer entry's release reported as %+v, the dead repairer's pid was %d", f, deadPID)
					}
				}
			}
			if got := v.tab.RepairLock().Load(); got != 0 {
				t.Fatalf("repair lock %#x after the repair", got)
			}
			// The repairer entry went to the new holder at the next
			// generation and was freed at the one after.
			if c := layout.UnpackPeer(v.tab.Entry(ri).Ctl.Load()); c.State != layout.PeerFree || c.Gen != deadGen+2 {
				t.Fatalf("repairer entry after the repair: %+v (the dead holder's generation %d)", c, deadGen)
			}
			if rep := v.Check(); !rep.Clean() {
				t.Fatalf("Check after the repair: %+v", rep.Findings)
			}
			if again, err := v.Repair(); err != nil || again.Changed() || len(again.DeadPeers) != 0 {
				t.Fatalf("a second repair: %+v %v", again, err)
			}
			hmCheckExact(t, m, model)
			hmCheckUsable(t, m, model)
		})
	}
}
