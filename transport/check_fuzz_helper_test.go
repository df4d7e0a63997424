package transport

import (
	"testing"

	"github.com/shmkit/shmkit/transport/check"
)

// fuzzCheckReport holds a Check of a file the fuzzer damaged to what every
// report promises, whatever the words: every finding names a problem, a
// location and an action (none at worst, never empty), and the plan is the
// findings with an action. Reaching it at all means Check did not panic.
func fuzzCheckReport(t *testing.T, who string, rep check.Report) {
	t.Helper()
	acts := 0
	for _, f := range rep.Findings {
		if f.Problem == "" || f.Location == "" || f.Action == "" {
			t.Errorf("%s Check: a finding without a problem, location or action: %+v", who, f)
		}
		if f.Action != check.ActionNone {
			acts++
		}
	}
	if n := len(rep.Plan()); n != acts {
		t.Errorf("%s Check: plan of %d, %d findings with an action", who, n, acts)
	}
}
