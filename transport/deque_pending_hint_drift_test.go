package transport

import (
	"strings"
	"testing"

	"github.com/shmkit/shmkit/transport/check"
)

// The deque's Repair raises a pending hint found below the returned slots
// only when no other participant is alive (a count taken while others take
// and return can be off). Check and PlanRepair say the same: with another
// participant alive the pending_hint finding has no action, PlanRepair
// leaves it out, and Repair does not raise it; once that participant is
// gone, all three raise it.
func TestDequePendingHintRaisedOnlyWhenAlone(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8})
	pushIDs(t, d.TryPush, 1, 2, 3)
	th, err := OpenDeque(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	l, err := th.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Release(l); err != nil { // one returned slot, counted
		t.Fatal(err)
	}
	d.pending.Store(0) // damaged: below the returned slot

	hint := func(fs []check.Finding) *check.Finding {
		for i := range fs {
			if fs[i].Problem == check.ProblemPendingHint {
				return &fs[i]
			}
		}
		return nil
	}
	f := hint(d.Check().Findings)
	if f == nil || f.Location != "deque.pending" || f.Action != check.ActionNone || !strings.Contains(f.Detail, "alive") {
		t.Fatalf("with a thief alive, Check's pending_hint finding is %+v; want one with action none saying why", f)
	}
	if p := hint(d.PlanRepair()); p != nil {
		t.Fatalf("with a thief alive, PlanRepair plans %+v", p)
	}
	rep, err := d.Repair()
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Count(check.ActionRaiseHint); n != 0 || d.pending.Load() != 0 {
		t.Fatalf("with a thief alive, Repair raised the hint (%d raise_hint, pending %d)", n, d.pending.Load())
	}

	th.Close()
	if f := hint(d.PlanRepair()); f == nil || f.Action != check.ActionRaiseHint {
		t.Fatalf("alone, PlanRepair's pending_hint is %+v; want raise_hint", f)
	}
	rep, err = d.Repair()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(check.ActionRaiseHint) != 1 || d.pending.Load() != 1 {
		t.Fatalf("alone, Repair did %+v, pending %d; want the hint raised to 1", rep.Done, d.pending.Load())
	}
	if !d.Check().Clean() {
		t.Fatalf("after raising the hint: %+v", d.Check().Findings)
	}
}
