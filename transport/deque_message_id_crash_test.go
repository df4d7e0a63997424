package transport

import (
	"testing"

	"github.com/shmkit/shmkit/transport/check"
)

// The deque's message ids across SIGKILLs (real child processes):
//
//   - an owner killed after taking a number (deque.push.after-id, or a
//     batch's deque.push-batch.after-ids) leaves a gap: the repair
//     releases the half-done push, the next owner's pushes go on from the
//     counter, and no id is ever given twice;
//   - a thief killed holding a lease has its message handed back by the
//     repair and taken again with the id it was pushed with.
func TestDequeMessageIDCrashWindows(t *testing.T) {
	for _, tc := range []struct {
		name       string
		batch      bool   // the owner pushes with PushBatch (BATCH=3)
		point      string // where the owner dies
		after      int
		published  uint64 // messages 1..published are in the deque, message n with id n
		numbersOut uint64 // the counter after the kill: numbers taken, published or not
	}{
		{"push after id", false, crashDequePushAfterID, 5, 4, 5},
		{"push after claim", false, crashDequePushAfterClaim, 5, 4, 4},
		{"push batch after ids", true, crashDequePushBatchAfterIDs, 2, 3, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeque(t, DequeConfig{Capacity: 16, MessageIDs: true})
			path := d.Path()
			d.Close() // the child adopts it
			var log map[string][]uint64
			if tc.batch {
				log = runDequeBatchChild(t, path, "owner", tc.point, tc.after, "FIRST=1", "COUNT=9", "BATCH=3")
			} else {
				log = runDequeChild(t, path, "owner", tc.point, tc.after, "FIRST=1", "COUNT=10")
			}
			if uint64(len(log["ok"])) != tc.published {
				t.Fatalf("child pushed %v before dying, want %d messages", log["ok"], tc.published)
			}
			p, err := OpenDeque(path)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if c := p.Counters(); c.NextMessageID != tc.numbersOut {
				t.Fatalf("next_id %d after the kill, want %d", c.NextMessageID, tc.numbersOut)
			}
			rep, err := p.Repair()
			if err != nil {
				t.Fatal(err)
			}
			if rep.Count(check.ActionRelease) == 0 {
				t.Fatalf("the repair released no half-done push: %+v", rep.Done)
			}
			if _, err := p.Adopt(); err != nil {
				t.Fatal(err)
			}
			// The new owner's message takes the next number: past the gap.
			if err := p.TryPush(encodeMsg(99)); err != nil {
				t.Fatal(err)
			}
			ids := map[uint64]uint64{} // id -> message
			for {
				l, err := p.TryClaim()
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
				if prev, dup := ids[l.ID()]; dup {
					t.Fatalf("id %d given to messages %d and %d", l.ID(), prev, num)
				}
				ids[l.ID()] = num
				want := num
				if num == 99 {
					want = tc.numbersOut + 1
				}
				if l.ID() != want {
					t.Fatalf("message %d has id %d, want %d", num, l.ID(), want)
				}
				p.Ack(l)
			}
			if uint64(len(ids)) != tc.published+1 {
				t.Fatalf("took %v, want messages 1..%d and 99", ids, tc.published)
			}
		})
	}
}

func TestDequeLeaseOfADeadThiefKeepsItsID(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 16, MessageIDs: true})
	pushed := map[uint64]uint64{}
	for num := uint64(1); num <= 5; num++ {
		id := num<<32 | 0xabc // a caller's id, unlike any counter value
		if err := d.TryPushID(encodeMsg(num), id); err != nil {
			t.Fatal(err)
		}
		pushed[num] = id
	}
	log := runDequeChild(t, d.Path(), "hold", "test.lease.processing", 1)
	if len(log["got"]) != 1 || len(log["msgid"]) != 1 || log["msgid"][0] != pushed[log["got"][0]] {
		t.Fatalf("child's lease: %v, want one message with the id it was pushed with", log)
	}
	rep, err := d.Repair()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(check.ActionReturn) != 1 {
		t.Fatalf("repair returned %d leases, want 1: %+v", rep.Count(check.ActionReturn), rep.Done)
	}
	thief := openThief(t, d)
	seen := 0
	for {
		l, err := thief.TryClaim()
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
			t.Fatalf("message %d (deliveries %d) taken with id %d, pushed with %d", num, l.Deliveries, l.ID(), pushed[num])
		}
		if num == log["got"][0] && l.Deliveries != 2 {
			t.Fatalf("the dead thief's message delivered %d times, want 2", l.Deliveries)
		}
		seen++
		thief.Ack(l)
	}
	if seen != 5 {
		t.Fatalf("took %d messages, want 5", seen)
	}
}
