package transport

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The deque's batch calls keep the ring's contract (deque_batch.go): a
// call does as many as fit or are waiting and says how many; none gives
// ErrFull or ErrEmpty; a message too large refuses the whole batch up
// front; a blocking call returns as soon as it has done one, and with
// nothing done only when its context ends; the owner's pop batch takes
// newest first and a thief's oldest first, as TryPop does; counters move
// once per batch by the batch's count; a batch split in runs (a held
// lease burned past, a burned position popped past, a message at the
// delivery limit, a short buffer, a returned message) does at each split
// what the single call does there.

func dequeBufs(d *Deque, n int) ([][]byte, []int) {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, d.MaxPayload())
	}
	return bufs, make([]int, n)
}

func leaseIDs(t *testing.T, leases []Lease) []uint64 {
	t.Helper()
	ids := make([]uint64, len(leases))
	for i, l := range leases {
		id, err := decodeMsg(l.Data())
		if err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

func TestDequeBatchCallsDoWhatFits(t *testing.T) {
	type env struct {
		d, th *Deque // the owner and a thief
	}
	cases := []struct {
		name string
		cfg  DequeConfig
		run  func(t *testing.T, e env)
	}{
		{"push batch pushes what fits, in order", DequeConfig{Capacity: 8}, func(t *testing.T, e env) {
			if n, err := e.d.TryPushBatch(idBatch(1, 2, 3, 4, 5)); n != 5 || err != nil {
				t.Fatalf("first batch: %d, %v", n, err)
			}
			if n, err := e.d.TryPushBatch(idBatch(6, 7, 8, 9, 10)); n != 3 || err != nil {
				t.Fatalf("batch with room for 3: %d, %v (want 3, nil)", n, err)
			}
			if n, err := e.d.TryPushBatch(idBatch(11)); n != 0 || err != ErrFull {
				t.Fatalf("batch on a full deque: %d, %v (want 0, ErrFull)", n, err)
			}
			if n, err := e.d.TryPushBatch(nil); n != 0 || err != nil {
				t.Fatalf("empty batch: %d, %v", n, err)
			}
			if c := e.d.Counters(); c.Pushed != 8 || c.FullHits != 1 || c.Bottom != 8 {
				t.Fatalf("counters %+v", c)
			}
			wantIDs(t, "stolen, oldest first", drainDeque(t, e.th), seq(1, 8)...)
		}},
		{"push batch: only the owner, nothing too large", DequeConfig{Capacity: 8}, func(t *testing.T, e env) {
			if n, err := e.th.TryPushBatch(idBatch(1)); n != 0 || !errors.Is(err, ErrNotOwner) {
				t.Fatalf("thief's push batch: %d, %v", n, err)
			}
			msgs := idBatch(1, 2, 3)
			msgs = append(msgs[:2], make([]byte, e.d.MaxPayload()+1), msgs[2])
			for name, push := range map[string]func([][]byte) (int, error){
				"TryPushBatch": e.d.TryPushBatch,
				"PushBatch":    func(m [][]byte) (int, error) { return e.d.PushBatch(context.Background(), m) },
			} {
				if n, err := push(msgs); n != 0 || !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "message 2 of the batch") {
					t.Fatalf("%s with message 2 too large: %d, %v", name, n, err)
				}
			}
			if c := e.d.Counters(); c.Bottom != 0 || c.Pushed != 0 {
				t.Fatalf("a refused batch pushed something: %+v", c)
			}
		}},
		{"owner pops newest first, thief steals oldest first", DequeConfig{Capacity: 8}, func(t *testing.T, e env) {
			pushIDs(t, e.d.TryPush, 1, 2, 3, 4, 5, 6)
			bufs, lens := dequeBufs(e.d, 3)
			n, err := e.d.TryPopBatch(bufs, lens)
			if n != 3 || err != nil {
				t.Fatal(n, err)
			}
			wantIDs(t, "owner's pop batch", popIDs(t, bufs, lens, n), 6, 5, 4)
			bufs, lens = dequeBufs(e.th, 8)
			n, err = e.th.TryPopBatch(bufs, lens)
			if n != 3 || err != nil {
				t.Fatalf("thief's pop batch of 8 with 3 waiting: %d, %v", n, err)
			}
			wantIDs(t, "thief's pop batch", popIDs(t, bufs, lens, n), 1, 2, 3)
			for _, h := range []*Deque{e.d, e.th} {
				if n, err := h.TryPopBatch(bufs, lens); n != 0 || err != ErrEmpty {
					t.Fatalf("pop batch on an empty deque: %d, %v", n, err)
				}
			}
			if n, err := e.th.TryPopBatch(bufs[:0], lens); n != 0 || err != nil {
				t.Fatalf("pop batch of none: %d, %v", n, err)
			}
			c := e.d.Counters()
			if c.OwnerPopped != 3 || c.Stolen != 3 || c.EmptyHits != 2 || c.Top != 3 || c.Bottom != 3 {
				t.Fatalf("counters %+v", c)
			}
			// The positions popped are the owner's to push at again.
			pushIDs(t, e.d.TryPush, 7)
			wantIDs(t, "after", drainDeque(t, e.d), 7)
		}},
		{"the owner's steal batch takes the oldest", DequeConfig{Capacity: 8}, func(t *testing.T, e env) {
			pushIDs(t, e.d.TryPush, 1, 2, 3, 4)
			bufs, lens := dequeBufs(e.d, 2)
			n, err := e.d.TryStealBatch(bufs, lens)
			if n != 2 || err != nil {
				t.Fatal(n, err)
			}
			wantIDs(t, "owner's steal batch", popIDs(t, bufs, lens, n), 1, 2)
			wantIDs(t, "left, newest first", drainDeque(t, e.d), 4, 3)
			if c := e.d.Counters(); c.Stolen != 2 || c.OwnerPopped != 2 {
				t.Fatalf("counters %+v", c)
			}
		}},
		{"a short buffer stops the batch there", DequeConfig{Capacity: 8}, func(t *testing.T, e env) {
			for _, m := range [][]byte{[]byte("short"), []byte(strings.Repeat("long", 8)), []byte("tail")} {
				if err := e.d.TryPush(m); err != nil {
					t.Fatal(err)
				}
			}
			for _, h := range []*Deque{e.th, e.d} {
				bufs := [][]byte{make([]byte, 16), make([]byte, 16), make([]byte, 16)}
				lens := make([]int, 3)
				n, err := h.TryPopBatch(bufs, lens)
				first := map[*Deque]string{e.th: "short", e.d: "tail"}[h]
				if n != 1 || !errors.Is(err, ErrShortBuffer) || string(bufs[0][:lens[0]]) != first {
					t.Fatalf("owner %v: pop batch with a short second buffer: %d, %v, %q", h.IsOwner(), n, err, bufs[0][:lens[0]])
				}
			}
			bufs, lens := dequeBufs(e.d, 4)
			if n, err := e.d.TryPopBatch(bufs, lens); n != 1 || err != nil || string(bufs[0][:lens[0]]) != strings.Repeat("long", 8) {
				t.Fatalf("the long message stayed: %d, %v", n, err)
			}
		}},
		{"push batch burns past a held lease and keeps its order", DequeConfig{Capacity: 8}, func(t *testing.T, e env) {
			pushIDs(t, e.d.TryPush, seq(1, 8)...)
			buf := make([]byte, 64)
			for range 2 {
				if _, err := e.th.TryPop(buf); err != nil {
					t.Fatal(err)
				}
			}
			held, err := e.th.TryClaim() // position 2, slot 2
			if err != nil {
				t.Fatal(err)
			}
			drainDeque(t, e.th) // positions 3..7: top and bottom at 8
			before := e.d.Counters()
			// Positions 8, 9 (slots 0, 1), the lease at 10 burned, 11..13.
			if n, err := e.d.TryPushBatch(idBatch(20, 21, 22, 23, 24)); n != 5 || err != nil {
				t.Fatalf("batch around a held lease: %d, %v", n, err)
			}
			c := e.d.Counters()
			if c.Burned != before.Burned+1 || c.Pushed != before.Pushed+5 || c.Bottom != 14 {
				t.Fatalf("counters %+v (before %+v)", c, before)
			}
			// The owner pops past the burned position; a thief steps over it.
			bufs, lens := dequeBufs(e.d, 4)
			n, err := e.d.TryPopBatch(bufs, lens)
			if n != 4 || err != nil {
				t.Fatal(n, err)
			}
			wantIDs(t, "owner's pop batch across the burned position", popIDs(t, bufs, lens, n), 24, 23, 22, 21)
			wantIDs(t, "stolen", drainDeque(t, e.th), 20)
			if err := e.th.Ack(held); err != nil {
				t.Fatalf("the lease burned past is lost: %v", err)
			}
			pushIDs(t, e.d.TryPush, 30, 31)
			wantIDs(t, "after", drainDeque(t, e.th), 30, 31)
		}},
		{"claim batch and ack batch", DequeConfig{Capacity: 8}, func(t *testing.T, e env) {
			pushIDs(t, e.d.TryPush, 1, 2, 3, 4, 5)
			leases := make([]Lease, 8)
			n, err := e.th.TryClaimBatch(leases)
			if n != 5 || err != nil {
				t.Fatalf("claim batch: %d, %v", n, err)
			}
			wantIDs(t, "claimed, oldest first", leaseIDs(t, leases[:n]), 1, 2, 3, 4, 5)
			if n, err := e.th.TryClaimBatch(leases[n:]); n != 0 || err != ErrEmpty {
				t.Fatalf("claim batch on an empty deque: %d, %v", n, err)
			}
			if err := e.th.Ack(leases[1]); err != nil {
				t.Fatal(err)
			}
			err = e.th.AckBatch(leases[:n])
			if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "lease 1 of the batch; 1 of its 5") {
				t.Fatalf("ack batch with a lease acked before: %v", err)
			}
			if c := e.d.Counters(); c.Claimed != 5 || c.Acked != 5 {
				t.Fatalf("counters %+v", c)
			}
			if s := e.d.Scan(); len(s.Slots) != 0 {
				t.Fatalf("slots left after the acks: %+v", s.Slots)
			}
			if err := e.th.AckBatch(nil); err != nil {
				t.Fatalf("ack batch of none: %v", err)
			}
		}},
		{"claim batch sets poison aside", DequeConfig{Capacity: 8, DeliveryLimit: 1}, func(t *testing.T, e env) {
			pushIDs(t, e.d.TryPush, 1)
			l, err := e.th.TryClaim()
			if err != nil {
				t.Fatal(err)
			}
			pushIDs(t, e.d.TryPush, 2, 3)
			if err := e.th.Release(l); err != nil { // 1, returned, delivered once: poison
				t.Fatal(err)
			}
			leases := make([]Lease, 4)
			n, err := e.th.TryClaimBatch(leases)
			if n != 2 || err != nil {
				t.Fatalf("claim batch: %d, %v", n, err)
			}
			wantIDs(t, "claimed", leaseIDs(t, leases[:n]), 2, 3)
			if n, err := e.th.TryClaimBatch(leases); n != 0 || err != ErrEmpty {
				t.Fatalf("claim batch with only poison left: %d, %v", n, err)
			}
			if c := e.d.Counters(); c.Poisoned != 1 || c.Claimed != 3 {
				t.Fatalf("counters %+v", c)
			}
			if err := e.th.AckBatch(leases[:n]); err != nil {
				t.Fatal(err)
			}
		}},
		{"owner's pop batch leaves a message at the delivery limit to the top, which sets it aside", DequeConfig{Capacity: 4, DeliveryLimit: 2}, func(t *testing.T, e env) {
			pushIDs(t, e.d.TryPush, 1)
			for range 2 { // 1 delivered twice, handed back each time
				l, err := e.th.TryClaim()
				if err != nil {
					t.Fatal(err)
				}
				if err := e.th.Release(l); err != nil {
					t.Fatal(err)
				}
			}
			pushIDs(t, e.d.TryPush, 2, 3, 4)
			bufs, lens := dequeBufs(e.th, 3)
			if n, err := e.th.TryStealBatch(bufs, lens); n != 3 || err != nil {
				t.Fatal(n, err)
			}
			// The batch's first run republishes 1 (returned, in slot 0)
			// at position 4, then pushes 5 and 6 after it.
			if n, err := e.d.TryPushBatch(idBatch(5, 6)); n != 2 || err != nil {
				t.Fatal(n, err)
			}
			bufs, lens = dequeBufs(e.d, 8)
			n, err := e.d.TryPopBatch(bufs, lens)
			if n != 2 || err != nil {
				t.Fatal(n, err)
			}
			wantIDs(t, "owner's pop batch", popIDs(t, bufs, lens, n), 6, 5)
			if c := e.d.Counters(); c.Poisoned != 1 || c.OwnerPopped != 2 || c.Top != 5 || c.Bottom != 5 {
				t.Fatalf("counters %+v", c)
			}
			buf := make([]byte, 64)
			if n, deliveries, err := e.th.TakePoisoned(buf); err != nil || deliveries != 2 || string(buf[:n]) != string(encodeMsg(1)) {
				t.Fatalf("poison: %q, %d, %v", buf[:n], deliveries, err)
			}
		}},
		{"thief's batch takes returned messages when the deque is otherwise empty", DequeConfig{Capacity: 8}, func(t *testing.T, e env) {
			pushIDs(t, e.d.TryPush, 1, 2, 3)
			leases := make([]Lease, 2)
			if n, err := e.th.TryClaimBatch(leases); n != 2 || err != nil {
				t.Fatal(n, err)
			}
			for _, l := range leases {
				if err := e.th.Release(l); err != nil {
					t.Fatal(err)
				}
			}
			bufs, lens := dequeBufs(e.th, 8)
			n, err := e.th.TryPopBatch(bufs, lens)
			if n != 3 || err != nil {
				t.Fatal(n, err)
			}
			got := popIDs(t, bufs, lens, n)
			wantIDs(t, "3 first, then the returned ones in slot order", got, 3, 1, 2)
			if c := e.d.Counters(); c.Pending != 0 || c.Stolen != 3 {
				t.Fatalf("counters %+v", c)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeque(t, tc.cfg)
			tc.run(t, env{d: d, th: openThief(t, d)})
		})
	}
}

// The blocking calls return as soon as one is done, and with nothing done
// only when their context ends.
func TestDequeBatchBlockingCallsReturnOnceOneIsDone(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 4})
	th := openThief(t, d)
	bufs, lens := dequeBufs(d, 4)
	leases := make([]Lease, 4)
	short, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if n, err := th.PopBatch(short, bufs, lens); n != 0 || err != context.DeadlineExceeded {
		t.Fatalf("pop batch on an empty deque: %d, %v", n, err)
	}
	if n, err := th.StealBatch(short, bufs, lens); n != 0 || err != context.DeadlineExceeded {
		t.Fatalf("steal batch on an empty deque: %d, %v", n, err)
	}
	if n, err := th.ClaimBatch(short, leases); n != 0 || err != context.DeadlineExceeded {
		t.Fatalf("claim batch on an empty deque: %d, %v", n, err)
	}
	pushIDs(t, d.TryPush, 1, 2, 3, 4)
	if n, err := d.PushBatch(short, idBatch(5, 6)); n != 0 || err != context.DeadlineExceeded {
		t.Fatalf("push batch on a full deque: %d, %v", n, err)
	}
	if n, err := d.PushBatch(short, nil); n != 0 || err != nil {
		t.Fatalf("empty push batch: %d, %v", n, err)
	}
	drainDeque(t, th)
	if n, err := th.PopBatch(short, nil, nil); n != 0 || err != nil {
		t.Fatalf("empty pop batch: %d, %v", n, err)
	}

	ctx, cancelLong := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelLong()
	type result struct {
		n   int
		err error
	}
	for _, call := range []struct {
		name string
		run  func() (int, error)
	}{
		{"PopBatch", func() (int, error) { return th.PopBatch(ctx, bufs, lens) }},
		{"StealBatch", func() (int, error) { return th.StealBatch(ctx, bufs, lens) }},
		{"ClaimBatch", func() (int, error) { return th.ClaimBatch(ctx, leases) }},
	} {
		done := make(chan result, 1)
		go func() {
			n, err := call.run()
			done <- result{n, err}
		}()
		pushIDs(t, d.TryPush, 7)
		res := <-done
		if res.n != 1 || res.err != nil {
			t.Fatalf("%s woken by one message: %d, %v", call.name, res.n, res.err)
		}
		if call.name == "ClaimBatch" {
			if err := th.AckBatch(leases[:1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One slot frees up on a full deque: the waiting push batch pushes one.
	pushIDs(t, d.TryPush, 1, 2, 3, 4)
	done := make(chan result, 1)
	go func() {
		n, err := d.PushBatch(ctx, idBatch(5, 6, 7))
		done <- result{n, err}
	}()
	buf := make([]byte, 64)
	if _, err := th.TryPop(buf); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.n != 1 || res.err != nil {
		t.Fatalf("PushBatch given room for one: %d, %v", res.n, res.err)
	}
	wantIDs(t, "after the push batch", drainDeque(t, th), 2, 3, 4, 5)

	cctx, cancelNow := context.WithCancel(context.Background())
	go func() {
		n, err := th.PopBatch(cctx, bufs, lens)
		done <- result{n, err}
	}()
	cancelNow()
	if res := <-done; res.n != 0 || res.err != context.Canceled {
		t.Fatalf("PopBatch cancelled: %d, %v", res.n, res.err)
	}
}
