package transport

import (
	"testing"

	"github.com/shmkit/shmkit/transport/check"
)

// A message whose holder dies (SIGKILLed holding a lease, or in the middle
// of a pop) is delivered again by a repair with the id it was pushed
// with: a requeue that copies it to a new slot copies its id too, and a
// re-publish in place leaves it where it is. This is what a bridge
// relies on to publish a redelivered message under the same name
// (docs/format.md, "Message ids").
func TestRingMessageIDSurvivesADeadHoldersRequeue(t *testing.T) {
	for _, tc := range []struct {
		name, role, point string
		capacity          uint64
		msgs              int // pushed before the child runs
		after             int // the child dies the after-th time it reaches point
		action            check.Action
	}{
		// Room at the tail: the repair pushes a copy (a new slot, a new
		// lap), which must carry the id.
		{"lease requeued to a new slot", "hold", "test.lease.processing", 8, 3, 2, check.ActionRequeue},
		{"pop requeued to a new slot", "popid", crashRingPopAfterCopy, 8, 3, 2, check.ActionRequeue},
		{"claim after take", "hold", crashRingClaimAfterTake, 8, 3, 1, check.ActionRequeue},
		// Every slot leased: no room for a copy, so the repair re-publishes
		// each in place (the id stays in its slot).
		{"full ring re-published in place", "claimall", "test.lease.all-held", 4, 4, 1, check.ActionRequeueInPlace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := crashRing(t, RingConfig{Capacity: tc.capacity, Participants: 4, MessageIDs: true})
			pushed := map[uint64]uint64{} // message number -> id
			for i := 0; i < tc.msgs; i++ {
				num := uint64(100 + i)
				id := uint64(1)<<40 | num*7 // not a position+1, so a re-stamp would show
				if err := r.TryPushID(encodeMsg(num), id); err != nil {
					t.Fatal(err)
				}
				pushed[num] = id
			}
			log := runCrashChild(t, r.Path(), tc.role, tc.point, tc.after)
			if ids := log["msgid"]; tc.point != crashRingClaimAfterTake {
				// What the child saw before it died carries the ids pushed.
				for i, num := range log["got"] {
					if i < len(ids) && ids[i] != pushed[num] {
						t.Fatalf("child got message %d with id %d, pushed with %d", num, ids[i], pushed[num])
					}
				}
			}
			// Repair, then claim everything left (redelivered or never
			// taken), each with the id it was pushed with; a full ring's
			// leases come back in place a few at a time, so rounds repeat.
			seen := map[uint64]bool{}
			requeued := 0
			for round := 0; round < 5; round++ {
				rep := mustRepair(t, r)
				t.Logf("repair %d: %+v", round, rep.Done)
				requeued += rep.Count(tc.action)
				for {
					l, err := r.TryClaim()
					if err == ErrEmpty {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					num, err := decodeMsg(l.Data())
					if err != nil {
						t.Fatal(err)
					}
					if l.ID() != pushed[num] {
						t.Fatalf("message %d redelivered (deliveries %d) with id %d, pushed with %d", num, l.Deliveries, l.ID(), pushed[num])
					}
					seen[num] = true
					if err := r.Ack(l); err != nil {
						t.Fatal(err)
					}
				}
			}
			if requeued == 0 {
				t.Fatalf("no repair took action %s", tc.action)
			}
			for num := range pushed {
				acked := false
				for _, a := range log["acked"] {
					acked = acked || a == num
				}
				popped := false
				if tc.role == "popid" {
					// Popped whole before the kill after its copy: the
					// first pop was finished; the second died after copying.
					popped = len(log["got"]) > 0 && log["got"][0] == num
				}
				if !seen[num] && !acked && !popped {
					t.Fatalf("message %d lost (seen %v, child log %v)", num, seen, log)
				}
			}
			assertHealthy(t, r)
		})
	}
}
