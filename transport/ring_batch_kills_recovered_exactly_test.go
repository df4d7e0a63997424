package transport

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// A batch call killed at any of its steps (the ring.*-batch.* crash points)
// leaves every position it took naming it, and a repair on proof of death
// recovers exactly what the single-message rules say: a push's unpublished
// positions are skipped (the push never returned: nothing was promised),
// its published ones delivered once; a pop's or claim's taken messages are
// delivered again, except those a pop had freed (each copied out whole, as
// a single pop's once its slot is free); an ack batch's freed leases stay
// done and the rest are delivered again. Nothing else is lost or
// duplicated. Positions a push batch claimed ahead of the tail, and
// messages a pop batch took ahead of the head, are handled by everyone
// else (producers and consumers help past them, a repair releases or
// requeues them wherever the tail and head are), and Check's plan is what
// the repair then does.

var ringBatchHelper = proctest.Helper{Test: "TestRingBatchHelperProcess", Prefix: "ringbatch-"}

// TestRingBatchHelperProcess is the child side. Roles:
//
//	producer  push ids FIRST..FIRST+COUNT-1 in batches of BATCH
//	          (PushBatch), print "ok ID" for each once its batch returned
//	pop       pop batches of BATCH (TryPopBatch) until empty, print
//	          "got ID" for each
//	claim     claim batches of BATCH (TryClaimBatch), print "got ID" for
//	          each, ack them (AckBatch), print "acked ID" for each
//	stress-*  the roles of ring_batches_across_processes_deliver_exactly_once_test.go
func TestRingBatchHelperProcess(t *testing.T) { ringBatchHelper.Serve(ringBatchChild) }

func ringBatchChild(role string) error {
	r, err := OpenRing(proctest.EnvPath())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	batch := max(1, proctest.EnvInt("BATCH"))
	switch role {
	case "producer":
		first, count := proctest.EnvUint64("FIRST"), proctest.EnvUint64("COUNT")
		for id := first; id < first+count; {
			k := min(uint64(batch), first+count-id)
			msgs := make([][]byte, k)
			for j := range msgs {
				msgs[j] = encodeMsg(id + uint64(j))
			}
			n, err := r.PushBatch(ctx, msgs)
			if err != nil {
				return err
			}
			for j := range uint64(n) {
				fmt.Printf("ok %d\n", id+j)
			}
			id += uint64(n)
		}
	case "pop":
		bufs, lens := popBufs(r, batch)
		for {
			n, err := r.TryPopBatch(bufs, lens)
			if err == ErrEmpty {
				break
			}
			if err != nil {
				return err
			}
			for j := range n {
				id, err := decodeMsg(bufs[j][:lens[j]])
				if err != nil {
					return err
				}
				fmt.Printf("got %d\n", id)
			}
		}
	case "claim":
		leases := make([]Lease, batch)
		for {
			n, err := r.TryClaimBatch(leases)
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
			if err := r.AckBatch(leases[:n]); err != nil {
				return err
			}
			for _, id := range ids {
				fmt.Printf("acked %d\n", id)
			}
		}
	case "stress-producer":
		return stressProduce(ctx, r)
	case "stress-consumer":
		return stressConsume(ctx, r)
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return r.Close()
}

func runBatchCrashChild(t *testing.T, path, role, point string, after int, env ...string) proctest.Log {
	t.Helper()
	return ringBatchHelper.RunToCrash(t, role, point, after, append(env, proctest.PathArg(path))...).Log()
}

// advanceRing moves head and tail to position n by pushing and popping n
// messages, so that the batches that follow straddle the end of the slots.
func advanceRing(t *testing.T, r *Ring, n int) {
	t.Helper()
	buf := make([]byte, r.MaxPayload())
	for range n {
		if err := r.TryPush(encodeMsg(0)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.TryPop(buf); err != nil {
			t.Fatal(err)
		}
	}
}

// planIsRepair checks that PlanRepair names what the Repair that follows
// does, runs that repair, and checks that a second one (again as planned)
// only defers again what waits for room.
func planIsRepair(t *testing.T, r *Ring) check.RepairReport {
	t.Helper()
	for _, f := range r.Check().Findings {
		switch f.Problem {
		case check.ProblemOrphanedWrite, check.ProblemOrphanedRead, check.ProblemOrphanedLease, check.ProblemDeadParticipant:
		default:
			t.Errorf("Check before the repair: %s %s: %s", f.Location, f.Problem, f.Detail)
		}
	}
	var first check.RepairReport
	for round := 1; round <= 2; round++ {
		plan := r.PlanRepair()
		rep := mustRepair(t, r)
		if diff := cmp.Diff(cut(plan, false), cut(rep.Done, false)); diff != "" {
			logFindings(t, "plan", plan)
			logFindings(t, "done", rep.Done)
			t.Fatalf("repair %d: PlanRepair and what Repair did differ (-plan +done):\n%s", round, diff)
		}
		if round == 1 {
			first = rep
			continue
		}
		if len(rep.Done) != rep.Count(check.ActionDefer) {
			t.Fatalf("second repair did more than defer again: %+v", rep.Done)
		}
	}
	return first
}

// checkClean asserts that Check finds nothing.
func checkClean(t *testing.T, r *Ring, when string) {
	t.Helper()
	if rep := r.Check(); !rep.Clean() {
		logFindings(t, when, rep.Findings)
		t.Fatalf("Check %s is not clean", when)
	}
}

// exactly asserts that delivered holds each id of want exactly want[id]
// times and nothing else.
func exactly(t *testing.T, delivered []uint64, want map[uint64]int) {
	t.Helper()
	got := map[uint64]int{}
	for _, id := range delivered {
		got[id]++
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("deliveries by id (-want +got):\n%s", diff)
	}
}

func once(ids ...[]uint64) map[uint64]int {
	m := map[uint64]int{}
	for _, l := range ids {
		for _, id := range l {
			m[id]++
		}
	}
	return m
}

func orphanPositions(r *Ring, p SlotProblem) []uint64 {
	s := r.Scan()
	var pos []uint64
	for _, sl := range s.Slots {
		if sl.Problem == p {
			pos = append(pos, slotPosition(&r.lay.SlotGeometry, sl.Index, sl.Word.Lap, s.Counters.Head))
		}
	}
	sort.Slice(pos, func(i, j int) bool { return pos[i] < pos[j] })
	return pos
}

// TestRingPushBatchKilledAtEveryStep: a producer pushes 100..103 in one
// batch and dies in its second batch (104..107, positions 14..17: slots
// 14, 15, 0, 1, across the end of the slots). What it published is
// delivered once, what it did not is skipped, and the survivors work
// before or after the repair, in either order.
func TestRingPushBatchKilledAtEveryStep(t *testing.T) {
	cases := []struct {
		point     string
		after     int
		published int    // of the killed batch
		tail      uint64 // after the kill
	}{
		{crashRingPushBatchAfterClaims, 2, 0, 14}, // the tail not moved past the claims
		{crashRingPushBatchAfterAdvance, 2, 0, 18},
		{crashRingPushBatchMidPublish, 5, 2, 18}, // the first batch passes it 3 times
		{crashRingPushBatchAfterPublish, 2, 4, 18},
	}
	for _, tc := range cases {
		for _, repairFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/repair_first=%v", tc.point, repairFirst), func(t *testing.T) {
				r := crashRing(t, RingConfig{Capacity: 16, Participants: 8})
				advanceRing(t, r, 10)
				log := runBatchCrashChild(t, r.Path(), "producer", tc.point, tc.after, "FIRST=100", "COUNT=8", "BATCH=4")
				wantIDs(t, "pushes the child saw return", log["ok"], 100, 101, 102, 103)
				orphans := 4 - tc.published
				if c := r.Counters(); c.Tail != tc.tail {
					t.Fatalf("tail %d after the kill, want %d", c.Tail, tc.tail)
				}
				if pos := orphanPositions(r, SlotOrphanedWrite); fmt.Sprint(pos) != fmt.Sprint(seq(14+uint64(tc.published), uint64(orphans))) {
					t.Fatalf("orphaned writes at positions %v, want %d from %d", pos, orphans, 14+tc.published)
				}
				published := seq(104, uint64(tc.published))
				want := append(append(seq(100, 4), published...), 200, 201)

				var delivered []uint64
				if repairFirst {
					rep := planIsRepair(t, r)
					if rep.Count(check.ActionRelease) != orphans || len(rep.DeadPeers) != 1 {
						t.Fatalf("repair report %+v", rep.Done)
					}
					// Consumers step past the released positions, past
					// the tail too when the dead producer never moved it.
					delivered = drain(t, r)
					if c := r.Counters(); c.Head != 18 || c.Tail != tc.tail {
						t.Fatalf("head %d, tail %d after the drain: want 18, %d", c.Head, c.Tail, tc.tail)
					}
					checkClean(t, r, "with the head past the tail")
					pushIDs(t, r.TryPush, 200, 201) // the tail is helped on past them
					delivered = append(delivered, drain(t, r)...)
				} else {
					// Producers help the tail past the dead producer's
					// claims and push after them; consumers take what
					// was published and stop at the first claim.
					pushIDs(t, r.TryPush, 200, 201)
					if c := r.Counters(); c.Tail != 20 {
						t.Fatalf("tail %d after two pushes, want 20", c.Tail)
					}
					delivered = drain(t, r)
					if orphans > 0 {
						wantIDs(t, "drained behind the dead producer's claims", delivered, append(seq(100, 4), published...)...)
					}
					rep := planIsRepair(t, r)
					if rep.Count(check.ActionRelease) != orphans {
						t.Fatalf("repair report %+v", rep.Done)
					}
					delivered = append(delivered, drain(t, r)...)
				}
				wantIDs(t, "delivered", delivered, want...)
				if c := r.Counters(); c.Abandoned != uint64(orphans) {
					t.Fatalf("abandoned %d, want %d", c.Abandoned, orphans)
				}
				assertHealthy(t, r)
				drainAndCheckUsable(t, r)
				checkClean(t, r, "at the end")
			})
		}
	}
}

// TestRingPopBatchKilledAtEveryStep: a consumer pops 1..3 in one batch
// and dies in its second (4..6, slots 3..5). The messages it had not
// freed are delivered again, once; one it had freed (mid-free) is its
// own, gone with it; nothing else is lost or doubled. With room the
// repair pushes copies at the tail (and consumers step past the taken
// slots ahead of the head first); in a full ring it re-publishes them in
// place.
func TestRingPopBatchKilledAtEveryStep(t *testing.T) {
	cases := []struct {
		point string
		after int
		freed int    // of the killed batch: the popper's, lost with it
		head  uint64 // after the kill
	}{
		{crashRingPopBatchAfterTake, 2, 0, 3}, // the head not moved past the takes
		{crashRingPopBatchAfterAdvance, 2, 0, 6},
		{crashRingPopBatchAfterCopy, 2, 0, 6},
		{crashRingPopBatchMidFree, 3, 1, 6}, // the first batch passes it twice
	}
	for _, tc := range cases {
		// From position 4 the killed batch takes slots 7, 0 and 1: in a
		// full ring a repair re-publishes slot 7 in place in its first
		// pass, and slots 0 and 1 only in its second.
		for _, adv := range []uint64{0, 4} {
			for _, full := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/from=%d/full=%v", tc.point, adv, full), func(t *testing.T) {
					popBatchKilled(t, tc.point, tc.after, tc.freed, tc.head, adv, full)
				})
			}
		}
	}
}

func popBatchKilled(t *testing.T, point string, after, freed int, head, adv uint64, full bool) {
	r := crashRing(t, RingConfig{Capacity: 8, Participants: 8})
	advanceRing(t, r, int(adv))
	pushIDs(t, r.TryPush, seq(1, 8)...)
	log := runBatchCrashChild(t, r.Path(), "pop", point, after, "BATCH=3")
	wantIDs(t, "pops the child saw return", log["got"], 1, 2, 3)
	if c := r.Counters(); c.Head != adv+head {
		t.Fatalf("head %d after the kill, want %d", c.Head, adv+head)
	}
	orphans := 3 - freed
	if pos := orphanPositions(r, SlotOrphanedRead); fmt.Sprint(pos) != fmt.Sprint(seq(adv+3+uint64(freed), uint64(orphans))) {
		t.Fatalf("orphaned reads at positions %v", pos)
	}
	promised := seq(1, 8)
	delivered := log["got"]
	act := check.ActionRequeue
	if full {
		for id := uint64(100); r.TryPush(encodeMsg(id)) == nil; id++ {
			promised = append(promised, id)
		}
		act = check.ActionRequeueInPlace
	} else {
		// Consumers step past the slots taken ahead of the
		// head.
		got := drain(t, r)
		wantIDs(t, "drained past the dead popper's slots", got, 7, 8)
		delivered = append(delivered, got...)
	}
	rep := planIsRepair(t, r)
	if rep.Count(act) != orphans || len(rep.DeadPeers) != 1 {
		t.Fatalf("repair report: want %d %s, got %+v", orphans, act, rep.Done)
	}
	delivered = append(delivered, drainAndCheckUsable(t, r)...)
	want := once(promised)
	for _, id := range seq(4, uint64(freed)) {
		delete(want, id) // freed by the popper before it died: its own
	}
	exactly(t, delivered, want)
	assertHealthy(t, r)
	checkClean(t, r, "at the end")
}

// TestRingClaimBatchKilledAtEveryStep: a consumer claims and acks 1..3 in
// batches and dies claiming its second batch (4..6), or acking its first
// (1 acked, 2 and 3 not). Every lease not freed is delivered again, its
// delivery count kept (one more on the next claim); the acked one is not.
func TestRingClaimBatchKilledAtEveryStep(t *testing.T) {
	cases := []struct {
		point  string
		after  int
		held   []uint64 // ids left leased by the dead consumer
		acked  []uint64 // ids it acked (before the kill)
		logged []uint64 // ids it printed as got
	}{
		{crashRingClaimBatchAfterTake, 2, seq(4, 3), seq(1, 3), seq(1, 3)},
		{crashRingClaimBatchAfterAdvance, 2, seq(4, 3), seq(1, 3), seq(1, 3)},
		{crashRingAckBatchMidFree, 1, seq(2, 2), seq(1, 1), seq(1, 3)},
	}
	for _, tc := range cases {
		for _, full := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/full=%v", tc.point, full), func(t *testing.T) {
				r := crashRing(t, RingConfig{Capacity: 8, Participants: 8})
				pushIDs(t, r.TryPush, seq(1, 8)...)
				log := runBatchCrashChild(t, r.Path(), "claim", tc.point, tc.after, "BATCH=3")
				wantIDs(t, "claims the child saw return", log["got"], tc.logged...)
				if n := len(orphanPositions(r, SlotOrphanedLease)); n != len(tc.held) {
					t.Fatalf("%d orphaned leases, want %d", n, len(tc.held))
				}
				promised := seq(1, 8)
				delivered := append([]uint64(nil), log["got"]...)
				if full {
					for id := uint64(100); r.TryPush(encodeMsg(id)) == nil; id++ {
						promised = append(promised, id)
					}
				}
				rep := planIsRepair(t, r)
				if full {
					// In place when the tail is at the lease's slot, else
					// deferred until a consumer finds the ring empty.
					if n := rep.Count(check.ActionRequeueInPlace) + rep.Count(check.ActionDefer); n != len(tc.held) {
						t.Fatalf("repair report %+v", rep.Done)
					}
					delivered = append(delivered, drainAndCheckUsable(t, r)...)
				} else {
					if rep.Count(check.ActionRequeue) != len(tc.held) {
						t.Fatalf("repair report %+v", rep.Done)
					}
					// Drain by claims: a message delivered again counts
					// its earlier delivery.
					again := map[uint64]bool{}
					for _, id := range tc.held {
						again[id] = true
					}
					leases := make([]Lease, 16)
					n, err := r.TryClaimBatch(leases)
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
					if err := r.AckBatch(leases[:n]); err != nil {
						t.Fatal(err)
					}
					delivered = append(delivered, drainAndCheckUsable(t, r)...)
				}
				assertHealthy(t, r)
				want := once(promised)
				for _, id := range tc.logged {
					want[id]++ // the child's delivery
				}
				for _, id := range tc.acked {
					want[id]-- // acked: not delivered again
				}
				exactly(t, delivered, want)
				checkClean(t, r, "at the end")
			})
		}
	}
}

// A consumer blocked in PopBatch behind a dead push batch's claims (the
// tail never moved past them) proves the producer dead by itself, has the
// ring repaired, and returns the messages pushed after the claims.
func TestRingPopBatchHealsBehindADeadPushBatch(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 8, Participants: 8})
	runBatchCrashChild(t, r.Path(), "producer", crashRingPushBatchAfterClaims, 1, "FIRST=1", "COUNT=4", "BATCH=4")
	pushIDs(t, r.TryPush, 10, 11)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bufs, lens := popBufs(r, 8)
	n, err := r.PopBatch(ctx, bufs, lens)
	if err != nil {
		t.Fatalf("consumer stayed blocked behind a dead push batch: %v", err)
	}
	wantIDs(t, "popped", popIDs(t, bufs, lens, n), 10, 11)
	if c := r.Counters(); c.Abandoned != 4 {
		t.Fatalf("counters %+v", c)
	}
	assertHealthy(t, r)
}

// A producer blocked in PushBatch on a ring full behind a dead pop
// batch's taken slots proves the consumer dead, has the ring repaired
// (the messages re-published in place) and pushes.
func TestRingPushBatchHealsBehindADeadPopBatch(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 4, Participants: 8})
	pushIDs(t, r.TryPush, 1, 2, 3, 4)
	runBatchCrashChild(t, r.Path(), "pop", crashRingPopBatchAfterTake, 1, "BATCH=2")
	// 3 and 4, past the dead popper's slots; the tail is now at slot 0,
	// still held: the ring is full.
	delivered := drain(t, r)
	wantIDs(t, "drained", delivered, 3, 4)
	if err := r.TryPush(encodeMsg(5)); err != ErrFull {
		t.Fatalf("push behind the dead popper's slots: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := r.PushBatch(ctx, idBatch(7, 8))
	if err != nil || n != 2 {
		t.Fatalf("producer stayed blocked behind a dead pop batch: %d, %v", n, err)
	}
	delivered = append(delivered, drain(t, r)...)
	exactly(t, delivered, once(seq(1, 4), []uint64{7, 8}))
	if s := r.Scan(); s.Problems != 0 || s.States[layout.SlotReading] != 0 {
		t.Fatalf("scan after healing: %+v", s.Slots)
	}
}
