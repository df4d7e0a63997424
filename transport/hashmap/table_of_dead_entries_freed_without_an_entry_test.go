package hashmap

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// Invariant: a table whose every participant entry belongs to a dead
// process (no entry free; in one case the repairer entry's holder dead
// too) is repaired without a participant entry: OpenForRepair's Repair,
// running as the repairer entry, rolls back what the dead writers left,
// frees every entry (the repairer entry included) and does exactly what
// PlanRepair said; and an attach to such a table succeeds, through the
// repair it runs itself. Nothing acknowledged is lost either way.
func TestRepairWithoutAnEntryFreesATableOfDeadEntries(t *testing.T) {
	for _, tc := range []struct {
		name         string
		deadRepairer bool // a repairer without an entry died in the repairer entry first
		attach       bool // recover by an attach (Open) rather than OpenForRepair + Repair
	}{
		{"OpenForRepair", false, false},
		{"OpenForRepair, repairer entry dead too", true, false},
		{"attach", false, true},
		{"attach, repairer entry dead too", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const participants = 4
			m := hmCrashMap(t, participants)
			path, vs := m.Path(), m.ValueSize()
			model := hmPreload(t, m)
			m.Close() // every entry is free now
			// Four writers take the four entries and die: one in an
			// insert (after an update it acknowledged), one in an update,
			// one holding a home lock (taken over from the one before),
			// one just attached.
			for _, point := range []string{crashHashmapInsertAfterClaim, crashHashmapUpdateAfterWrite, crashHashmapPutAfterHomeLock} {
				for _, j := range hmRunCrashChild(t, path, "script", point, 1) {
					model = model.apply(j, vs)
				}
			}
			hmRunChild(t, path, "attach")
			wantFreed := participants
			if tc.deadRepairer {
				hmHelper.RunToCrash(t, "repair-unattached", peers.CrashPeersRepairerAfterClaim, 1, proctest.PathArg(path))
				wantFreed++
			}
			v, err := OpenForRepair(path)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			dead := 0
			for _, p := range v.Peers() {
				switch {
				case p.Dead:
					dead++
				case p.State != "free":
					t.Fatalf("entry %d is %s, not dead: %s", p.Index, p.State, p.Reason)
				}
			}
			if dead != wantFreed {
				t.Fatalf("%d dead entries, want %d: %+v", dead, wantFreed, v.Peers())
			}
			plan := v.PlanRepair()
			var h *Map
			if tc.attach {
				// The attach finds no free entry and dead ones: it repairs
				// as the repairer entry, then takes a freed entry.
				if h, err = Open(path); err != nil {
					t.Fatalf("attach to a table of dead entries: %v", err)
				}
				defer h.Close()
				if c := v.Counters(); c.Repairs != 1 {
					t.Fatalf("the attach ran %d repairs, want 1", c.Repairs)
				}
			} else {
				rep, err := v.Repair()
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(hmPin(plan), hmPin(rep.Done), hmSortFindings); d != "" {
					t.Fatalf("Repair did not do what PlanRepair said (-plan +done):\n%s\ndone: %+v", d, rep.Done)
				}
				if rep.Count(check.ActionFreeEntry) != wantFreed || len(rep.DeadPeers) != wantFreed || rep.Count(check.ActionTombstone) != 1 || rep.Count(check.ActionUnlock) != 1 {
					t.Fatalf("repair report: %+v", rep)
				}
				for _, p := range v.Peers() {
					if p.State != "free" {
						t.Fatalf("entry %d left %s after the repair: %s", p.Index, p.State, p.Reason)
					}
				}
				if h, err = Open(path); err != nil {
					t.Fatal(err)
				}
				defer h.Close()
			}
			if rep := v.Check(); !rep.Clean() {
				t.Fatalf("Check after the recovery: %+v", rep.Findings)
			}
			hmCheckExact(t, h, model)
			hmCheckUsable(t, h, model)
		})
	}
}
