package hashmap

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shmkit/shmkit/transport/check"
)

// Invariant: PlanRepair is exactly what a Repair run next does (the same
// findings at the same locations with the same actions; Repair lists them
// in the order it took them), Repair's counts agree with its findings, and
// after it a Check finds nothing but the words no operation writes, which
// a repair leaves alone.
func TestHashMapCheckPlanMatchesRepair(t *testing.T) {
	for _, tc := range hmDamageCases {
		t.Run(tc.name, func(t *testing.T) {
			m := hmCrashMap(t, 4)
			_, leftAlone := tc.damage(t, m)
			plan := m.PlanRepair()
			if d := cmp.Diff(hmPin(m.Check().Plan()), hmPin(plan)); d != "" {
				t.Fatalf("PlanRepair is not Check().Plan() (-check +plan):\n%s", d)
			}
			for _, f := range plan {
				if f.Action == check.ActionNone {
					t.Fatalf("plan holds a finding a repair leaves alone: %+v", f)
				}
			}
			rep, err := m.Repair()
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(hmPin(plan), hmPin(rep.Done), hmSortFindings); d != "" {
				t.Fatalf("Repair did not do what PlanRepair said (-plan +done):\n%s\ndone: %+v", d, rep.Done)
			}
			dead := 0
			for _, f := range rep.Done {
				if f.Action == check.ActionFreeEntry {
					dead++
				}
				if f.Detail == "" {
					t.Errorf("%s: no detail", f.Location)
				}
			}
			if dead != len(rep.DeadPeers) || rep.Path != m.Path() || rep.Changed() != (len(rep.Done) > 0) {
				t.Fatalf("report: %d entries freed, %d dead peers, path %q, changed %v: %+v", dead, len(rep.DeadPeers), rep.Path, rep.Changed(), rep)
			}
			after := m.Check()
			var got []string
			for _, f := range after.Findings {
				if f.Action != check.ActionNone {
					t.Errorf("after Repair, Check still plans %s at %s: %s", f.Action, f.Location, f.Detail)
				}
				got = append(got, f.Location)
			}
			if d := cmp.Diff(leftAlone, got, hmSortStrings); d != "" {
				t.Fatalf("after Repair, Check finds (-left alone +found):\n%s\n%+v", d, after.Findings)
			}
			if again, err := m.Repair(); err != nil || again.Changed() || len(again.Done) != 0 {
				t.Fatalf("a second Repair: %+v %v", again, err)
			}
		})
	}
}
