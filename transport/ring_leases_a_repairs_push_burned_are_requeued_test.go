package transport

import (
	"context"
	"testing"
	"time"

	"github.com/shmkit/shmkit/transport/check"
)

// TestRingLeasesARepairsPushBurnedAreRequeued: a dead consumer's leases
// fill the ring and the head has caught up with the tail (every position
// taken, so the ring looks empty). A repair's copy push finds no room, but
// on its way it burns past the very leases it is recovering, which moves
// their laps on with the tail: the repair must judge each lease as it is
// after that push, and then re-publishes them in place. A consumer alone,
// blocked in Claim, gets them.
//
// Was a bug (found by TestCrashLoopingRingConsumersNeverLockTheTable with
// 5000 children on a full ring of 512 slots): recoverSlot judged the in-place
// re-publish on the word read before its own push, saw the wrong lap and
// deferred every lease. A consumer's take always catches the head up with
// the tail first, so its inline repair (the deferred count being set) burnt
// a whole lap and deferred again, forever: the consumer woke itself with
// each repair's wake-up, never got a message (its Claim ran into its
// deadline after 42442 laps of the ring), and held the repair lock so often
// that an attach needing a repair gave up ("other processes kept taking the
// entries freed for this attach"). Only a repair that happened to start with
// the tail a whole ring ahead of the head re-published them.
func TestRingLeasesARepairsPushBurnedAreRequeued(t *testing.T) {
	for _, who := range []string{"repair", "blocked-consumer"} {
		t.Run(who, func(t *testing.T) {
			r := newRing(t, RingConfig{Capacity: 4, Participants: 4})
			promised := seq(1, 4)
			for _, id := range promised {
				if err := r.TryPush(encodeMsg(id)); err != nil {
					t.Fatal(err)
				}
			}
			if got := len(runCrashChild(t, r.Path(), "claimall", "test.lease.all-held", 1)["got"]); got != 4 {
				t.Fatalf("child leased %d messages, want 4", got)
			}
			if c := r.Counters(); c.Head != c.Tail {
				t.Fatalf("head %d, tail %d: want the head caught up", c.Head, c.Tail)
			}
			var delivered []uint64
			switch who {
			case "repair":
				rep, err := r.Repair()
				if err != nil || rep.Count(check.ActionRequeueInPlace) != 4 {
					t.Fatalf("repair of 4 dead leases filling the ring: %+v %v, want 4 re-published in place", rep, err)
				}
			case "blocked-consumer":
				// As after an attach's repair that deferred them: a
				// consumer that finds the ring empty repairs inline.
				r.deferred.Store(4)
				for range promised {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					l, err := r.Claim(ctx)
					cancel()
					if err != nil {
						c := r.Counters()
						t.Fatalf("a blocked consumer never got the dead consumer's leases: %v (head %d, tail %d: %d laps)", err, c.Head, c.Tail, c.Tail/r.Capacity())
					}
					id, err := decodeMsg(l.Data())
					if err != nil {
						t.Fatal(err)
					}
					delivered = append(delivered, id)
					if err := r.Ack(l); err != nil {
						t.Fatal(err)
					}
				}
			}
			delivered = append(delivered, drainAndCheckUsable(t, r)...)
			checkDelivery(t, promised, delivered, nil)
			assertHealthy(t, r)
		})
	}
}
