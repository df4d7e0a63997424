package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
)

// Several producer and consumer processes on one ring, each mixing batch
// calls (TryPushBatch, PushBatch, TryPopBatch, PopBatch, TryClaimBatch,
// ClaimBatch, AckBatch) with single ones (TryPush, Push, TryPop, Pop,
// Claim, Ack), at random batch sizes on a small ring (so batches wrap,
// split in runs and meet full and empty rings): every message is delivered
// exactly once, its content intact, and the counters add up.

// stressMsg is message id: its id, bytes derived from it, a checksum;
// 12 to 56 bytes long, so lengths vary from slot to slot.
func stressMsg(id uint64) []byte {
	n := 12 + int((id*2654435761)>>7%45)
	b := make([]byte, n)
	binary.LittleEndian.PutUint64(b, id)
	for i := 8; i < n-4; i++ {
		b[i] = byte(id>>(uint(i)%8*8)) ^ byte(i*131)
	}
	binary.LittleEndian.PutUint32(b[n-4:], crc32.ChecksumIEEE(b[:n-4]))
	return b
}

func stressDecode(b []byte) (uint64, error) {
	if len(b) < 12 {
		return 0, fmt.Errorf("message of %d bytes", len(b))
	}
	id := binary.LittleEndian.Uint64(b)
	if !bytes.Equal(b, stressMsg(id)) {
		return 0, fmt.Errorf("corrupt message % x", b)
	}
	return id, nil
}

// stressProduce pushes ids PRODUCER<<32 | 0..COUNT-1 in random batches by
// random calls, and prints how often it used each ("op-NAME N").
func stressProduce(ctx context.Context, r *Ring) error {
	rng := proctest.ChildRand()
	p, count := proctest.EnvUint64("PRODUCER"), proctest.EnvUint64("COUNT")
	ops := map[string]int{}
	for next := uint64(0); next < count; {
		size := min(uint64(1+rng.IntN(32)), count-next)
		msgs := make([][]byte, size)
		for j := range msgs {
			msgs[j] = stressMsg(p<<32 | (next + uint64(j)))
		}
		var n int
		var err error
		switch op := rng.IntN(4); op {
		case 0:
			ops["trypushbatch"]++
			if n, err = r.TryPushBatch(msgs); err == ErrFull {
				n, err = r.PushBatch(ctx, msgs)
			}
		case 1:
			ops["pushbatch"]++
			n, err = r.PushBatch(ctx, msgs)
		case 2:
			ops["push"]++
			n, err = 1, r.Push(ctx, msgs[0])
		default:
			ops["trypush"]++
			if err = r.TryPush(msgs[0]); err == ErrFull {
				err = r.Push(ctx, msgs[0])
			}
			n = 1
		}
		if err != nil {
			return err
		}
		next += uint64(n)
	}
	for name, n := range ops {
		fmt.Printf("op-%s %d\n", name, n)
	}
	return r.Close()
}

// stressConsume takes messages by random calls until the file STOP exists
// and the ring is empty, and prints "got ID" for each (buffered: these
// children are never killed) and how often it used each call.
func stressConsume(ctx context.Context, r *Ring) error {
	rng := proctest.ChildRand()
	stop := os.Getenv("STOP")
	out := bufio.NewWriter(os.Stdout)
	ops := map[string]int{}
	bufs, lens := popBufs(r, 32)
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
		switch op := rng.IntN(7); op {
		case 0, 1:
			name := map[int]string{0: "trypopbatch", 1: "popbatch"}[op]
			ops[name]++
			if op == 0 {
				n, err = r.TryPopBatch(bufs[:size], lens)
			} else {
				n, err = r.PopBatch(wait, bufs[:size], lens)
			}
			for j := range n {
				if e := got(bufs[j][:lens[j]]); e != nil {
					cancel()
					return e
				}
			}
		case 2, 3:
			name := map[int]string{2: "tryclaimbatch", 3: "claimbatch"}[op]
			ops[name]++
			if op == 2 {
				n, err = r.TryClaimBatch(leases[:size])
			} else {
				n, err = r.ClaimBatch(wait, leases[:size])
			}
			for _, l := range leases[:n] {
				if e := got(l.Data()); e != nil {
					cancel()
					return e
				}
			}
			if n > 0 {
				if e := r.AckBatch(leases[:n]); e != nil {
					cancel()
					return e
				}
			}
		case 4:
			ops["pop"]++
			var k int
			if k, err = r.Pop(wait, bufs[0]); err == nil {
				n = 1
				if e := got(bufs[0][:k]); e != nil {
					cancel()
					return e
				}
			}
		case 5:
			ops["trypop"]++
			var k int
			if k, err = r.TryPop(bufs[0]); err == nil {
				n = 1
				if e := got(bufs[0][:k]); e != nil {
					cancel()
					return e
				}
			}
		default:
			ops["claim"]++
			var l Lease
			if l, err = r.Claim(wait); err == nil {
				n = 1
				if e := got(l.Data()); e != nil {
					cancel()
					return e
				}
				if e := r.Ack(l); e != nil {
					cancel()
					return e
				}
			}
		}
		cancel()
		switch {
		case err == nil:
		case err == ErrEmpty || errors.Is(err, context.DeadlineExceeded):
			// The parent creates STOP once every producer has exited:
			// an empty ring then stays empty.
			if n == 0 && proctest.Exists(stop) {
				if _, err := r.TryPop(bufs[0]); err != ErrEmpty {
					continue // one more came in between
				}
				for name, k := range ops {
					fmt.Fprintf(out, "op-%s %d\n", name, k)
				}
				if err := out.Flush(); err != nil {
					return err
				}
				return r.Close()
			}
		default:
			return err
		}
	}
}

func TestRingBatchesAcrossProcessesDeliverExactlyOnce(t *testing.T) {
	const producers, consumers = 3, 3
	count := 20000
	if proctest.RaceEnabled {
		count = 4000
	}
	rng := proctest.SeededRand(t, "RING_BATCH_STRESS_SEED")
	r := newRing(t, RingConfig{Capacity: 64, Participants: 8})
	stop := filepath.Join(t.TempDir(), "stop")
	var cons, prods []*proctest.Child
	for range consumers {
		cons = append(cons, ringBatchHelper.Start(t, "stress-consumer", proctest.PathArg(r.Path()), "STOP="+stop, proctest.ChildSeed(rng)))
	}
	for p := range producers {
		prods = append(prods, ringBatchHelper.Start(t, "stress-producer", proctest.PathArg(r.Path()),
			"PRODUCER="+strconv.Itoa(p), "COUNT="+strconv.Itoa(count), proctest.ChildSeed(rng)))
	}
	ops := map[string]uint64{}
	addOps := func(log proctest.Log) {
		for word, vs := range log {
			if name, ok := strings.CutPrefix(word, "op-"); ok {
				for _, v := range vs {
					ops[name] += v
				}
			}
		}
	}
	for _, c := range prods {
		c.MustSucceed(t)
		addOps(c.Log())
	}
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var delivered []uint64
	for _, c := range cons {
		c.MustSucceed(t)
		log := c.Log()
		delivered = append(delivered, log["got"]...)
		addOps(log)
	}
	want := map[uint64]int{}
	for p := range uint64(producers) {
		for s := range uint64(count) {
			want[p<<32|s] = 1
		}
	}
	exactly(t, delivered, want)
	for _, op := range []string{"trypushbatch", "pushbatch", "push", "trypush", "trypopbatch", "popbatch", "tryclaimbatch", "claimbatch", "pop", "trypop", "claim"} {
		if ops[op] == 0 {
			t.Errorf("no child used %s", op)
		}
	}
	total := uint64(producers * count)
	c := r.Counters()
	if c.Pushed != total || c.Popped+c.Acked != total || c.Claimed != c.Acked || c.Depth() != 0 {
		t.Errorf("counters %+v: want %d pushed, popped + acked, claimed = acked, depth 0", c, total)
	}
	if s := r.Scan(); s.Problems != 0 {
		t.Errorf("scan: %+v", s.Slots)
	}
	checkOnlySelfAttached(t, r.Peers())
	t.Logf("%d messages; calls: %v", total, ops)
}
