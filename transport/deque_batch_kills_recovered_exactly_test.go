package transport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// A deque batch call killed at any of its steps (the deque.*-batch.*
// crash points, and the single steal's points inside a steal batch)
// leaves every position it took naming it, and a repair on proof of
// death recovers exactly what the single-message rules say: a push
// batch's published messages are counted in and delivered once, its
// unpublished claims released (the push never returned: nothing was
// promised); an owner's pop batch is rolled back, except the messages it
// had freed (each copied out whole, as a single pop's once its slot is
// free); a thief's steal or claim batch is handed back, except what a
// steal batch had freed; an ack batch's freed leases stay done. Nothing
// else is lost or duplicated, whether thieves take what the batch had
// published (or left announced) before the repair or after it, and
// Check's plan is what the repair then does.

var dequeBatchHelper = proctest.Helper{Test: "TestDequeBatchHelperProcess", Prefix: "dequebatch-"}

// TestDequeBatchHelperProcess is the child side. Roles:
//
//	owner    adopt, push ids FIRST..FIRST+COUNT-1 in batches of BATCH
//	         (PushBatch), "ok ID" for each once its batch returned; then
//	         pop POP messages in batches of BATCH (TryPopBatch), "got ID"
//	steal    steal in batches of BATCH (TryPopBatch) until empty, "got ID"
//	claim    claim batches of BATCH (TryClaimBatch), "got ID" for each,
//	         ack them (AckBatch), "acked ID" for each, until empty
//	stress-* the roles of deque_batches_across_processes_deliver_exactly_once_test.go
func TestDequeBatchHelperProcess(t *testing.T) { dequeBatchHelper.Serve(dequeBatchChild) }

func dequeBatchChild(role string) error {
	d, err := OpenDeque(proctest.EnvPath())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	batch := max(1, proctest.EnvInt("BATCH"))
	bufs, lens := dequeBufs(d, batch)
	printGot := func(n int) error {
		for j := range n {
			id, err := decodeMsg(bufs[j][:lens[j]])
			if err != nil {
				return err
			}
			fmt.Printf("got %d\n", id)
		}
		return nil
	}
	switch role {
	case "owner":
		if _, err := d.Adopt(); err != nil {
			return err
		}
		first, count := proctest.EnvUint64("FIRST"), proctest.EnvUint64("COUNT")
		for id := first; id < first+count; {
			n, err := d.PushBatch(ctx, idBatch(seq(id, min(uint64(batch), first+count-id))...))
			if err != nil {
				return err
			}
			for j := range uint64(n) {
				fmt.Printf("ok %d\n", id+j)
			}
			id += uint64(n)
		}
		for left := proctest.EnvInt("POP"); left > 0; {
			n, err := d.TryPopBatch(bufs[:min(batch, left)], lens)
			if err != nil {
				return err
			}
			if err := printGot(n); err != nil {
				return err
			}
			left -= n
		}
	case "steal":
		for {
			n, err := d.TryPopBatch(bufs, lens)
			if err == ErrEmpty {
				break
			}
			if err != nil {
				return err
			}
			if err := printGot(n); err != nil {
				return err
			}
		}
	case "claim":
		leases := make([]Lease, batch)
		for {
			n, err := d.TryClaimBatch(leases)
			if err == ErrEmpty {
				break
			}
			if err != nil {
				return err
			}
			ids := make([]uint64, n)
			for j, l := range leases[:n] {
				if ids[j], err = decodeMsg(l.Data()); err != nil {
					return err
				}
				fmt.Printf("got %d\n", ids[j])
			}
			if err := d.AckBatch(leases[:n]); err != nil {
				return err
			}
			for _, id := range ids {
				fmt.Printf("acked %d\n", id)
			}
		}
	case "stress-owner":
		return dequeStressOwner(ctx, d)
	case "stress-thief":
		return dequeStressThief(ctx, d)
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return d.Close()
}

func runDequeBatchChild(t *testing.T, path, role, point string, after int, env ...string) proctest.Log {
	t.Helper()
	return dequeBatchHelper.RunToCrash(t, role, point, after, append(env, proctest.PathArg(path))...).Log()
}

// dequePlanIsRepair checks that PlanRepair names what the Repair that
// follows does, and that a second repair changes nothing.
func dequePlanIsRepair(t *testing.T, d *Deque) check.RepairReport {
	t.Helper()
	plan := d.PlanRepair()
	rep, err := d.Repair()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cut(plan, false), cut(rep.Done, false)); diff != "" {
		logFindings(t, "plan", plan)
		logFindings(t, "done", rep.Done)
		t.Fatalf("PlanRepair and what Repair did differ (-plan +done):\n%s", diff)
	}
	if again, err := d.Repair(); err != nil || again.Changed() {
		t.Fatalf("second repair changed something: %+v %v", again.Done, err)
	}
	return rep
}

func dequeCheckClean(t *testing.T, d *Deque, when string) {
	t.Helper()
	if rep := d.Check(); !rep.Clean() {
		logFindings(t, when, rep.Findings)
		t.Fatalf("Check %s is not clean", when)
	}
}

// dequeUsable drains d, checks that nothing is left half-done, and that
// a push batch and a pop batch still work.
func dequeUsable(t *testing.T, d *Deque) []uint64 {
	t.Helper()
	got := drainDeque(t, d)
	if s := d.Scan(); s.Problems != 0 || s.States[layout.SlotReading] != 0 || s.States[layout.SlotWriting] != 0 || s.States[layout.SlotReturned] != 0 {
		t.Fatalf("after the drain: %+v", s.Slots)
	}
	if n, err := d.TryPushBatch(idBatch(900, 901, 902)); n != 3 || err != nil {
		t.Fatalf("push batch after the repair: %d, %v", n, err)
	}
	bufs, lens := dequeBufs(d, 8)
	n, err := d.TryPopBatch(bufs, lens)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "pop batch after the repair", popIDs(t, bufs, lens, n), 902, 901, 900)
	dequeCheckClean(t, d, "at the end")
	return got
}

// dequeAt makes a deque whose top and bottom are at position adv (adv
// messages pushed and stolen), so the batches that follow straddle the
// end of the slots, and gives its owner role up for a child to adopt.
func dequeAt(t *testing.T, cfg DequeConfig, adv int, keepOwner bool) (*Deque, *Deque) {
	t.Helper()
	d := newDeque(t, cfg)
	th := openThief(t, d)
	for range adv {
		pushIDs(t, d.TryPush, 0)
	}
	drainDeque(t, th)
	if !keepOwner {
		if err := d.Disown(); err != nil {
			t.Fatal(err)
		}
	}
	return d, th
}

// TestDequePushBatchKilledAtEveryStep: an owner pushes 1..4 in one batch
// and dies in its second (5..8, positions 10..13 of an 8-slot deque:
// slots 2..5). What it published is delivered once (counted in, or
// stolen first, past a bottom that never moved), what it did not is
// released.
func TestDequePushBatchKilledAtEveryStep(t *testing.T) {
	cases := []struct {
		point     string
		after     int
		published int // of the killed batch
		bottom    uint64
	}{
		{crashDequePushBatchAfterClaims, 2, 0, 10},
		{crashDequePushBatchMidPublish, 5, 2, 10}, // the first batch passes it 3 times
		{crashDequePushBatchAfterPublish, 2, 4, 10},
		{crashDequePushBatchAfterAdvance, 2, 4, 14},
	}
	for _, tc := range cases {
		for _, stealFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/steal_first=%v", tc.point, stealFirst), func(t *testing.T) {
				d, th := dequeAt(t, DequeConfig{Capacity: 8}, 6, false)
				log := runDequeBatchChild(t, d.Path(), "owner", tc.point, tc.after, "FIRST=1", "COUNT=8", "BATCH=4")
				wantIDs(t, "pushes the child saw return", log["ok"], 1, 2, 3, 4)
				if c := d.Counters(); c.Bottom != tc.bottom {
					t.Fatalf("bottom %d after the kill, want %d", c.Bottom, tc.bottom)
				}
				orphans := 4 - tc.published
				if s := th.Scan(); s.States[layout.SlotWriting] != orphans {
					t.Fatalf("%d slots WRITING after the kill, want %d: %+v", s.States[layout.SlotWriting], orphans, s.Slots)
				}
				published := seq(5, uint64(tc.published))
				var delivered []uint64
				if stealFirst {
					// Thieves take everything published, past the
					// bottom the dead owner never moved: top passes
					// bottom.
					delivered = drainDeque(t, th)
					wantIDs(t, "stolen before the repair", delivered, append(seq(1, 4), published...)...)
					if c := th.Counters(); c.Top != 10+uint64(tc.published) {
						t.Fatalf("top %d after stealing, want %d", c.Top, 10+tc.published)
					}
				}
				rep := dequePlanIsRepair(t, th)
				wantCounted := tc.published
				if stealFirst || tc.bottom == 14 {
					wantCounted = 0
				}
				if rep.Count(check.ActionRelease) != orphans || rep.Count(check.ActionCountIn) != wantCounted || rep.Count(check.ActionFreeOwner) != 1 {
					logFindings(t, "repair", rep.Done)
					t.Fatalf("repair: want %d released, %d counted in, the owner freed", orphans, wantCounted)
				}
				if _, err := d.Adopt(); err != nil {
					t.Fatal(err)
				}
				dequeCheckClean(t, d, "after the repair")
				delivered = append(delivered, dequeUsable(t, d)...)
				exactly(t, delivered, once(seq(1, 4), published))
				if c := d.Counters(); c.Abandoned != uint64(orphans) {
					t.Fatalf("abandoned %d, want %d", c.Abandoned, orphans)
				}
			})
		}
	}
}

// TestDequePopBatchKilledAtEveryStep: an owner pushes 1..8, pops 8, 7, 6
// in one batch and dies in its second (5, 4, 3). What it had taken and
// not freed is rolled back and delivered again, once; what it had freed
// (mid-free: 5, the highest, freed first) is its own, gone with it; what
// it had announced and not taken is counted in again. Thieves may take
// the announced messages first (top passes bottom), and the repair finds
// the rest past top.
func TestDequePopBatchKilledAtEveryStep(t *testing.T) {
	cases := []struct {
		point            string
		after            int
		taken, freed     int // of the killed batch
		countIn, rollBck int
	}{
		{crashDequePopBatchAfterAnnounce, 2, 0, 0, 3, 0},
		{crashDequePopBatchMidTake, 3, 1, 0, 2, 1}, // the first batch passes it twice
		{crashDequePopBatchAfterTake, 2, 3, 0, 0, 3},
		{crashDequePopBatchAfterCopy, 2, 3, 0, 0, 3},
		{crashDequePopBatchMidFree, 3, 3, 1, 0, 2}, // the first batch passes it twice
	}
	for _, tc := range cases {
		for _, stealFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/steal_first=%v", tc.point, stealFirst), func(t *testing.T) {
				d, th := dequeAt(t, DequeConfig{Capacity: 8}, 5, false)
				log := runDequeBatchChild(t, d.Path(), "owner", tc.point, tc.after, "FIRST=1", "COUNT=8", "BATCH=3", "POP=6")
				wantIDs(t, "pushes the child saw return", log["ok"], seq(1, 8)...)
				wantIDs(t, "pops the child saw return", log["got"], 8, 7, 6)
				if c := d.Counters(); c.Bottom != 5+2 {
					t.Fatalf("bottom %d after the kill, want the announced 7", c.Bottom)
				}
				if s := th.Scan(); s.States[layout.SlotReading] != tc.taken-tc.freed {
					t.Fatalf("%d slots READING after the kill, want %d", s.States[layout.SlotReading], tc.taken-tc.freed)
				}
				delivered := append([]uint64(nil), log["got"]...)
				countIn := tc.countIn
				if stealFirst {
					// 1, 2, and whatever the owner announced and had not
					// taken yet: READY at top's own lap.
					got := drainDeque(t, th)
					wantIDs(t, "stolen before the repair", got, seq(1, uint64(5-tc.taken))...)
					delivered = append(delivered, got...)
					countIn = 0
				}
				rep := dequePlanIsRepair(t, th)
				if rep.Count(check.ActionCountIn) != countIn || rep.Count(check.ActionRollBack) != tc.rollBck || rep.Count(check.ActionFreeOwner) != 1 {
					logFindings(t, "repair", rep.Done)
					t.Fatalf("repair: want %d counted in, %d rolled back, the owner freed", countIn, tc.rollBck)
				}
				if _, err := d.Adopt(); err != nil {
					t.Fatal(err)
				}
				dequeCheckClean(t, d, "after the repair")
				delivered = append(delivered, dequeUsable(t, d)...)
				want := once(seq(1, 8))
				for _, id := range seq(5, uint64(tc.freed)) {
					delete(want, id) // freed by the popper before it died: its own
				}
				exactly(t, delivered, want)
			})
		}
	}
}

// TestDequeStealAndClaimBatchKilledAtEveryStep: a thief takes 1..3 in one
// batch (stealing, or claiming and acking) and dies in its second (4..6),
// or in its first ack batch. What it had taken and not freed is handed
// back and delivered again, once, its delivery count kept; what a steal
// batch had freed (mid-free: 4) or an ack batch acked is done. The single
// steal's points inside a batch are steps of it too: a kill there leaves
// the batch's earlier messages taken.
func TestDequeStealAndClaimBatchKilledAtEveryStep(t *testing.T) {
	cases := []struct {
		role, point string
		after       int
		returned    []uint64 // handed back by the repair
		done        []uint64 // the child's for good: printed, freed or acked
	}{
		{"steal", crashDequeStealBatchAfterTake, 2, seq(4, 3), seq(1, 3)},
		{"steal", crashDequeStealBatchAfterCopy, 2, seq(4, 3), seq(1, 3)},
		{"steal", crashDequeStealBatchMidFree, 3, seq(5, 2), seq(1, 4)},   // the first batch passes it twice
		{"steal", crashDequeStealAfterTake, 5, seq(4, 2), seq(1, 3)},      // the second message of the second batch
		{"steal", crashDequeStealAfterAdvance, 4, seq(4, 1), seq(1, 3)},   // its first
		{"claim", crashDequeClaimBatchAfterTake, 2, seq(4, 3), seq(1, 3)}, // 1..3 acked
		{"claim", crashDequeAckBatchMidFree, 1, seq(2, 2), seq(1, 1)},     // 1 acked, 2 and 3 not
	}
	for _, tc := range cases {
		t.Run(tc.point, func(t *testing.T) {
			d, _ := dequeAt(t, DequeConfig{Capacity: 8}, 6, true)
			pushIDs(t, d.TryPush, seq(1, 8)...)
			log := runDequeBatchChild(t, d.Path(), tc.role, tc.point, tc.after, "BATCH=3")
			s := d.Scan()
			if held := s.States[layout.SlotReading] + s.States[layout.SlotLeased]; held != len(tc.returned) {
				t.Fatalf("%d slots held by the dead thief, want %d: %+v", held, len(tc.returned), s.Slots)
			}
			rep := dequePlanIsRepair(t, d)
			if rep.Count(check.ActionReturn) != len(tc.returned) || len(rep.DeadPeers) != 1 {
				logFindings(t, "repair", rep.Done)
				t.Fatalf("repair: want %d returned", len(tc.returned))
			}
			// Take the returned ones by a claim batch: their delivery
			// counts were kept (one more now).
			before := d.Counters()
			again := map[uint64]bool{}
			for _, id := range tc.returned {
				again[id] = true
			}
			var delivered []uint64
			leases := make([]Lease, 16)
			n, err := d.TryClaimBatch(leases)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range leases[:n] {
				id, err := decodeMsg(l.Data())
				if err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int{false: 1, true: 2}[again[id]]; l.Deliveries != want {
					t.Fatalf("message %d: delivery %d, want %d", id, l.Deliveries, want)
				}
				delivered = append(delivered, id)
			}
			if err := d.AckBatch(leases[:n]); err != nil {
				t.Fatal(err)
			}
			if c := d.Counters(); c.Claimed != before.Claimed+uint64(n) {
				t.Fatalf("claimed %d, want %d", c.Claimed, before.Claimed+uint64(n))
			}
			delivered = append(delivered, dequeUsable(t, d)...)
			want := once(seq(1, 8))
			for _, id := range tc.done {
				delete(want, id)
			}
			exactly(t, delivered, want)
			if tc.role == "steal" {
				// What the child printed is what it took for good.
				wantIDs(t, "the child's", log["got"], seq(1, 3)...)
			}
		})
	}
}

// A thief blocked in StealBatch behind a dead owner's pop batch (the
// thieves took what it announced and had not taken, so top is past
// bottom and the message the dead owner hides is at top) proves the owner
// dead by itself, has the deque repaired, and gets the message.
func TestDequeStealBatchHealsBehindADeadPopBatch(t *testing.T) {
	d, th := dequeAt(t, DequeConfig{Capacity: 8}, 0, false)
	runDequeBatchChild(t, d.Path(), "owner", crashDequePopBatchMidTake, 1, "FIRST=1", "COUNT=4", "BATCH=4", "POP=4")
	// The owner announced 1..4, took 4 and died: thieves take 1..3.
	bufs, lens := dequeBufs(th, 8)
	n, err := th.TryPopBatch(bufs, lens)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "stolen past the announced bottom", popIDs(t, bufs, lens, n), 1, 2, 3)
	if c := th.Counters(); c.Top != 3 || c.Bottom != 0 {
		t.Fatalf("top %d, bottom %d: want 3, 0", c.Top, c.Bottom)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err = th.StealBatch(ctx, bufs, lens)
	if err != nil {
		t.Fatalf("thief stayed blocked behind a dead pop batch: %v", err)
	}
	wantIDs(t, "stolen after healing", popIDs(t, bufs, lens, n), 4)
	if c := th.Counters(); c.RolledBack != 1 {
		t.Fatalf("counters %+v", c)
	}
}
