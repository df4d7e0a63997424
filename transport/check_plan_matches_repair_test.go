package transport

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// The invariants of the repair walk, for rings and deques, over damaged
// states made by real processes killed mid-operation (as the crash tests
// do) or by words written into the file:
//
//   - Check reports each problem with its Location, Offset, check.Problem and
//     check.Action, and the Location is what layout's field table calls the
//     Offset;
//   - PlanRepair is exactly what a following Repair does (the same
//     locations and actions);
//   - after the Repair, Check finds only what no repair touches (poison,
//     corrupt words) or what the case says is left (deferrals), and a
//     second PlanRepair again matches a second Repair.

// checked is what rings and deques share.
type checked interface {
	Check() check.Report
	PlanRepair() []check.Finding
	Repair() (check.RepairReport, error)
	Header() layout.Header
}

// finding is a check.Finding cut to what these tests compare.
type finding struct {
	Loc     string
	Problem check.Problem
	Action  check.Action
}

func cut(fs []check.Finding, withProblem bool) []finding {
	out := []finding{}
	for _, f := range fs {
		g := finding{Loc: f.Location, Action: f.Action}
		if withProblem {
			g.Problem = f.Problem
		}
		out = append(out, g)
	}
	return sorted(out)
}

func sorted(out []finding) []finding {
	out = append([]finding{}, out...)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Loc != b.Loc {
			return a.Loc < b.Loc
		}
		if a.Problem != b.Problem {
			return a.Problem < b.Problem
		}
		return a.Action < b.Action
	})
	return out
}

// untouched are the problems no repair changes.
var untouched = map[check.Problem]bool{
	check.ProblemPoisoned: true, check.ProblemCorruptSlot: true, check.ProblemBadDeliveries: true, check.ProblemBadLap: true,
	check.ProblemHeadTail: true, check.ProblemTopBottom: true, check.ProblemForeignWrite: true, check.ProblemReservedNonzero: true,
	check.ProblemBadParticipant: true,
}

type checkCase struct {
	name  string
	setup func(t *testing.T) checked
	want  []finding // Check's findings before the repair
	after []finding // after it; nil: want's untouched findings
}

func runCheckCases(t *testing.T, cases []checkCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.setup(t)
			hdr := h.Header()
			m, err := hdr.Map()
			if err != nil {
				t.Fatal(err)
			}
			rep := h.Check()
			logFindings(t, "check", rep.Findings)
			if diff := cmp.Diff(sorted(tc.want), cut(rep.Findings, true)); diff != "" {
				t.Errorf("Check findings (-want +got):\n%s", diff)
			}
			if rep.Clean() != (len(tc.want) == 0) {
				t.Errorf("Clean() = %v with %d findings", rep.Clean(), len(rep.Findings))
			}
			assertLocated(t, &m, rep.Findings)
			for _, f := range rep.Findings {
				if f.Detail == "" || strings.Contains(f.Detail, "ringctl") {
					t.Errorf("%s: detail %q (empty, or names a tool)", f.Location, f.Detail)
				}
				if f.Action == "" || f.Problem == "" {
					t.Errorf("%s: problem %q, action %q: both must be named", f.Location, f.Problem, f.Action)
				}
			}

			for round := 1; round <= 2; round++ {
				plan := h.PlanRepair()
				done, err := h.Repair()
				if err != nil {
					t.Fatal(err)
				}
				logFindings(t, "done", done.Done)
				if diff := cmp.Diff(cut(plan, false), cut(done.Done, false)); diff != "" {
					t.Errorf("repair %d: PlanRepair and what Repair did differ (-plan +done):\n%s", round, diff)
				}
				assertLocated(t, &m, done.Done)
				for _, f := range done.Done {
					if f.Action == check.ActionNone {
						t.Errorf("repair %d: Done lists %s with action none", round, f.Location)
					}
				}
			}

			after := tc.after
			if after == nil {
				after = []finding{}
				for _, f := range tc.want {
					if untouched[f.Problem] {
						after = append(after, f)
					}
				}
			}
			got := h.Check().Findings
			if diff := cmp.Diff(sorted(after), cut(got, true)); diff != "" {
				logFindings(t, "after", got)
				t.Errorf("Check after repair (-want +got):\n%s", diff)
			}
		})
	}
}

// assertLocated checks that each finding's Location names the field at its
// Offset, as layout's field table (and so hexdump) labels it.
func assertLocated(t *testing.T, m *layout.Map, fs []check.Finding) {
	t.Helper()
	for _, f := range fs {
		name, _, start, ok := m.Locate(f.Offset)
		if !ok || name != f.Location || start != f.Offset {
			t.Errorf("%s at %#x: the field table has %q at %#x (ok %v)", f.Location, f.Offset, name, start, ok)
		}
	}
}

func logFindings(t *testing.T, what string, fs []check.Finding) {
	t.Helper()
	for _, f := range fs {
		t.Logf("%s: %s %#x %s %s: %s", what, f.Location, f.Offset, f.Problem, f.Action, f.Detail)
	}
}

func pushIDs(t *testing.T, push func([]byte) error, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		if err := push(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRingCheckPlanMatchesRepair(t *testing.T) {
	runCheckCases(t, []checkCase{
		{
			name: "healthy",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
				pushIDs(t, r.TryPush, 1, 2, 3)
				return r
			},
		},
		{
			name: "dead consumer's lease, room to requeue",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
				pushIDs(t, r.TryPush, 1, 2, 3)
				runCrashChild(t, r.Path(), "hold", "test.lease.processing", 1)
				return r
			},
			want: []finding{
				{"slot[0].word", check.ProblemOrphanedLease, check.ActionRequeue},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
			},
		},
		{
			name: "dead producer mid-write",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
				runCrashChild(t, r.Path(), "producer", crashRingPushAfterWrite, 1, "FIRST=1", "COUNT=1")
				return r
			},
			want: []finding{
				{"slot[0].word", check.ProblemOrphanedWrite, check.ActionRelease},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
			},
		},
		{
			name: "dead popper in a full ring, the tail at its slot",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 4, Participants: 8})
				pushIDs(t, r.TryPush, 1, 2, 3, 4)
				runCrashChild(t, r.Path(), "pop", crashRingPopAfterTake, 1)
				return r
			},
			want: []finding{
				{"slot[0].word", check.ProblemOrphanedRead, check.ActionRequeueInPlace},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
			},
		},
		{
			name: "dead holder in a full ring, deferred",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 4, Participants: 8})
				pushIDs(t, r.TryPush, 1, 2, 3, 4)
				runCrashChild(t, r.Path(), "hold", "test.lease.processing", 1)
				// Burns past the lease, then finds the ring full.
				if err := r.TryPush(encodeMsg(5)); err != ErrFull {
					t.Fatalf("push into a full ring: %v", err)
				}
				return r
			},
			want: []finding{
				{"slot[0].word", check.ProblemOrphanedLease, check.ActionDefer},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionNone},
			},
			after: []finding{
				{"slot[0].word", check.ProblemOrphanedLease, check.ActionDefer},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionNone},
			},
		},
		{
			name: "dead repairer holding the repair lock",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
				pushIDs(t, r.TryPush, 7)
				runCrashChild(t, r.Path(), "hold", "test.lease.processing", 1)
				runCrashChild(t, r.Path(), "repair", crashRingRepairAfterRequeue, 1)
				return r
			},
			want: []finding{
				{"slot[0].word", check.ProblemOrphanedLease, check.ActionRequeue},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
				{"participant[2].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
				{"ring.repair_lock", check.ProblemRepairLock, check.ActionTakeOverLock},
			},
		},
		{
			name: "words written: corrupt, poison, a far lap, head past tail",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
				pushIDs(t, r.TryPush, 1, 2, 3)
				r.slotWord(1).Store(layout.SlotWord{State: layout.SlotReady, Length: 1000}.Pack())
				r.slotWord(2).Store(layout.SlotWord{State: layout.SlotPoisoned, Deliveries: 5, Length: 20}.Pack())
				r.slotWord(5).Store(layout.SlotWord{Lap: 7}.Pack())
				r.head.Store(r.tail.Load() + 9)
				return r
			},
			want: []finding{
				{"slot[1].word", check.ProblemCorruptSlot, check.ActionNone},
				{"slot[2].word", check.ProblemPoisoned, check.ActionNone},
				{"slot[5].word", check.ProblemBadLap, check.ActionNone},
				{"ring.head", check.ProblemHeadTail, check.ActionNone},
			},
		},
		{
			name: "corrupt repair lock",
			setup: func(t *testing.T) checked {
				r := newRing(t, RingConfig{Capacity: 8, Participants: 8})
				r.tab.RepairLock().Store(0xffff)
				return r
			},
			want: []finding{{"ring.repair_lock", check.ProblemRepairLock, check.ActionTakeOverLock}},
		},
	})
}

func TestDequeCheckPlanMatchesRepair(t *testing.T) {
	// deadOwner: the creator closes the deque and a child adopts it,
	// pushes 1..10 and dies at point; the parent attaches as a thief.
	deadOwner := func(point string, after int, env ...string) func(t *testing.T) checked {
		return func(t *testing.T) checked {
			d := newDeque(t, DequeConfig{Capacity: 16, DeliveryLimit: 5})
			d.Close()
			runDequeChild(t, d.Path(), "owner", point, after, append([]string{"FIRST=1", "COUNT=10"}, env...)...)
			return openThief(t, d)
		}
	}
	// prefilled: the parent owns the deque and pushes 1..10, then a
	// child dies as role at point.
	prefilled := func(role, point string, after int) func(t *testing.T) checked {
		return func(t *testing.T) checked {
			d := newDeque(t, DequeConfig{Capacity: 16, DeliveryLimit: 5})
			pushIDs(t, d.TryPush, seq(1, 10)...)
			runDequeChild(t, d.Path(), role, point, after)
			return d
		}
	}
	runCheckCases(t, []checkCase{
		{
			name: "healthy",
			setup: func(t *testing.T) checked {
				d := newDeque(t, DequeConfig{Capacity: 8})
				pushIDs(t, d.TryPush, 1, 2, 3)
				return d
			},
		},
		{
			name:  "dead thief's lease",
			setup: prefilled("hold", "test.lease.processing", 1),
			want: []finding{
				{"slot[0].word", check.ProblemOrphanedLease, check.ActionReturn},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
			},
		},
		{
			name:  "dead thief mid-steal",
			setup: prefilled("steal", crashDequeStealAfterTake, 3),
			want: []finding{
				{"slot[2].word", check.ProblemOrphanedRead, check.ActionReturn},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
			},
		},
		{
			name:  "dead owner mid-pop",
			setup: deadOwner(crashDequePopAfterTake, 2, "POP=3"),
			want: []finding{
				{"slot[8].word", check.ProblemOrphanedRead, check.ActionRollBack},
				{"deque.owner", check.ProblemDeadOwner, check.ActionFreeOwner},
				{"participant[0].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
			},
		},
		{
			name:  "dead owner mid-push",
			setup: deadOwner(crashDequePushAfterClaim, 5),
			want: []finding{
				{"slot[4].word", check.ProblemOrphanedWrite, check.ActionRelease},
				{"deque.owner", check.ProblemDeadOwner, check.ActionFreeOwner},
				{"participant[0].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
			},
		},
		{
			name:  "dead owner's push published, not counted",
			setup: deadOwner(crashDequePushAfterWrite, 5),
			want: []finding{
				{"slot[4].word", check.ProblemUncounted, check.ActionCountIn},
				{"deque.owner", check.ProblemDeadOwner, check.ActionFreeOwner},
				{"participant[0].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
			},
		},
		{
			name: "dead repairer holding the repair lock",
			setup: func(t *testing.T) checked {
				d := newDeque(t, DequeConfig{Capacity: 16, DeliveryLimit: 5})
				d.Close()
				runDequeChild(t, d.Path(), "owner", crashDequePopAfterTake, 1, "FIRST=1", "COUNT=10", "POP=1")
				runDequeChild(t, d.Path(), "repair", crashDequeRepairAfterFixBottom, 1)
				return openThief(t, d)
			},
			want: []finding{
				{"deque.owner", check.ProblemDeadOwner, check.ActionFreeOwner},
				{"participant[0].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
				{"participant[1].ctl", check.ProblemDeadParticipant, check.ActionFreeEntry},
				{"deque.repair_lock", check.ProblemRepairLock, check.ActionTakeOverLock},
			},
		},
		{
			name: "pending hint below the returned slots, nobody else alive",
			setup: func(t *testing.T) checked {
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
				if err := th.Release(l); err != nil {
					t.Fatal(err)
				}
				th.Close()
				d.pending.Store(0)
				return d
			},
			want: []finding{{"deque.pending", check.ProblemPendingHint, check.ActionRaiseHint}},
		},
		{
			name: "words written: corrupt owner word, foreign write, corrupt slot, poison",
			setup: func(t *testing.T) checked {
				d := newDeque(t, DequeConfig{Capacity: 8})
				pushIDs(t, d.TryPush, 1, 2, 3)
				d.Close()
				p := openThief(t, d)
				p.ownerWord.Store(0xffff)
				p.slotWord(6).Store(layout.SlotWord{State: layout.SlotWriting, Owner: p.tab.Self}.Pack())
				p.slotWord(5).Store(layout.SlotWord{State: layout.SlotReady, Length: 1000}.Pack())
				p.slotWord(4).Store(layout.SlotWord{State: layout.SlotPoisoned, Deliveries: 5, Length: 20}.Pack())
				return p
			},
			want: []finding{
				{"slot[4].word", check.ProblemPoisoned, check.ActionNone},
				{"slot[5].word", check.ProblemCorruptSlot, check.ActionNone},
				{"slot[6].word", check.ProblemForeignWrite, check.ActionNone},
				{"deque.owner", check.ProblemBadOwner, check.ActionFreeOwner},
			},
		},
	})
}
