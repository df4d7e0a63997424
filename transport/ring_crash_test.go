package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// Crash-safety tests: a real child process SIGKILLs itself at a named step
// of push, pop, claim, ack, repair or attach (SHMKIT_CRASHPOINT); the parent
// then scans, repairs, drains and checks that every message whose push
// returned is delivered at least once, intact, that duplicates are only of
// messages in flight at the kill, and that the ring works afterwards.

var ringHelper = proctest.Helper{Test: "TestRingHelperProcess", Prefix: "ring-"}

// TestRingHelperProcess is the child side. Roles:
//
//	producer        push ids FIRST..FIRST+COUNT-1, print "ok ID" after each
//	pop             pop until empty, print "got ID" after each
//	popid           pop as pop does, with TryPopID (prints "msgid ID")
//	claim           claim, print "got ID", ack, print "acked ID"
//	hold            claim one message, print "got ID", die while holding it
//	claimall        lease every message in the ring, print "got ID" for
//	                each, then die (test.lease.all-held) holding them all
//	repair          run Repair
//	attach          attach and exit
//
// In a ring with message ids, pop, claim, hold and claimall also print
// "msgid ID" (the message's id) after each "got ID".
func TestRingHelperProcess(t *testing.T) { ringHelper.Serve(ringChild) }

func ringChild(role string) error {
	r, err := OpenRing(proctest.EnvPath())
	if err != nil {
		return err
	}
	if role == "attach" {
		return nil // keep the entry: exit without Close
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch role {
	case "producer":
		first, count := proctest.EnvUint64("FIRST"), proctest.EnvUint64("COUNT")
		for id := first; id < first+count; id++ {
			if err := r.Push(ctx, encodeMsg(id)); err != nil {
				return err
			}
			fmt.Printf("ok %d\n", id)
		}
	case "pop":
		buf := make([]byte, r.MaxPayload())
		for {
			n, err := r.TryPop(buf)
			if err == ErrEmpty {
				return nil
			}
			if err != nil {
				return err
			}
			id, err := decodeMsg(buf[:n])
			if err != nil {
				return err
			}
			fmt.Printf("got %d\n", id)
		}
	case "popid":
		// pop, one message at a time with TryPopID, printing its id.
		buf := make([]byte, r.MaxPayload())
		for {
			n, mid, err := r.TryPopID(buf)
			if err == ErrEmpty {
				return nil
			}
			if err != nil {
				return err
			}
			id, err := decodeMsg(buf[:n])
			if err != nil {
				return err
			}
			fmt.Printf("got %d\nmsgid %d\n", id, mid)
		}
	case "claim", "hold":
		for {
			l, err := r.TryClaim()
			if err == ErrEmpty {
				return nil
			}
			if err != nil {
				return err
			}
			id, err := decodeMsg(l.Data())
			if err != nil {
				return err
			}
			fmt.Printf("got %d\n", id)
			if r.MessageIDs() {
				fmt.Printf("msgid %d\n", l.ID())
			}
			if role == "hold" {
				shm.CrashPoint("test.lease.processing")
			}
			if err := r.Ack(l); err != nil {
				return err
			}
			fmt.Printf("acked %d\n", id)
		}
	case "claimall":
		for {
			l, err := r.TryClaim()
			if err == ErrEmpty {
				break
			}
			if err != nil {
				return err
			}
			id, _ := decodeMsg(l.Data())
			fmt.Printf("got %d\n", id)
			if r.MessageIDs() {
				fmt.Printf("msgid %d\n", l.ID())
			}
		}
		shm.CrashPoint("test.lease.all-held")
		return errors.New("passed test.lease.all-held: not armed")
	case "repair":
		_, err := r.Repair()
		return err
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return r.Close()
}

// runCrashChild runs a child armed to die at point (the after-th time it
// gets there), insists that it did die there, and returns its log.
func runCrashChild(t *testing.T, path, role, point string, after int, env ...string) proctest.Log {
	t.Helper()
	return ringHelper.RunToCrash(t, role, point, after, append(env, proctest.PathArg(path))...).Log()
}

func runChild(t *testing.T, path, role string, env ...string) proctest.Log {
	t.Helper()
	return ringHelper.Run(t, role, append(env, proctest.PathArg(path))...).Log()
}

// drain pops everything, failing on any corrupt payload.
func drain(t *testing.T, r *Ring) []uint64 {
	t.Helper()
	var ids []uint64
	buf := make([]byte, r.MaxPayload())
	for {
		n, err := r.TryPop(buf)
		if err == ErrEmpty {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
		id, err := decodeMsg(buf[:n])
		if err != nil {
			t.Fatalf("corrupt payload after repair: %v", err)
		}
		ids = append(ids, id)
	}
}

// checkDelivery asserts at-least-once delivery of every promised id, and
// that any id delivered twice was in flight at the kill.
func checkDelivery(t *testing.T, promised, delivered []uint64, inFlight map[uint64]bool) {
	t.Helper()
	count := map[uint64]int{}
	for _, id := range delivered {
		count[id]++
	}
	for _, id := range promised {
		if count[id] == 0 {
			t.Errorf("message %d was pushed successfully but never delivered", id)
		}
	}
	for id, n := range count {
		if n > 1 && !inFlight[id] {
			t.Errorf("message %d delivered %d times but was not in flight at the kill", id, n)
		}
	}
}

func seq(first, n uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = first + uint64(i)
	}
	return out
}

func crashRing(t *testing.T, cfg RingConfig) *Ring {
	t.Helper()
	return newRing(t, cfg)
}

func mustRepair(t *testing.T, r *Ring) check.RepairReport {
	t.Helper()
	rep, err := r.Repair()
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// assertHealthy: no problems left and only the parent attached.
func assertHealthy(t *testing.T, r *Ring) {
	t.Helper()
	rep := r.Scan()
	if rep.Problems != 0 {
		t.Fatalf("problems after repair: %+v", rep.Slots)
	}
	for _, p := range rep.Peers {
		if p.State != "free" && !p.Self {
			t.Fatalf("participant %d left %s after repair (%s)", p.Index, p.State, p.Reason)
		}
	}
}

// drainAndCheckUsable drains the ring, then proves it still carries a
// message end to end.
func drainAndCheckUsable(t *testing.T, r *Ring) []uint64 {
	t.Helper()
	ids := drain(t, r)
	if err := r.TryPush(encodeMsg(999999)); err != nil {
		t.Fatalf("ring unusable after repair: %v", err)
	}
	if got := drain(t, r); len(got) != 1 || got[0] != 999999 {
		t.Fatalf("ring unusable after repair: drained %v", got)
	}
	return ids
}

func TestCrashProducer(t *testing.T) {
	points := []struct {
		point   string
		problem SlotProblem // expected before repair
	}{
		{crashRingPushAfterClaim, SlotOrphanedWrite},
		{crashRingPushAfterAdvance, SlotOrphanedWrite},
		{crashRingPushAfterWrite, SlotOrphanedWrite},
		{crashRingPushAfterPublish, SlotOK},
	}
	for _, tc := range points {
		t.Run(tc.point, func(t *testing.T) {
			r := crashRing(t, RingConfig{Capacity: 16, Participants: 8})
			log := runCrashChild(t, r.Path(), "producer", tc.point, 4, "FIRST=100", "COUNT=10")
			if got := len(log["ok"]); got != 3 {
				t.Fatalf("child confirmed %d pushes before dying, want 3", got)
			}
			before := r.Scan()
			if tc.problem != SlotOK && countProblem(before, tc.problem) != 1 {
				t.Fatalf("scan before repair: want one %s, got %+v", tc.problem, before.Slots)
			}
			rep := mustRepair(t, r)
			if len(rep.DeadPeers) != 1 || (tc.problem == SlotOrphanedWrite) != (rep.Count(check.ActionRelease) == 1) {
				t.Fatalf("repair report %+v", rep)
			}
			again := mustRepair(t, r)
			if again.Changed() {
				t.Fatalf("second repair changed something: %+v", again)
			}
			assertHealthy(t, r)
			got := drainAndCheckUsable(t, r)
			checkDelivery(t, log["ok"], got, nil)
		})
	}
}

func countProblem(rep ScanReport, p SlotProblem) int {
	n := 0
	for _, s := range rep.Slots {
		if s.Problem == p {
			n++
		}
	}
	return n
}

func TestCrashConsumer(t *testing.T) {
	points := []struct {
		role, point string
		problem     SlotProblem
	}{
		{"pop", crashRingPopAfterTake, SlotOrphanedRead},
		{"pop", crashRingPopAfterAdvance, SlotOrphanedRead},
		{"pop", crashRingPopAfterCopy, SlotOrphanedRead},
		{"claim", crashRingClaimAfterTake, SlotOrphanedLease},
		{"claim", crashRingClaimAfterAdvance, SlotOrphanedLease},
		{"hold", "test.lease.processing", SlotOrphanedLease},
		{"claim", crashRingAckBeforeFree, SlotOrphanedLease},
	}
	for _, tc := range points {
		t.Run(tc.point, func(t *testing.T) {
			for _, full := range []bool{false, true} {
				// A full ring makes the repair re-publish in place
				// rather than push a copy at the tail.
				r := crashRing(t, RingConfig{Capacity: 8, Participants: 8})
				promised := seq(1, 8)
				for _, id := range promised {
					if err := r.TryPush(encodeMsg(id)); err != nil {
						t.Fatal(err)
					}
				}
				after := 3
				if tc.role == "hold" {
					after = 1
				}
				log := runCrashChild(t, r.Path(), tc.role, tc.point, after)
				if full {
					// Fill what the child consumed: the repair must
					// then re-publish in place.
					for id := uint64(100); r.TryPush(encodeMsg(id)) == nil; id++ {
						promised = append(promised, id)
					}
				} else {
					// Leave room so the repair pushes a copy.
					drained := drain(t, r)
					log["got"] = append(log["got"], drained...)
					log["acked"] = append(log["acked"], drained...)
				}
				if n := countProblem(r.Scan(), tc.problem); n != 1 {
					t.Fatalf("want one %s before repair, got %d: %+v", tc.problem, n, r.Scan().Slots)
				}
				rep := mustRepair(t, r)
				switch {
				case !full && rep.Count(check.ActionRequeue) == 1:
				case full && tc.role == "pop" && rep.Count(check.ActionRequeueInPlace) == 1:
					// The dead reader's slot was what stopped the
					// producers: re-published in place, in order.
				case full && tc.role != "pop" && (rep.Count(check.ActionDefer) == 1 || rep.Count(check.ActionRequeueInPlace) == 1):
					// A lease in a full ring is re-published in place if
					// the tail is at its slot, else waits for room; the
					// consumer that next finds the ring empty requeues it.
				default:
					t.Fatalf("full=%v: repair report %+v", full, rep)
				}
				inFlight := map[uint64]bool{}
				acked := map[uint64]bool{}
				for _, id := range log["acked"] {
					acked[id] = true
				}
				if tc.role != "pop" {
					for _, id := range log["got"] {
						if !acked[id] {
							inFlight[id] = true
						}
					}
				}
				delivered := append(log["got"], drainAndCheckUsable(t, r)...)
				assertHealthy(t, r)
				checkDelivery(t, promised, delivered, inFlight)
			}
		})
	}
}

// TestCrashRepairer: a repairer dies after pushing a copy of a dead
// consumer's lease but before freeing the lease. The next repair takes over
// the repair role on proof of death and finishes; the message may be
// delivered twice, never lost.
func TestCrashRepairer(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 8, Participants: 8})
	r.TryPush(encodeMsg(7))
	hold := runCrashChild(t, r.Path(), "hold", "test.lease.processing", 1)
	runCrashChild(t, r.Path(), "repair", crashRingRepairAfterRequeue, 1)
	if r.tab.RepairLock().Load() == 0 {
		t.Fatal("dead repairer did not hold the repair role")
	}
	rep := mustRepair(t, r)
	if rep.Count(check.ActionRequeue) != 1 || len(rep.DeadPeers) != 2 {
		t.Fatalf("repair report %+v", rep)
	}
	assertHealthy(t, r)
	delivered := append(hold["got"], drainAndCheckUsable(t, r)...)
	checkDelivery(t, []uint64{7}, delivered, map[uint64]bool{7: true})
}

// TestCrashAttach: a process killed while taking a participant entry leaves
// it "claiming"; when the table is full, the next attach reclaims it.
func TestCrashAttach(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 8, Participants: 2})
	runCrashChild(t, r.Path(), "attach", peers.CrashPeersAttachAfterClaimEntry, 1)
	o, err := OpenRing(r.Path())
	if err != nil {
		t.Fatalf("attach with a dead claimer in a full table: %v", err)
	}
	o.Close()
	assertHealthy(t, r)
	drainAndCheckUsable(t, r)
}

// TestDeadParticipantsNeverExhaustTable: many processes attach and die
// without detaching; the table (of 3) never runs out.
func TestDeadParticipantsNeverExhaustTable(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 8, Participants: 3})
	for i := 0; i < 6; i++ {
		runChild(t, r.Path(), "attach")
	}
	if _, err := r.Repair(); err != nil {
		t.Fatal(err)
	}
	assertHealthy(t, r)
	drainAndCheckUsable(t, r)
}

// TestDeadProducerDoesNotBlockConsumers: a blocked consumer stuck behind a
// slot whose producer died mid-write heals the ring itself, on proof of
// death, and receives the messages pushed after it.
func TestDeadProducerDoesNotBlockConsumers(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 8, Participants: 8})
	runCrashChild(t, r.Path(), "producer", crashRingPushAfterWrite, 1, "FIRST=1", "COUNT=1")
	for _, id := range []uint64{2, 3} {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	buf := make([]byte, 64)
	for _, want := range []uint64{2, 3} {
		n, err := r.Pop(ctx, buf)
		if err != nil {
			t.Fatalf("consumer stayed blocked behind a dead producer: %v", err)
		}
		if id, _ := decodeMsg(buf[:n]); id != want {
			t.Fatalf("got %d want %d", id, want)
		}
	}
	if r.Counters().Abandoned != 1 {
		t.Fatalf("counters %+v", r.Counters())
	}
}

// TestDeadConsumerDoesNotBlockProducers: a producer blocked on a full ring
// whose blocking slot is held by a consumer that died mid-pop heals it.
func TestDeadConsumerDoesNotBlockProducers(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 4, Participants: 8})
	for id := uint64(1); id <= 4; id++ {
		r.TryPush(encodeMsg(id))
	}
	log := runCrashChild(t, r.Path(), "pop", crashRingPopAfterTake, 1)
	if len(log["got"]) != 0 {
		t.Fatal("child popped before dying")
	}
	// Positions 1-3 drain normally; the dead reader's slot 0 blocks the
	// producer one lap later until the producer proves the reader dead.
	buf := make([]byte, 64)
	var delivered []uint64
	for i := 0; i < 3; i++ {
		n, err := r.TryPop(buf)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := decodeMsg(buf[:n])
		delivered = append(delivered, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for id := uint64(10); id < 14; id++ {
		if err := r.Push(ctx, encodeMsg(id)); err != nil && !errors.Is(err, ErrFull) {
			t.Fatalf("producer stayed blocked behind a dead consumer: %v", err)
		}
		if n, err := r.TryPop(buf); err == nil {
			id, _ := decodeMsg(buf[:n])
			delivered = append(delivered, id)
		}
	}
	delivered = append(delivered, drain(t, r)...)
	checkDelivery(t, []uint64{1, 2, 3, 4, 10, 11, 12, 13}, delivered, nil)
	if s := r.Scan(); s.Problems != 0 || s.States[layout.SlotReading] != 0 {
		t.Fatalf("scan after healing: %+v", s.Slots)
	}
}

// TestCrashWhileBurning: a producer dies right after passing over a held
// lease (its lap moved, the tail not yet). Nothing needs repair: the next
// producer helps the tail on, and the lease is still the holder's.
func TestCrashWhileBurning(t *testing.T) {
	r := crashRing(t, RingConfig{Capacity: 4, Participants: 8})
	r.TryPush(encodeMsg(1))
	held, err := r.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for id := uint64(2); id <= 4; id++ {
		r.TryPush(encodeMsg(id))
		r.TryPop(buf)
	}
	log := runCrashChild(t, r.Path(), "producer", crashRingPushAfterBurn, 1, "FIRST=10", "COUNT=1")
	if len(log["ok"]) != 0 {
		t.Fatal("child confirmed a push")
	}
	if rep := r.Scan(); rep.Problems != 0 {
		t.Fatalf("scan: %+v", rep.Slots)
	}
	for id := uint64(20); id < 23; id++ {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatalf("push after a producer died burning: %v", err)
		}
	}
	checkDelivery(t, []uint64{20, 21, 22}, drain(t, r), nil)
	if err := r.Ack(held); err != nil {
		t.Fatalf("lease lost: %v", err)
	}
	mustRepair(t, r)
	assertHealthy(t, r)
	drainAndCheckUsable(t, r)
}
