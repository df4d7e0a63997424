package gather

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/fair"
	"github.com/shmkit/shmkit/shm"
)

const (
	fairEnvRank    = "SHMKIT_FAIR_RANK"
	fairDigestLine = "FAIR-OUTCOME "
	fairStopWord   = 0xffffffff
)

var fairHelper = proctest.Helper{Test: "TestFairHelperProcess", Prefix: "fair-"}

// TestFairHelperProcess is the child side of the fair scheduler's and the
// all-gather's multi-process tests. Roles:
//
//	fair-stream, fair-diverge: run fairProcStream as participant
//	  $SHMKIT_FAIR_RANK of the all-gather file $SHMKIT_TEST_PATH and print
//	  its outcome (fair-diverge enqueues one divergent transition);
//	fair-rounds: run rounds of [rank, round] until killed or 20 rounds;
//	fair-gated: once $FAIR_GATE exists, run rounds 1 to 3, then stay joined;
//	fair-echo: run rounds until participant 0 sends fairStopWord.
func TestFairHelperProcess(t *testing.T) { fairHelper.Serve(fairChild) }

func fairChild(role string) error {
	rank, err := strconv.Atoi(os.Getenv(fairEnvRank))
	if err != nil {
		return err
	}
	ag, err := Open(proctest.EnvPath())
	if err != nil {
		return err
	}
	defer ag.Close()
	m, err := ag.Join(rank, Timeout(30*time.Second))
	if err != nil {
		return err
	}
	defer m.Leave()
	if p := shm.ArmedCrashPoint(); p != "" {
		fmt.Println("armed", p)
	}
	switch role {
	case "stream", "diverge":
		o, err := fairProcStream(m, rank, role == "diverge")
		if err != nil {
			return err
		}
		b, err := json.Marshal(o)
		if err != nil {
			return err
		}
		fmt.Println(fairDigestLine + string(b))
		return nil
	case "rounds":
		for r := uint32(1); r <= 20; r++ {
			if _, err := m.AllGather(nil, []uint32{uint32(rank), r}); err != nil {
				return err
			}
			fmt.Println("round", r)
		}
		return nil
	case "gated":
		// Joined: wait for the gate file, run rounds 1 to 3, then stay
		// joined until killed (at most a minute).
		fmt.Println("joined")
		gate := os.Getenv("FAIR_GATE")
		deadline := time.Now().Add(time.Minute)
		for !proctest.Exists(gate) {
			if time.Now().After(deadline) {
				return fmt.Errorf("gate %s never opened", gate)
			}
			time.Sleep(time.Millisecond)
		}
		for r := uint32(1); r <= 3; r++ {
			if _, err := m.AllGather(nil, []uint32{uint32(rank), r}); err != nil {
				return err
			}
			fmt.Println("round", r)
		}
		time.Sleep(time.Minute)
		return nil
	case "echo":
		var buf []uint32
		for {
			out, err := m.AllGather(buf[:0], []uint32{uint32(rank), 0})
			if err != nil {
				return err
			}
			buf = out
			if out[0] == fairStopWord {
				return nil
			}
		}
	}
	return fmt.Errorf("unknown role %q", role)
}

func startFairChild(t testing.TB, role, path string, rank int, env ...string) *proctest.Child {
	t.Helper()
	return fairHelper.Start(t, role, append(env, proctest.PathArg(path), fairEnvRank+"="+strconv.Itoa(rank))...)
}

func fairChildOutcome(t *testing.T, c *proctest.Child) fairOutcome {
	t.Helper()
	c.MustSucceed(t)
	out, _ := c.Output()
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, fairDigestLine); ok {
			var o fairOutcome
			if err := json.Unmarshal([]byte(rest), &o); err != nil {
				t.Fatal(err)
			}
			return o
		}
	}
	t.Fatalf("child printed no outcome:\n%s", out)
	return fairOutcome{}
}

// TestFairThreeProcessesAgree: three processes run the same request stream
// through distributed turns over a shared-memory all-gather file, with
// completions arriving at different times in each. They end in the same
// state, with identical reports, after the same number of turns.
func TestFairThreeProcessesAgree(t *testing.T) {
	const n = 3
	path := fairShmPath(t)
	ag, err := Create(path, Config{Participants: n, MaxWords: fairProcLimits.ConsensusWords(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()
	var children []*proctest.Child
	for rank := 0; rank < n; rank++ {
		children = append(children, startFairChild(t, "stream", path, rank))
	}
	var outcomes []fairOutcome
	for _, c := range children {
		outcomes = append(outcomes, fairChildOutcome(t, c))
	}
	o := outcomes[0]
	if o.Poison != "" {
		t.Fatalf("poisoned: %s", o.Poison)
	}
	if o.Values[1] != 4 || o.Values[3] != 3 || o.Values[4] != 2 || o.Statuses[5] != fair.RequestCancelled {
		t.Fatalf("outcome %+v", o)
	}
	if o.Statuses[2] != fair.RequestDeadlineExceeded && o.Values[2] != 3 {
		t.Fatalf("request 2 neither expired nor completed: %+v", o)
	}
	for rank := 1; rank < n; rank++ {
		if d := cmp.Diff(o, outcomes[rank]); d != "" {
			t.Fatalf("process %d disagrees with process 0 (-0 +%d):\n%s", rank, rank, d)
		}
	}
	t.Logf("agreed after %d turns, %d rounds: request 2 %s; report %+v", o.Turns, o.Rounds, o.Statuses[2], o.Report)
}

// TestFairDivergentProcessPoisonsAll: one of three processes enqueues a
// transition with another descriptor. When it is scheduled, every process
// sees the schedules differ, and all three poison in the same round.
func TestFairDivergentProcessPoisonsAll(t *testing.T) {
	const n = 3
	path := fairShmPath(t)
	ag, err := Create(path, Config{Participants: n, MaxWords: fairProcLimits.ConsensusWords(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()
	var children []*proctest.Child
	for rank := 0; rank < n; rank++ {
		role := "stream"
		if rank == 1 {
			role = "diverge"
		}
		children = append(children, startFairChild(t, role, path, rank))
	}
	var outcomes []fairOutcome
	for _, c := range children {
		outcomes = append(outcomes, fairChildOutcome(t, c))
	}
	for rank, o := range outcomes {
		if !strings.Contains(o.Poison, "schedule mismatch") || !o.Report.Poisoned {
			t.Fatalf("process %d not poisoned by the schedule: %+v", rank, o)
		}
		if o.Report.CurrentInFlightWork != 0 || o.Report.ActiveRequests != 0 {
			t.Fatalf("process %d kept work after poison: %+v", rank, o.Report)
		}
		if o.Turns != outcomes[0].Turns || o.Rounds != outcomes[0].Rounds {
			t.Fatalf("process %d poisoned at turn %d round %d, process 0 at %d, %d", rank, o.Turns, o.Rounds, outcomes[0].Turns, outcomes[0].Rounds)
		}
		for id, st := range o.Statuses {
			if id != 5 && st != fair.RequestFailed {
				t.Fatalf("process %d: request %d %s after poison", rank, id, st)
			}
		}
	}
	t.Logf("all poisoned at turn %d: %s", outcomes[0].Turns, outcomes[0].Poison)
}

// TestAllGatherParticipantKilledMidRound kills a participant at each step
// of a round (and while joining) with a crash point. The survivor's round
// fails with ErrPeerDead naming it, long before the round timeout,
// and the group is aborted for good.
func TestAllGatherParticipantKilledMidRound(t *testing.T) {
	for _, tc := range []struct {
		point     string
		after     int
		failRound uint32 // the survivor's first failing round
	}{
		{crashAllgatherJoinAfterClaim, 1, 1},
		{crashAllgatherBeforePublish, 3, 3},
		{crashAllgatherAfterPublish, 3, 4}, // round 3 was published: it completes
	} {
		t.Run(tc.point, func(t *testing.T) {
			path := fairShmPath(t)
			ag, err := Create(path, Config{Participants: 2, MaxWords: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer ag.Close()
			m := joinGather(t, ag, 0, Timeout(time.Minute))
			child := startFairChild(t, "rounds", path, 1, proctest.Arm(tc.point, tc.after)...)
			var failed error
			var r uint32
			var start time.Time
			for r = 1; r <= 20; r++ {
				start = time.Now()
				out, err := m.AllGather(nil, []uint32{0, r})
				if err != nil {
					failed = err
					break
				}
				if out[2] != 1 || out[3] != r {
					t.Fatalf("round %d: %v", r, out)
				}
			}
			took := time.Since(start)
			child.WaitKilled(t, tc.point)
			if !errors.Is(failed, ErrPeerDead) || r != tc.failRound {
				t.Fatalf("round %d: %v; want ErrPeerDead in round %d", r, failed, tc.failRound)
			}
			pid := strconv.Itoa(child.PID())
			if !strings.Contains(failed.Error(), "participant 1 (pid "+pid+")") {
				t.Fatalf("error does not name participant 1, pid %s: %v", pid, failed)
			}
			if took > 20*time.Second {
				t.Fatalf("death noticed after %v: the timeout, not proof of death", took)
			}
			abort, aborted := ag.Aborted()
			if !aborted || abort.Reason != layout.AGAbortDead || abort.Culprit != 2 || abort.Reporter != 1 || abort.Round != tc.failRound {
				t.Fatalf("abort %+v", abort)
			}
			if _, err := m.AllGather(nil, []uint32{0, 99}); !errors.Is(err, ErrAborted) {
				t.Fatalf("round after the abort: %v", err)
			}
			t.Logf("%s: round %d failed after %v: %v", tc.point, r, took.Round(time.Millisecond), failed)
		})
	}
}
