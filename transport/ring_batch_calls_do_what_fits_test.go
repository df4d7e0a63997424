package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The batch calls' contract (ring_batch.go): a call does as many as fit
// or are waiting and says how many; none gives ErrFull or ErrEmpty; a
// message too large refuses the whole batch up front; a blocking call
// returns as soon as it has done one, and with nothing done only when its
// context ends; a batch split in runs (by a held lease, by poison, by a
// buffer too short) keeps its messages in order and counts them once.

func idBatch(ids ...uint64) [][]byte {
	msgs := make([][]byte, len(ids))
	for i, id := range ids {
		msgs[i] = encodeMsg(id)
	}
	return msgs
}

func popBufs(r *Ring, n int) ([][]byte, []int) {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, r.MaxPayload())
	}
	return bufs, make([]int, n)
}

// popIDs decodes what a pop batch returned.
func popIDs(t *testing.T, bufs [][]byte, lens []int, n int) []uint64 {
	t.Helper()
	ids := make([]uint64, n)
	for i := range n {
		id, err := decodeMsg(bufs[i][:lens[i]])
		if err != nil {
			t.Fatalf("message %d of the batch: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

func wantIDs(t *testing.T, what string, got []uint64, want ...uint64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func TestRingBatchPushesWhatFitsInOrder(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	if n, err := r.TryPushBatch(idBatch(1, 2, 3, 4, 5)); n != 5 || err != nil {
		t.Fatalf("first batch: %d, %v", n, err)
	}
	if n, err := r.TryPushBatch(idBatch(6, 7, 8, 9, 10)); n != 3 || err != nil {
		t.Fatalf("batch with room for 3: %d, %v (want 3, nil)", n, err)
	}
	if n, err := r.TryPushBatch(idBatch(11)); n != 0 || err != ErrFull {
		t.Fatalf("batch on a full ring: %d, %v (want 0, ErrFull)", n, err)
	}
	if n, err := r.TryPushBatch(nil); n != 0 || err != nil {
		t.Fatalf("empty batch: %d, %v", n, err)
	}
	c := r.Counters()
	if c.Pushed != 8 || c.FullHits != 1 || c.Tail != 8 {
		t.Fatalf("counters %+v", c)
	}
	wantIDs(t, "drained", drain(t, r), 1, 2, 3, 4, 5, 6, 7, 8)
}

func TestRingBatchTooLargeRefusedUpFront(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	msgs := idBatch(1, 2, 3)
	msgs = append(msgs[:2], make([]byte, r.MaxPayload()+1), msgs[2])
	for name, push := range map[string]func([][]byte) (int, error){
		"TryPushBatch": r.TryPushBatch,
		"PushBatch":    func(m [][]byte) (int, error) { return r.PushBatch(context.Background(), m) },
	} {
		n, err := push(msgs)
		if n != 0 || !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "message 2 of the batch") {
			t.Fatalf("%s with message 2 too large: %d, %v", name, n, err)
		}
	}
	if c := r.Counters(); c.Tail != 0 || c.Pushed != 0 {
		t.Fatalf("a refused batch pushed something: %+v", c)
	}
}

func TestRingBatchPopsWhatIsWaiting(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	pushIDs(t, r.TryPush, 1, 2, 3)
	bufs, lens := popBufs(r, 8)
	n, err := r.TryPopBatch(bufs, lens)
	if n != 3 || err != nil {
		t.Fatalf("pop batch of 8 with 3 waiting: %d, %v", n, err)
	}
	wantIDs(t, "popped", popIDs(t, bufs, lens, n), 1, 2, 3)
	if n, err := r.TryPopBatch(bufs, lens); n != 0 || err != ErrEmpty {
		t.Fatalf("pop batch on an empty ring: %d, %v", n, err)
	}
	// The batch is as long as the shorter of bufs and lens.
	pushIDs(t, r.TryPush, 4, 5, 6)
	if n, err := r.TryPopBatch(bufs, lens[:2]); n != 2 || err != nil {
		t.Fatalf("pop batch with 2 lengths: %d, %v", n, err)
	}
	wantIDs(t, "popped", popIDs(t, bufs, lens, 2), 4, 5)
	if n, err := r.TryPopBatch(bufs[:0], lens); n != 0 || err != nil {
		t.Fatalf("pop batch of none: %d, %v", n, err)
	}
	c := r.Counters()
	if c.Popped != 5 || c.EmptyHits != 1 || c.Head != 5 {
		t.Fatalf("counters %+v", c)
	}
	wantIDs(t, "left", drain(t, r), 6)
}

// A message longer than its buffer stops the batch there: the ones before
// it are popped, it stays in the ring, and the error says so.
func TestRingBatchPopStopsAtAShortBuffer(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	for _, m := range [][]byte{[]byte("short"), []byte(strings.Repeat("long", 8)), []byte("tail")} {
		if err := r.TryPush(m); err != nil {
			t.Fatal(err)
		}
	}
	bufs := [][]byte{make([]byte, 16), make([]byte, 16), make([]byte, 16)}
	lens := make([]int, 3)
	n, err := r.TryPopBatch(bufs, lens)
	if n != 1 || !errors.Is(err, ErrShortBuffer) || string(bufs[0][:lens[0]]) != "short" {
		t.Fatalf("pop batch with a short second buffer: %d, %v, %q", n, err, bufs[0][:lens[0]])
	}
	bufs[0] = make([]byte, 64)
	if n, err := r.TryPopBatch(bufs, lens); n != 2 || err != nil || string(bufs[0][:lens[0]]) != strings.Repeat("long", 8) || string(bufs[1][:lens[1]]) != "tail" {
		t.Fatalf("pop batch after it: %d, %v", n, err)
	}
}

// A held lease in the way splits a push batch in two runs: the first is
// pushed up to the lease, the second burns past it (as a single push does)
// and goes on at the positions after it; the batch keeps its order and is
// counted once.
func TestRingBatchSplitByAHeldLeaseKeepsOrder(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	pushIDs(t, r.TryPush, seq(1, 8)...)
	buf := make([]byte, 64)
	for range 2 {
		if _, err := r.TryPop(buf); err != nil {
			t.Fatal(err)
		}
	}
	held, err := r.TryClaim() // position 2, slot 2
	if err != nil {
		t.Fatal(err)
	}
	drain(t, r) // positions 3..7: head and tail at 8
	before := r.Counters()
	// Positions 8 and 9 (slots 0, 1), the lease at 10 (slot 2) burned,
	// then 11..13 (slots 3..5).
	if n, err := r.TryPushBatch(idBatch(20, 21, 22, 23, 24)); n != 5 || err != nil {
		t.Fatalf("batch around a held lease: %d, %v", n, err)
	}
	c := r.Counters()
	if c.Burned != before.Burned+1 || c.Pushed != before.Pushed+5 || c.Tail != 14 {
		t.Fatalf("counters %+v (before %+v)", c, before)
	}
	bufs, lens := popBufs(r, 8)
	n, err := r.TryPopBatch(bufs, lens)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "popped", popIDs(t, bufs, lens, n), 20, 21, 22, 23, 24)
	if err := r.Ack(held); err != nil {
		t.Fatalf("the lease burned past is lost: %v", err)
	}
}

func TestRingBatchClaimAndAck(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	pushIDs(t, r.TryPush, 1, 2, 3, 4, 5)
	leases := make([]Lease, 8)
	n, err := r.TryClaimBatch(leases)
	if n != 5 || err != nil {
		t.Fatalf("claim batch: %d, %v", n, err)
	}
	for i, l := range leases[:n] {
		id, err := decodeMsg(l.Data())
		if err != nil || id != uint64(i+1) || l.Deliveries != 1 || l.Slot() != uint64(i) {
			t.Fatalf("lease %d: id %d (%v), %d deliveries, slot %d", i, id, err, l.Deliveries, l.Slot())
		}
	}
	if n, err := r.TryClaimBatch(leases[n:]); n != 0 || err != ErrEmpty {
		t.Fatalf("claim batch on an empty ring: %d, %v", n, err)
	}
	// A lease acked already does not stop the others; the error names it.
	if err := r.Ack(leases[1]); err != nil {
		t.Fatal(err)
	}
	err = r.AckBatch(leases[:n])
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "lease 1 of the batch; 1 of its 5") {
		t.Fatalf("ack batch with a lease acked before: %v", err)
	}
	c := r.Counters()
	if c.Claimed != 5 || c.Acked != 5 || c.Depth() != 0 {
		t.Fatalf("counters %+v", c)
	}
	if s := r.Scan(); len(s.Slots) != 0 {
		t.Fatalf("slots left after the acks: %+v", s.Slots)
	}
	if err := r.AckBatch(nil); err != nil {
		t.Fatalf("ack batch of none: %v", err)
	}
}

// A message at the delivery limit ends a claim batch's run; the next run
// sets it aside as poison, as TryClaim does, and claims on past it.
func TestRingBatchClaimSetsPoisonAside(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8, DeliveryLimit: 1})
	pushIDs(t, r.TryPush, 1)
	l, err := r.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	pushIDs(t, r.TryPush, 2)
	if err := r.Release(l); err != nil { // 1 again, after 2, delivered once: poison
		t.Fatal(err)
	}
	pushIDs(t, r.TryPush, 3)
	leases := make([]Lease, 4)
	n, err := r.TryClaimBatch(leases)
	if n != 2 || err != nil {
		t.Fatalf("claim batch past poison: %d, %v", n, err)
	}
	var got []uint64
	for _, l := range leases[:n] {
		id, _ := decodeMsg(l.Data())
		got = append(got, id)
	}
	wantIDs(t, "claimed", got, 2, 3)
	if c := r.Counters(); c.Poisoned != 1 || c.Claimed != 3 {
		t.Fatalf("counters %+v", c)
	}
	if err := r.AckBatch(leases[:n]); err != nil {
		t.Fatal(err)
	}
}

// The blocking calls return as soon as one is done, and with nothing done
// only when their context ends.
func TestRingBatchBlockingCallsReturnOnceOneIsDone(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	bufs, lens := popBufs(r, 4)
	leases := make([]Lease, 4)
	short, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if n, err := r.PopBatch(short, bufs, lens); n != 0 || err != context.DeadlineExceeded {
		t.Fatalf("pop batch on an empty ring: %d, %v", n, err)
	}
	if n, err := r.ClaimBatch(short, leases); n != 0 || err != context.DeadlineExceeded {
		t.Fatalf("claim batch on an empty ring: %d, %v", n, err)
	}
	pushIDs(t, r.TryPush, 1, 2, 3, 4)
	if n, err := r.PushBatch(short, idBatch(5, 6)); n != 0 || err != context.DeadlineExceeded {
		t.Fatalf("push batch on a full ring: %d, %v", n, err)
	}
	// Zero-length batches return at once, whatever the ring holds.
	if n, err := r.PushBatch(short, nil); n != 0 || err != nil {
		t.Fatalf("empty push batch: %d, %v", n, err)
	}
	drain(t, r)
	if n, err := r.PopBatch(short, nil, nil); n != 0 || err != nil {
		t.Fatalf("empty pop batch: %d, %v", n, err)
	}

	ctx, cancelLong := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelLong()
	type result struct {
		n   int
		err error
	}
	// One message arrives: the waiting batch returns it, not waiting for
	// three more.
	for _, call := range []struct {
		name string
		run  func() (int, error)
	}{
		{"PopBatch", func() (int, error) { return r.PopBatch(ctx, bufs, lens) }},
		{"ClaimBatch", func() (int, error) { return r.ClaimBatch(ctx, leases) }},
	} {
		done := make(chan result, 1)
		go func() {
			n, err := call.run()
			done <- result{n, err}
		}()
		pushIDs(t, r.TryPush, 7)
		res := <-done
		if res.n != 1 || res.err != nil {
			t.Fatalf("%s woken by one message: %d, %v", call.name, res.n, res.err)
		}
		if call.name == "ClaimBatch" {
			if err := r.AckBatch(leases[:1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One slot frees up on a full ring: the waiting push batch pushes one.
	pushIDs(t, r.TryPush, 1, 2, 3, 4)
	done := make(chan result, 1)
	go func() {
		n, err := r.PushBatch(ctx, idBatch(5, 6, 7))
		done <- result{n, err}
	}()
	buf := make([]byte, 64)
	if _, err := r.TryPop(buf); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.n != 1 || res.err != nil {
		t.Fatalf("PushBatch given room for one: %d, %v", res.n, res.err)
	}
	wantIDs(t, "after the push batch", drain(t, r), 2, 3, 4, 5)

	// Cancelled while waiting: nothing done, the context's error.
	cctx, cancelNow := context.WithCancel(context.Background())
	go func() {
		n, err := r.PopBatch(cctx, bufs, lens)
		done <- result{n, err}
	}()
	cancelNow()
	if res := <-done; res.n != 0 || res.err != context.Canceled {
		t.Fatalf("PopBatch cancelled: %d, %v", res.n, res.err)
	}
}

// Goroutines pushing and popping in batches (and singly) through one
// handle and through several deliver every message exactly once: the
// handle's goroutines share its owner stamp, so nothing may tell their
// positions apart by the stamp alone.
func TestRingBatchesAcrossGoroutinesDeliverExactlyOnce(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared_handle=%v", shared), func(t *testing.T) {
			r := newRing(t, RingConfig{Capacity: 16})
			handle := func() *Ring {
				if shared {
					return r
				}
				o, err := OpenRing(r.Path())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { o.Close() })
				return o
			}
			const producers, consumers, each = 3, 3, 2000
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, producers+consumers)
			for p := range producers {
				h := handle()
				wg.Add(1)
				go func() {
					defer wg.Done()
					next := uint64(0)
					for next < each {
						size := 1 + int(next*7+uint64(p))%9
						batch := make([][]byte, 0, size)
						for j := uint64(0); j < uint64(size) && next+j < each; j++ {
							batch = append(batch, encodeMsg(uint64(p)<<32|(next+j)))
						}
						var n int
						var err error
						if next%3 == 0 {
							err = h.Push(ctx, batch[0])
							n = 1
						} else {
							n, err = h.PushBatch(ctx, batch)
						}
						if err != nil {
							errs <- err
							return
						}
						next += uint64(n)
					}
				}()
			}
			seen := make([][]uint64, consumers)
			var delivered atomic.Int64
			allDone := make(chan struct{})
			var consumersDone sync.WaitGroup
			for c := range consumers {
				h := handle()
				consumersDone.Add(1)
				go func() {
					defer consumersDone.Done()
					bufs, lens := popBufs(h, 8)
					leases := make([]Lease, 8)
					for i := 0; ; i++ {
						var got []uint64
						switch i % 3 {
						case 0:
							n, err := h.PopBatch(ctx, bufs, lens)
							if err != nil {
								errs <- err
								return
							}
							for j := range n {
								id, err := decodeMsg(bufs[j][:lens[j]])
								if err != nil {
									errs <- err
									return
								}
								got = append(got, id)
							}
						case 1:
							n, err := h.ClaimBatch(ctx, leases)
							if err != nil {
								errs <- err
								return
							}
							for _, l := range leases[:n] {
								id, err := decodeMsg(l.Data())
								if err != nil {
									errs <- err
									return
								}
								got = append(got, id)
							}
							if err := h.AckBatch(leases[:n]); err != nil {
								errs <- err
								return
							}
						default:
							n, err := h.Pop(ctx, bufs[0])
							if err != nil {
								errs <- err
								return
							}
							id, err := decodeMsg(bufs[0][:n])
							if err != nil {
								errs <- err
								return
							}
							got = append(got, id)
						}
						seen[c] = append(seen[c], got...)
						if delivered.Add(int64(len(got))) == producers*each {
							close(allDone)
						}
					}
				}()
			}
			var failed error
			select {
			case <-allDone:
			case failed = <-errs:
			}
			cancel() // the consumers return with the context's error
			wg.Wait()
			consumersDone.Wait()
			if failed != nil {
				t.Fatal(failed)
			}
			count := map[uint64]int{}
			for _, ids := range seen {
				for _, id := range ids {
					count[id]++
				}
			}
			for p := range uint64(producers) {
				for s := range uint64(each) {
					if n := count[p<<32|s]; n != 1 {
						t.Fatalf("message %d/%d delivered %d times", p, s, n)
					}
				}
			}
		})
	}
}
