package gather

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/sched/fair"
)

// TestFairParticipantKilledMidTurnPoisonsTheOthers: three processes run
// the request stream of TestFairThreeProcessesAgree in distributed turns;
// participant 1 is SIGKILLed inside turn 1, after the turn's completions
// round and before its schedule is agreed (a crash point of its
// all-gather: after publishing round 3, or before publishing round 4).
// Both survivors fail the schedule round of that turn (round 4), poison
// with an error naming participant 1 and its pid (the one that proved the
// death, or the abort it recorded, which the other may read first), then
// release all their work locally; both reach the same state. Nothing
// waits for a round timeout: the survivors' rounds wait 30 s, and their
// errors say they proved the death. Children are bounded by
// proctest.DefaultTimeout.
func TestFairParticipantKilledMidTurnPoisonsTheOthers(t *testing.T) {
	for _, tc := range []struct {
		point string
		after int
	}{
		{crashAllgatherAfterPublish, 3},  // turn 1's completions published
		{crashAllgatherBeforePublish, 4}, // turn 1's schedule written, not published
	} {
		t.Run(tc.point, func(t *testing.T) {
			const n, dead = 3, 1
			path := fairShmPath(t)
			ag, err := Create(path, FairConfig(n, fairProcLimits, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer ag.Close()
			children := make([]*proctest.Child, n)
			for rank := range children {
				var env []string
				if rank == dead {
					env = proctest.Arm(tc.point, tc.after)
				}
				children[rank] = startFairChild(t, "stream", path, rank, env...)
			}
			children[dead].WaitKilled(t, tc.point)
			pid := strconv.Itoa(children[dead].PID())
			var survivors []fairOutcome
			proved := false
			for rank, c := range children {
				if rank == dead {
					continue
				}
				o := fairChildOutcome(t, c)
				survivors = append(survivors, o)
				if !o.Report.Poisoned || !strings.Contains(o.Poison, "schedule: all-gather") {
					t.Fatalf("process %d not poisoned by turn 1's schedule round: %+v", rank, o)
				}
				if o.Turns != 1 || o.Rounds != 4 {
					t.Fatalf("process %d stopped at turn %d round %d, want turn 1 round 4: %s", rank, o.Turns, o.Rounds, o.Poison)
				}
				switch {
				case strings.Contains(o.Poison, ErrPeerDead.Error()):
					if !strings.Contains(o.Poison, "participant 1 (pid "+pid+")") {
						t.Fatalf("process %d: the death is not named participant 1, pid %s: %s", rank, pid, o.Poison)
					}
					proved = true
				case strings.Contains(o.Poison, ErrAborted.Error()):
					if !strings.Contains(o.Poison, "failed round 4 (participant dead concerning participant 1 (pid "+pid+"))") {
						t.Fatalf("process %d: the abort does not name participant 1's death: %s", rank, o.Poison)
					}
				default:
					t.Fatalf("process %d poisoned for another reason than participant 1's death: %s", rank, o.Poison)
				}
				r := o.Report
				if r.ActiveRequests != 0 || r.QueuedWork+r.PreparedWork+r.CurrentInFlightWork != 0 {
					t.Fatalf("process %d kept work after poison: %+v", rank, r)
				}
				for id, st := range o.Statuses {
					if st != fair.RequestFailed {
						t.Fatalf("process %d: request %d %s after poison", rank, id, st)
					}
				}
			}
			if !proved {
				t.Fatalf("no survivor proved participant 1 dead: %q, %q", survivors[0].Poison, survivors[1].Poison)
			}
			a, b := survivors[0], survivors[1]
			if d := cmp.Diff(a.Values, b.Values); d != "" {
				t.Fatalf("survivors committed different values (-0 +2):\n%s", d)
			}
			if d := cmp.Diff(a.Statuses, b.Statuses); d != "" {
				t.Fatalf("survivors ended in different statuses (-0 +2):\n%s", d)
			}
			if abort, aborted := ag.Aborted(); !aborted || abort.Culprit != dead+1 || abort.Round != 4 {
				t.Fatalf("abort %+v (aborted %v)", abort, aborted)
			}
			t.Logf("survivors poisoned at turn 1, round 4: %q; %q", a.Poison, b.Poison)
		})
	}
}
