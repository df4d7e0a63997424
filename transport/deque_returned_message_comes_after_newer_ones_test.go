package transport

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/shmkit/shmkit/transport/check"
)

// A message a dead thief held comes back after the messages pushed after
// it (docs/design.md, "Limits"; repair's finding says so): thieves take it
// once [top, bottom) is empty, and the owner's pushes re-publish it as the
// newest when they come round to its slot. The thief is a real process,
// SIGKILLed while it holds the lease.
func TestDequeReturnedMessageComesAfterNewerOnes(t *testing.T) {
	const total = 35
	for _, tc := range []struct {
		name string
		more uint64 // messages the owner pushes after the repair
		want []uint64
	}{
		// 2..35, then 1: the 35th of 35.
		{"taken when the deque is otherwise empty", 0, append(seq(2, total-1), 1)},
		// The owner's pushes reach slot 0 at position 64 (36..64 fill
		// positions 35..63): 1 is re-published there, the newest, and
		// the deque is then full (top 1, bottom 65).
		{"re-published when the owner's pushes reach its slot", 64 - total, append(seq(2, 63), 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "returned.shm")
			d, err := CreateDeque(path, DequeConfig{Capacity: 64, SlotSize: 64, Participants: 4, DeliveryLimit: 5})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for id := uint64(1); id <= total; id++ {
				if err := d.TryPush(encodeMsg(id)); err != nil {
					t.Fatal(err)
				}
			}
			log := runDequeChild(t, path, "hold", "test.lease.processing", 1)
			if got := log.Ints("got"); !slices.Equal(got, []int{1}) {
				t.Fatalf("the thief took %v before it was killed, want [1]", got)
			}
			rep, err := d.Repair()
			if err != nil {
				t.Fatal(err)
			}
			if n := rep.Count(check.ActionReturn); n != 1 {
				t.Fatalf("repair returned %d messages, want 1: %+v", n, rep.Done)
			}
			for id := uint64(total + 1); id <= total+tc.more; id++ {
				if err := d.TryPush(encodeMsg(id)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.more > 0 {
				// The push at position 64 re-published 1; the one after
				// does not fit.
				if err := d.TryPush(encodeMsg(999)); err != ErrFull {
					t.Fatalf("push after the re-publish: %v, want ErrFull", err)
				}
			}
			var got []uint64
			buf := make([]byte, d.MaxPayload())
			for {
				n, err := d.TrySteal(buf)
				if err == ErrEmpty {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				id, err := decodeMsg(buf[:n])
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, id)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("took %v, want %v", got, tc.want)
			}
		})
	}
}
