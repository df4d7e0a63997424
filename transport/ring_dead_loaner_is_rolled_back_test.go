package transport

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// A loan whose owner dies is an unpublished write: the slot is WRITING
// naming the dead owner, at the tail or behind it, and a repair on proof
// of death releases it exactly as it releases a dead producer's
// half-written slot. These tests kill a real child at every step of
// TryLoan, Publish and Abort, and while it writes into a loan, and check
// that the repair rolls back exactly that position and disturbs nothing
// else: every message published before and after it is delivered exactly
// once, in order, and the loaned one never.

var loanHelper = proctest.Helper{Test: "TestRingLoanHelperProcess", Prefix: "loan-"}

// testLoanWriting is where a loaner child dies with its loan half written
// (a test point: the writing is the caller's, not the library's).
const testLoanWriting = "test.loan.writing"

// TestRingLoanHelperProcess is the child side. Roles:
//
//	loaner  for ids FIRST..FIRST+COUNT-1: Loan 20 bytes, write the
//	        message in two halves (testLoanWriting between them), then
//	        Publish it and print "ok ID", or, for the id ABORT, Abort it
//	        and print "aborted ID"
//	holder  Loan 20 bytes for FIRST and write half of it, push
//	        FIRST+1..FIRST+3 with TryPush (printing "ok ID"), print
//	        "holding 1" and wait, holding the loan, until killed
//
// and the roles of ring_loans_and_pushes_deliver_exactly_once_test.go.
func TestRingLoanHelperProcess(t *testing.T) { loanHelper.Serve(loanChild) }

func loanChild(role string) error {
	r, err := OpenRing(proctest.EnvPath())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch role {
	case "loaner":
		first, count, abort := proctest.EnvUint64("FIRST"), proctest.EnvUint64("COUNT"), proctest.EnvUint64("ABORT")
		for id := first; id < first+count; id++ {
			l, err := r.Loan(ctx, 20)
			if err != nil {
				return err
			}
			msg := encodeMsg(id)
			copy(l.Data()[:10], msg)
			shm.CrashPoint(testLoanWriting)
			copy(l.Data()[10:], msg[10:])
			if id == abort {
				if err := r.Abort(l); err != nil {
					return err
				}
				fmt.Printf("aborted %d\n", id)
				continue
			}
			if err := r.Publish(l); err != nil {
				return err
			}
			fmt.Printf("ok %d\n", id)
		}
	case "holder":
		first := proctest.EnvUint64("FIRST")
		l, err := r.TryLoan(20)
		if err != nil {
			return err
		}
		copy(l.Data()[:10], encodeMsg(first))
		for id := first + 1; id <= first+3; id++ {
			if err := r.TryPush(encodeMsg(id)); err != nil {
				return err
			}
			fmt.Printf("ok %d\n", id)
		}
		fmt.Println("holding 1")
		<-ctx.Done() // killed long before
		return ctx.Err()
	default:
		return loanMPChild(r, role)
	}
	return r.Close()
}

// loanCrashCases are the steps a loaner child dies at: whether the slot
// is then an orphaned write, and how many of its loans were published.
var loanCrashCases = []struct {
	point     string
	orphaned  bool   // the slot is WRITING(dead): a repair releases it
	published int    // of ids 100.., counting the one the child died in
	abort     uint64 // the id the child aborts
}{
	{crashRingLoanAfterClaim, true, 3, 0},
	{crashRingLoanAfterAdvance, true, 3, 0},
	{testLoanWriting, true, 3, 0},
	{crashRingPublishBeforeReady, true, 3, 0},
	{crashRingPublishAfterReady, false, 4, 0}, // READY: the Publish did not return, the message is out
	{crashRingAbortAfterFree, false, 3, 103},  // freed: nothing to repair, Abandoned not counted
}

func TestCrashLoaner(t *testing.T) {
	for _, tc := range loanCrashCases {
		for _, pushFirst := range []bool{true, false} {
			name := tc.point + "/repair-then-push"
			if pushFirst {
				name = tc.point + "/push-then-repair"
			}
			t.Run(name, func(t *testing.T) {
				r := crashRing(t, RingConfig{Capacity: 16, Participants: 8})
				after := 4
				if tc.point == crashRingAbortAfterFree {
					after = 1
				}
				log := loanHelper.RunToCrash(t, "loaner", tc.point, after, proctest.PathArg(r.Path()),
					"FIRST=100", "COUNT=10", fmt.Sprintf("ABORT=%d", tc.abort)).Log()
				if got := len(log["ok"]); got != 3 {
					t.Fatalf("child confirmed %d publishes before dying, want 3", got)
				}
				want := seq(100, uint64(tc.published))
				later := seq(200, 4)
				push := func() { pushIDs(t, r.TryPush, later...) }
				if pushFirst {
					// Messages after the loan, while its slot still names
					// the dead owner (after-claim: the tail is still at
					// the loan; this push helps it on).
					push()
				}
				if n := countProblem(r.Scan(), SlotOrphanedWrite); n != b2i(tc.orphaned) {
					t.Fatalf("want %d orphaned writes before the repair, got %d: %+v", b2i(tc.orphaned), n, r.Scan().Slots)
				}
				plan := cut(r.PlanRepair(), false)
				wantPlan := []finding{{Loc: "participant[1].ctl", Action: check.ActionFreeEntry}}
				if tc.orphaned {
					// Position 103 of a 16-slot ring: slot 3, the 4th loan.
					wantPlan = append(wantPlan, finding{Loc: "slot[3].word", Action: check.ActionRelease})
				}
				if !slices.Equal(plan, sorted(wantPlan)) {
					t.Fatalf("plan %+v, want %+v", plan, sorted(wantPlan))
				}
				rep := mustRepair(t, r)
				if done := cut(rep.Done, false); !slices.Equal(done, plan) {
					t.Fatalf("repair did %+v, planned %+v", done, plan)
				}
				if len(rep.DeadPeers) != 1 || rep.Count(check.ActionRelease) != b2i(tc.orphaned) {
					t.Fatalf("repair report %+v", rep)
				}
				if again := mustRepair(t, r); again.Changed() {
					t.Fatalf("second repair changed something: %+v", again)
				}
				if !pushFirst {
					push()
				}
				assertHealthy(t, r)
				if c := r.Counters(); c.Abandoned != uint64(b2i(tc.orphaned)) {
					// An abort killed after its free is not counted.
					t.Fatalf("abandoned %d, want %d (%+v)", c.Abandoned, b2i(tc.orphaned), c)
				}
				got := drainAndCheckUsable(t, r)
				if w := append(want, later...); !slices.Equal(got, w) {
					t.Fatalf("delivered %v, want exactly %v in order", got, w)
				}
			})
		}
	}
}

// startHolder starts a holder child (see TestRingLoanHelperProcess) and
// returns it once it holds its loan, half written, behind the three
// messages it pushed after it.
func startHolder(t *testing.T, r *Ring) *proctest.Child {
	t.Helper()
	c := loanHelper.Start(t, "holder", proctest.PathArg(r.Path()), "FIRST=100")
	c.WaitLine(t, "holding")
	return c
}

func killHolder(t *testing.T, c *proctest.Child) {
	t.Helper()
	c.Kill()
	if err := c.Wait(); err == nil {
		t.Fatal("the holder was not killed")
	}
}

// TestLiveLoanerIsLeftAloneAndADeadOneRolledBack: a loan held by a live
// process in the middle of the ring (messages published after it) is no
// problem: Check is clean, Repair changes nothing, consumers wait at it.
// Once the process is SIGKILLed, the same slot is an orphaned write that
// Check plans to release and Repair releases, and the messages behind it
// are delivered exactly once.
func TestLiveLoanerIsLeftAloneAndADeadOneRolledBack(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 8, Participants: 8})
	c := startHolder(t, r)
	if rep := r.Check(); !rep.Clean() {
		t.Fatalf("a live loan: Check %+v", rep.Findings)
	}
	if rep := mustRepair(t, r); rep.Changed() {
		t.Fatalf("a live loan: Repair changed %+v", rep)
	}
	s := r.Scan()
	if s.Problems != 0 || s.States[layout.SlotWriting] != 1 || s.Counters.Depth() != 4 {
		t.Fatalf("a live loan: scan %+v", s)
	}
	if _, err := r.TryPop(make([]byte, 64)); err != ErrEmpty {
		t.Fatalf("a consumer passed a live loan: %v", err)
	}

	killHolder(t, c)
	plan := r.Check()
	if got, want := cut(plan.Findings, true), sorted([]finding{
		{"slot[0].word", check.ProblemOrphanedWrite, check.ActionRelease},
		{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
	}); !slices.Equal(got, want) {
		t.Fatalf("after the kill: Check %+v, want %+v", plan.Findings, want)
	}
	rep := mustRepair(t, r)
	if done := cut(rep.Done, false); !slices.Equal(done, cut(plan.Plan(), false)) {
		t.Fatalf("repair did %+v, planned %+v", rep.Done, plan.Plan())
	}
	assertHealthy(t, r)
	if got := drainAndCheckUsable(t, r); !slices.Equal(got, []uint64{101, 102, 103}) {
		t.Fatalf("delivered %v, want exactly 101 102 103", got)
	}
}

// TestDeadLoanerDoesNotBlockConsumersOrProducers: blocked calls behind a
// dead loaner's slot heal the ring themselves on proof of death: a
// consumer waiting at it, and a producer (here a blocking Loan) that has
// come round a lap to it on a full ring.
func TestDeadLoanerDoesNotBlockConsumersOrProducers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Run("consumer", func(t *testing.T) {
		r := crashRing(t, RingConfig{Capacity: 8, Participants: 8})
		killHolder(t, startHolder(t, r))
		buf := make([]byte, 64)
		for _, want := range []uint64{101, 102, 103} {
			n, err := r.Pop(ctx, buf)
			if err != nil {
				t.Fatalf("consumer stayed blocked behind a dead loaner: %v", err)
			}
			if id, _ := decodeMsg(buf[:n]); id != want {
				t.Fatalf("got %d want %d", id, want)
			}
		}
		if c := r.Counters(); c.Abandoned != 1 {
			t.Fatalf("counters %+v", c)
		}
	})
	t.Run("producer", func(t *testing.T) {
		// 4 slots: the loan and the three pushes fill the ring; the next
		// push meets the loan's slot a lap on.
		r := crashRing(t, RingConfig{Capacity: 4, Participants: 8})
		killHolder(t, startHolder(t, r))
		l, err := r.Loan(ctx, 20) // a blocking loan heals as a blocking push does
		if err != nil {
			t.Fatalf("producer stayed blocked behind a dead loaner: %v", err)
		}
		copy(l.Data(), encodeMsg(104))
		if err := r.Publish(l); err != nil {
			t.Fatal(err)
		}
		if got := drain(t, r); !slices.Equal(got, []uint64{101, 102, 103, 104}) {
			t.Fatalf("delivered %v", got)
		}
	})
}

// TestRingCheckPlanMatchesRepairForLoans: Check's plan for loans, live and
// dead, is what Repair then does (the cases of
// check_plan_matches_repair_test.go).
func TestRingCheckPlanMatchesRepairForLoans(t *testing.T) {
	runCheckCases(t, []checkCase{
		{
			name: "live loan behind published messages",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
				pushIDs(t, r.TryPush, 1)
				l, err := r.TryLoan(20)
				if err != nil {
					t.Fatal(err)
				}
				pushIDs(t, r.TryPush, 2)
				t.Cleanup(func() { r.Abort(l) })
				return r
			},
		},
		{
			name: "dead loaner mid-write",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
				loanHelper.RunToCrash(t, "loaner", testLoanWriting, 2, proctest.PathArg(r.Path()), "FIRST=1", "COUNT=3")
				return r
			},
			want: []finding{
				{"slot[1].word", check.ProblemOrphanedWrite, check.ActionRelease},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
			},
		},
		{
			name: "dead loaner before its tail advance",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
				loanHelper.RunToCrash(t, "loaner", crashRingLoanAfterClaim, 1, proctest.PathArg(r.Path()), "FIRST=1", "COUNT=1")
				return r
			},
			want: []finding{
				{"slot[0].word", check.ProblemOrphanedWrite, check.ActionRelease},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
			},
		},
	})
}
