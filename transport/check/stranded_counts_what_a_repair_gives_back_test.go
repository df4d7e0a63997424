package check

import "testing"

// Stranded counts the findings whose repair gives a message back to the
// consumers, and nothing else (half-written slots, poison, entries).
func TestStrandedCountsWhatARepairGivesBack(t *testing.T) {
	tests := []struct {
		actions []Action
		want    int
	}{
		{nil, 0},
		{[]Action{ActionFreeEntry, ActionRelease, ActionNone, ActionTakeOverLock, ActionFreeOwner, ActionRaiseHint}, 0},
		{[]Action{ActionRequeue, ActionFreeEntry}, 1},
		{[]Action{ActionRequeue, ActionRequeueInPlace, ActionDefer}, 3},
		{[]Action{ActionReturn, ActionRollBack, ActionCountIn, ActionFreeOwner}, 3},
		{[]Action{ActionTombstone, ActionUnlock, ActionReleaseHome}, 0},
	}
	for _, tc := range tests {
		var r Report
		for _, a := range tc.actions {
			r.Findings = append(r.Findings, Finding{Action: a})
		}
		if got := r.Stranded(); got != tc.want {
			t.Errorf("Stranded of %v = %d, want %d", tc.actions, got, tc.want)
		}
	}
}
