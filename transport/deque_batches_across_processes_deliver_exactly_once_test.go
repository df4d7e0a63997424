package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
)

// An owner process pushing by random batch and single calls (and popping
// some of its work back, in batches and singly) and thief processes
// taking by every batch and single call (TryPopBatch, PopBatch,
// TryStealBatch, StealBatch, TryClaimBatch, ClaimBatch with AckBatch,
// TryPop, Steal, Claim with Ack), at random batch sizes on a small deque
// (so batches wrap, split in runs, and meet a full and an empty deque and
// each other at the last message): every message is delivered exactly
// once, its content intact, and the counters add up.

// dequeStressOwner adopts, pushes ids 0..COUNT-1 in random batches by
// random calls, pops some back now and then (printing "got ID"), and
// prints how often it used each call ("op-NAME N").
func dequeStressOwner(ctx context.Context, d *Deque) error {
	if _, err := d.Adopt(); err != nil {
		return err
	}
	rng := proctest.ChildRand()
	count := proctest.EnvUint64("COUNT")
	out := bufio.NewWriter(os.Stdout)
	ops := map[string]int{}
	bufs, lens := dequeBufs(d, 8)
	for next := uint64(0); next < count; {
		size := min(uint64(1+rng.IntN(32)), count-next)
		msgs := make([][]byte, size)
		for j := range msgs {
			msgs[j] = stressMsg(next + uint64(j))
		}
		var n int
		var err error
		switch op := rng.IntN(4); op {
		case 0:
			ops["trypushbatch"]++
			if n, err = d.TryPushBatch(msgs); err == ErrFull {
				n, err = d.PushBatch(ctx, msgs)
			}
		case 1:
			ops["pushbatch"]++
			n, err = d.PushBatch(ctx, msgs)
		case 2:
			ops["push"]++
			n, err = 1, d.Push(ctx, msgs[0])
		default:
			ops["trypush"]++
			if err = d.TryPush(msgs[0]); err == ErrFull {
				err = d.Push(ctx, msgs[0])
			}
			n = 1
		}
		if err != nil {
			return err
		}
		next += uint64(n)
		if rng.IntN(5) == 0 { // the owner keeps some of its work
			var k int
			if rng.IntN(2) == 0 {
				ops["owner-popbatch"]++
				k, err = d.TryPopBatch(bufs[:1+rng.IntN(len(bufs))], lens)
			} else {
				ops["owner-pop"]++
				if lens[0], err = d.TryPop(bufs[0]); err == nil {
					k = 1
				}
			}
			if err != nil && err != ErrEmpty {
				return err
			}
			for j := range k {
				id, err := stressDecode(bufs[j][:lens[j]])
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "got %d\n", id)
			}
		}
	}
	for name, n := range ops {
		fmt.Fprintf(out, "op-%s %d\n", name, n)
	}
	if err := out.Flush(); err != nil {
		return err
	}
	return d.Close()
}

// dequeStressThief takes messages by random calls until the file STOP
// exists and the deque is empty, and prints "got ID" for each (buffered:
// these children are never killed) and how often it used each call.
func dequeStressThief(ctx context.Context, d *Deque) error {
	rng := proctest.ChildRand()
	stop := os.Getenv("STOP")
	out := bufio.NewWriter(os.Stdout)
	ops := map[string]int{}
	bufs, lens := dequeBufs(d, 32)
	leases := make([]Lease, 32)
	got := func(b []byte) error {
		id, err := stressDecode(b)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "got %d\n", id)
		return nil
	}
	for {
		size := 1 + rng.IntN(32)
		wait, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		var n int
		var err error
		switch op := rng.IntN(9); op {
		case 0, 1, 2, 3:
			name := [...]string{"trypopbatch", "popbatch", "trystealbatch", "stealbatch"}[op]
			ops[name]++
			switch op {
			case 0:
				n, err = d.TryPopBatch(bufs[:size], lens)
			case 1:
				n, err = d.PopBatch(wait, bufs[:size], lens)
			case 2:
				n, err = d.TryStealBatch(bufs[:size], lens)
			default:
				n, err = d.StealBatch(wait, bufs[:size], lens)
			}
			for j := range n {
				if e := got(bufs[j][:lens[j]]); e != nil {
					cancel()
					return e
				}
			}
		case 4, 5:
			name := map[int]string{4: "tryclaimbatch", 5: "claimbatch"}[op]
			ops[name]++
			if op == 4 {
				n, err = d.TryClaimBatch(leases[:size])
			} else {
				n, err = d.ClaimBatch(wait, leases[:size])
			}
			for _, l := range leases[:n] {
				if e := got(l.Data()); e != nil {
					cancel()
					return e
				}
			}
			if n > 0 {
				if e := d.AckBatch(leases[:n]); e != nil {
					cancel()
					return e
				}
			}
		case 6:
			ops["steal"]++
			var k int
			if k, err = d.Steal(wait, bufs[0]); err == nil {
				n = 1
				if e := got(bufs[0][:k]); e != nil {
					cancel()
					return e
				}
			}
		case 7:
			ops["trypop"]++
			var k int
			if k, err = d.TryPop(bufs[0]); err == nil {
				n = 1
				if e := got(bufs[0][:k]); e != nil {
					cancel()
					return e
				}
			}
		default:
			ops["claim"]++
			var l Lease
			if l, err = d.Claim(wait); err == nil {
				n = 1
				if e := got(l.Data()); e != nil {
					cancel()
					return e
				}
				if e := d.Ack(l); e != nil {
					cancel()
					return e
				}
			}
		}
		cancel()
		switch {
		case err == nil:
		case err == ErrEmpty || errors.Is(err, context.DeadlineExceeded):
			// The parent creates STOP once the owner has exited: an
			// empty deque then stays empty.
			if n == 0 && proctest.Exists(stop) {
				if _, err := d.TryPop(bufs[0]); err != ErrEmpty {
					continue // one more came in between
				}
				for name, k := range ops {
					fmt.Fprintf(out, "op-%s %d\n", name, k)
				}
				if err := out.Flush(); err != nil {
					return err
				}
				return d.Close()
			}
		default:
			return err
		}
	}
}

func TestDequeBatchesAcrossProcessesDeliverExactlyOnce(t *testing.T) {
	const thieves = 3
	count := 30000
	if proctest.RaceEnabled {
		count = 6000
	}
	rng := proctest.SeededRand(t, "DEQUE_BATCH_STRESS_SEED")
	d := newDeque(t, DequeConfig{Capacity: 64, Participants: 8})
	if err := d.Disown(); err != nil { // the owner is a child
		t.Fatal(err)
	}
	stop := filepath.Join(t.TempDir(), "stop")
	var ths []*proctest.Child
	for range thieves {
		ths = append(ths, dequeBatchHelper.Start(t, "stress-thief", proctest.PathArg(d.Path()), "STOP="+stop, proctest.ChildSeed(rng)))
	}
	owner := dequeBatchHelper.Start(t, "stress-owner", proctest.PathArg(d.Path()), "COUNT="+strconv.Itoa(count), proctest.ChildSeed(rng))
	ops := map[string]uint64{}
	var delivered []uint64
	add := func(log proctest.Log) {
		delivered = append(delivered, log["got"]...)
		for word, vs := range log {
			if name, ok := strings.CutPrefix(word, "op-"); ok {
				for _, v := range vs {
					ops[name] += v
				}
			}
		}
	}
	owner.MustSucceed(t)
	add(owner.Log())
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range ths {
		c.MustSucceed(t)
		add(c.Log())
	}
	want := map[uint64]int{}
	for id := range uint64(count) {
		want[id] = 1
	}
	exactly(t, delivered, want)
	for _, op := range []string{"trypushbatch", "pushbatch", "push", "trypush", "owner-popbatch", "owner-pop",
		"trypopbatch", "popbatch", "trystealbatch", "stealbatch", "tryclaimbatch", "claimbatch", "steal", "trypop", "claim"} {
		if ops[op] == 0 {
			t.Errorf("no child used %s", op)
		}
	}
	c := d.Counters()
	if total := uint64(count); c.Pushed != total || c.OwnerPopped+c.Stolen+c.Acked != total || c.Claimed != c.Acked || d.Len() != 0 {
		t.Errorf("counters %+v: want %d pushed = owner-popped + stolen + acked, claimed = acked, nothing left", c, total)
	}
	if s := d.Scan(); s.Problems != 0 || len(s.Slots) != 0 {
		t.Errorf("scan: %+v", s.Slots)
	}
	checkOnlySelfAttached(t, d.Peers())
	t.Logf("%d messages; calls: %v", count, ops)
}

// Goroutines of the owner's handle pushing and popping in batches and
// singly (and stealing from its own top), beside thieves' handles taking
// by every batch call, deliver every message exactly once: the owner's
// goroutines share its stamp, so the owner's pops and its own steals are
// told apart by the slot state alone (READING at the bottom, LEASED at
// the top). Run with -race: the owner's batch state (topSeen) is only
// touched under its mutex.
func TestDequeBatchesAcrossGoroutinesDeliverExactlyOnce(t *testing.T) {
	const each = 3000
	d := newDeque(t, DequeConfig{Capacity: 32})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var delivered, pushedCount atomic.Int64
	seen := make(chan []uint64, 16)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	take := func(h *Deque, kind int) {
		defer wg.Done()
		bufs, lens := dequeBufs(h, 8)
		leases := make([]Lease, 8)
		var mine []uint64
		defer func() { seen <- mine }()
		for i := 0; ; i++ {
			if pushedCount.Load() == 2*each && delivered.Load() == 2*each {
				return
			}
			wait, cancelWait := context.WithTimeout(ctx, 5*time.Millisecond)
			var n int
			var err error
			switch (i + kind) % 3 {
			case 0:
				n, err = h.PopBatch(wait, bufs, lens)
			case 1:
				n, err = h.StealBatch(wait, bufs, lens)
			default:
				if n, err = h.ClaimBatch(wait, leases); err == nil {
					for j, l := range leases[:n] {
						lens[j] = copy(bufs[j], l.Data())
					}
					err = h.AckBatch(leases[:n])
				}
			}
			cancelWait()
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				continue
			}
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
				mine = append(mine, id)
			}
			delivered.Add(int64(n))
		}
	}
	for g := range 2 { // the owner's pushing goroutines
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := uint64(0); next < each; {
				size := min(1+int(next*7+uint64(g))%9, each-int(next))
				ids := seq(uint64(g)<<32|next, uint64(size))
				var n int
				var err error
				if next%4 == 0 {
					n, err = 1, d.Push(ctx, encodeMsg(ids[0]))
				} else {
					n, err = d.PushBatch(ctx, idBatch(ids...))
				}
				if err != nil {
					errs <- err
					return
				}
				next += uint64(n)
				pushedCount.Add(int64(n))
			}
		}()
	}
	wg.Add(3)
	go take(d, 0) // the owner's own pops and steals
	go take(openThief(t, d), 1)
	go take(openThief(t, d), 2)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		cancel()
		<-done
		t.Fatal(err)
	}
	close(seen)
	var all []uint64
	for ids := range seen {
		all = append(all, ids...)
	}
	exactly(t, all, once(seq(0, each), seq(1<<32, each)))
}
