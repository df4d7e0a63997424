package transport

import (
	"errors"
	"testing"

	"github.com/shmkit/shmkit/layout"
)

// TestPlanStopsWhereRepairStopsAtACorruptWord: a dead consumer holds three
// leases and the slot at the tail, where a repair pushes their copies, is a
// corrupt word. Repair's first push meets it and returns an error before it
// frees any entry. PlanRepair must say exactly that: no action for the
// leases it never reaches, none for the dead entry, and never an empty
// action. Found by an adversarial review (the plan listed the unreached
// leases with an empty action and the entry as freed).
func TestPlanStopsWhereRepairStopsAtACorruptWord(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
	pushIDs(t, r.TryPush, 1, 2, 3)
	runCrashChild(t, r.Path(), "claimall", "test.lease.all-held", 1)
	r.slotWord(3).Store(layout.SlotWord{Length: 5}.Pack()) // free, lap 0, with a length: corrupt
	rep := r.Check()
	for _, f := range rep.Findings {
		if f.Action == "" {
			t.Errorf("%s %s has an empty action", f.Location, f.Problem)
		}
	}
	orphans := 0
	for _, f := range rep.Findings {
		if f.Problem == "orphaned_lease" {
			orphans++
		}
	}
	if orphans != 3 {
		t.Fatalf("Check found %d orphaned leases, want 3: %+v", orphans, rep.Findings)
	}
	plan := r.PlanRepair()
	done, err := r.Repair()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Repair: %v, want ErrCorrupt", err)
	}
	if len(plan) != len(done.Done) {
		t.Fatalf("plan %+v, but the repair did %+v", plan, done.Done)
	}
	for i := range plan {
		if plan[i].Location != done.Done[i].Location || plan[i].Action != done.Done[i].Action {
			t.Errorf("plan row %d %s %s, repair did %s %s", i, plan[i].Location, plan[i].Action, done.Done[i].Location, done.Done[i].Action)
		}
	}
}
