package transport

import (
	"testing"

	"github.com/shmkit/shmkit/transport/check"
)

// TestRingRepairThatOnlyDefersWakesNobody: the ring is full of live
// leases but for one a dead consumer holds, which no repair can requeue
// yet (no room, the tail at another slot). A repair that only defers that lease
// again changes nothing a sleeper waits for, so it wakes nobody.
//
// Was a bug (found with the crash-loop tests): every repair that reported
// a dead participant counted as a change and woke every sleeper, and an
// entry kept dead for a deferred lease is reported by every repair. A
// consumer blocked in Claim with leases deferred repairs inline each time
// it finds the ring empty, so its own repair woke it: it spun, repairing
// (and burning a lap of the ring) about 20000 times in half a second.
func TestRingRepairThatOnlyDefersWakesNobody(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4, Participants: 4})
	for id := uint64(1); id <= 2; id++ {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Live leases (ours) on slots 0, 2 and 3, the dead one's on slot 1:
	// the ring is full, and a repair leaves the tail at slot 0.
	if _, err := r.TryClaim(); err != nil {
		t.Fatal(err)
	}
	runCrashChild(t, r.Path(), "hold", "test.lease.processing", 1)
	for id := uint64(3); id <= 4; id++ {
		if err := r.TryPush(encodeMsg(id)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.TryClaim(); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := r.Repair(); err != nil || rep.Count(check.ActionDefer) != 1 {
		t.Fatalf("first repair: %+v %v, want the dead lease deferred", rep, err)
	}
	// A sleeper on each side.
	r.notEmptyW.Store(1)
	r.notFullW.Store(1)
	empty, full := r.notEmptySeq.Load(), r.notFullSeq.Load()
	rep, err := r.Repair()
	if err != nil || rep.Count(check.ActionDefer) != 1 || len(rep.Done) != 1 {
		t.Fatalf("second repair: %+v %v, want only the deferral again", rep, err)
	}
	if r.notEmptySeq.Load() != empty || r.notFullSeq.Load() != full || r.notEmptyW.Load() != 1 || r.notFullW.Load() != 1 {
		t.Fatal("a repair that only deferred a lease again woke the sleepers")
	}
	r.notEmptyW.Store(0)
	r.notFullW.Store(0)
}
