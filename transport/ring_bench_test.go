package transport

import (
	"context"
	"runtime"
	"testing"
)

// The fast paths (TryPush, TryPop, TryClaim, Ack) allocate nothing: each is
// a few atomics on the mapping and a copy. The benchmarks report allocations
// to show it; TestFastPathZeroAllocs asserts it.

var benchMsg = make([]byte, 32)

func BenchmarkTryPushTryPop(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 1024})
	buf := make([]byte, r.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	for b.Loop() {
		if err := r.TryPush(benchMsg); err != nil {
			b.Fatal(err)
		}
		if _, err := r.TryPop(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRingLoanPublishPop is BenchmarkTryPushTryPop with the message
// written into a loan (TryLoan, copy into Data, Publish) instead of pushed:
// the same positions and the same pop; Publish's CAS where a push stores.
func BenchmarkRingLoanPublishPop(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 1024})
	buf := make([]byte, r.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	for b.Loop() {
		l, err := r.TryLoan(len(benchMsg))
		if err != nil {
			b.Fatal(err)
		}
		copy(l.Data(), benchMsg)
		if err := r.Publish(l); err != nil {
			b.Fatal(err)
		}
		if _, err := r.TryPop(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClaimAck(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 1024})
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	for b.Loop() {
		if err := r.TryPush(benchMsg); err != nil {
			b.Fatal(err)
		}
		l, err := r.TryClaim()
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Ack(l); err != nil {
			b.Fatal(err)
		}
	}
}

// The batch benchmarks move benchBatch messages per op and report ns/msg;
// the ...32Singles benchmarks move as many with single calls, the same way,
// for the comparison in one run:
//
//	go test ./transport -run XXX -bench 'Batch32|32Singles' -benchmem
const benchBatch = 32

func benchBatchMsgs() [][]byte {
	msgs := make([][]byte, benchBatch)
	for i := range msgs {
		msgs[i] = benchMsg
	}
	return msgs
}

func reportPerMsg(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/msg")
}

func BenchmarkRingPushPopBatch32(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 1024})
	msgs := benchBatchMsgs()
	bufs, lens := popBufs(r, benchBatch)
	b.ReportAllocs()
	b.SetBytes(int64(benchBatch * len(benchMsg)))
	for b.Loop() {
		if n, err := r.TryPushBatch(msgs); n != benchBatch || err != nil {
			b.Fatal(n, err)
		}
		if n, err := r.TryPopBatch(bufs, lens); n != benchBatch || err != nil {
			b.Fatal(n, err)
		}
	}
	reportPerMsg(b)
}

func BenchmarkRingPushPop32Singles(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 1024})
	buf := make([]byte, r.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(benchBatch * len(benchMsg)))
	for b.Loop() {
		for range benchBatch {
			if err := r.TryPush(benchMsg); err != nil {
				b.Fatal(err)
			}
		}
		for range benchBatch {
			if _, err := r.TryPop(buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportPerMsg(b)
}

func BenchmarkRingClaimAckBatch32(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 1024})
	msgs := benchBatchMsgs()
	leases := make([]Lease, benchBatch)
	b.ReportAllocs()
	b.SetBytes(int64(benchBatch * len(benchMsg)))
	for b.Loop() {
		if n, err := r.TryPushBatch(msgs); n != benchBatch || err != nil {
			b.Fatal(n, err)
		}
		if n, err := r.TryClaimBatch(leases); n != benchBatch || err != nil {
			b.Fatal(n, err)
		}
		if err := r.AckBatch(leases); err != nil {
			b.Fatal(err)
		}
	}
	reportPerMsg(b)
}

func BenchmarkRingClaimAck32Singles(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 1024})
	leases := make([]Lease, benchBatch)
	b.ReportAllocs()
	b.SetBytes(int64(benchBatch * len(benchMsg)))
	for b.Loop() {
		for range benchBatch {
			if err := r.TryPush(benchMsg); err != nil {
				b.Fatal(err)
			}
		}
		for i := range leases {
			l, err := r.TryClaim()
			if err != nil {
				b.Fatal(err)
			}
			leases[i] = l
		}
		for _, l := range leases {
			if err := r.Ack(l); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportPerMsg(b)
}

// benchCapacity is large enough that the untimed refills and drains of the
// one-sided benchmarks are rare.
const benchCapacity = 1 << 14

// BenchmarkTryPush times pushes alone: the ring is drained, untimed,
// whenever it is full.
func BenchmarkTryPush(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: benchCapacity})
	buf := make([]byte, r.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	b.ResetTimer()
	queued := 0
	for i := 0; i < b.N; i++ {
		if queued == benchCapacity {
			b.StopTimer()
			benchDrain(b, r, buf, queued)
			queued = 0
			b.StartTimer()
		}
		if err := r.TryPush(benchMsg); err != nil {
			b.Fatal(err)
		}
		queued++
	}
}

// BenchmarkTryPop times pops alone: the ring is refilled, untimed,
// whenever it is empty.
func BenchmarkTryPop(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: benchCapacity})
	buf := make([]byte, r.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	b.ResetTimer()
	queued := 0
	for i := 0; i < b.N; i++ {
		if queued == 0 {
			b.StopTimer()
			benchFill(b, r, benchCapacity)
			queued = benchCapacity
			b.StartTimer()
		}
		if _, err := r.TryPop(buf); err != nil {
			b.Fatal(err)
		}
		queued--
	}
}

// BenchmarkPushPopParallel: every goroutine pushes and then pops on one
// shared ring. A pop may briefly find the head slot still being written by
// another goroutine (ErrEmpty) and retries.
func BenchmarkPushPopParallel(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 1024})
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, r.MaxPayload())
		for pb.Next() {
			for {
				err := r.TryPush(benchMsg)
				if err == nil {
					break
				}
				if err != ErrFull {
					b.Error(err)
					return
				}
				runtime.Gosched()
			}
			for {
				_, err := r.TryPop(buf)
				if err == nil {
					break
				}
				if err != ErrEmpty {
					b.Error(err)
					return
				}
				runtime.Gosched()
			}
		}
	})
}

func BenchmarkNextID(b *testing.B) {
	r := newRing(b, RingConfig{Capacity: 2})
	b.ReportAllocs()
	var last uint64
	for b.Loop() {
		last = r.NextID()
	}
	if last == 0 {
		b.Fatal("NextID returned 0")
	}
}

func benchFill(tb testing.TB, r *Ring, n int) {
	for i := 0; i < n; i++ {
		if err := r.TryPush(benchMsg); err != nil {
			tb.Fatal(err)
		}
	}
}

func benchDrain(tb testing.TB, r *Ring, buf []byte, n int) {
	for i := 0; i < n; i++ {
		if _, err := r.TryPop(buf); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestFastPathZeroAllocs asserts that the uncontended fast paths allocate
// nothing per call.
func TestFastPathZeroAllocs(t *testing.T) {
	const runs = 1000
	r := newRing(t, RingConfig{Capacity: 2048})
	buf := make([]byte, r.MaxPayload())
	expect := func(name string, f func()) {
		t.Helper()
		if n := testing.AllocsPerRun(runs, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
	// AllocsPerRun calls f runs+1 times (one warm-up).
	expect("TryPush", func() {
		if err := r.TryPush(benchMsg); err != nil {
			t.Fatal(err)
		}
	})
	expect("TryPop", func() {
		if n, err := r.TryPop(buf); err != nil || n != len(benchMsg) {
			t.Fatal(n, err)
		}
	})
	benchFill(t, r, runs+1)
	leases := make([]Lease, 0, runs+1)
	expect("TryClaim", func() {
		l, err := r.TryClaim()
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l) // within capacity: no allocation
	})
	next := 0
	expect("Ack", func() {
		if err := r.Ack(leases[next]); err != nil {
			t.Fatal(err)
		}
		next++
	})
	if c := r.Counters(); c.Depth() != 0 || c.Claimed != runs+1 || c.Acked != runs+1 {
		t.Fatalf("counters after the runs: %+v", c)
	}
	expect("TryLoan+Publish+TryPop", func() {
		l, err := r.TryLoan(len(benchMsg))
		if err != nil {
			t.Fatal(err)
		}
		copy(l.Data(), benchMsg)
		if err := r.Publish(l); err != nil {
			t.Fatal(err)
		}
		if _, err := r.TryPop(buf); err != nil {
			t.Fatal(err)
		}
	})
	expect("TryLoan+PublishN", func() {
		l, err := r.TryLoan(r.MaxPayload())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.PublishN(l, len(benchMsg)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.TryPop(buf); err != nil {
			t.Fatal(err)
		}
	})
	expect("TryLoan+Abort", func() {
		l, err := r.TryLoan(len(benchMsg))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Abort(l); err != nil {
			t.Fatal(err)
		}
	})
}

// TestBlockingFastPathZeroAllocs: a blocking call that does not have to
// wait allocates nothing either.
func TestBlockingFastPathZeroAllocs(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 64})
	ctx := context.Background()
	msg := make([]byte, 32)
	buf := make([]byte, 64)
	if a := testing.AllocsPerRun(1000, func() {
		if err := r.Push(ctx, msg); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Pop(ctx, buf); err != nil {
			t.Fatal(err)
		}
		r.Push(ctx, msg)
		l, _ := r.Claim(ctx)
		r.Ack(l)
		lo, err := r.Loan(ctx, len(msg))
		if err != nil {
			t.Fatal(err)
		}
		r.Publish(lo)
		r.Pop(ctx, buf)
	}); a != 0 {
		t.Fatalf("%v allocations per blocking push/pop/claim/ack/loan", a)
	}
}

// TestBatchFastPathsZeroAllocs: the batch calls allocate nothing either,
// blocking ones that do not have to wait included.
func TestBatchFastPathsZeroAllocs(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 256})
	ctx := context.Background()
	msgs := benchBatchMsgs()
	bufs, lens := popBufs(r, benchBatch)
	leases := make([]Lease, benchBatch)
	if a := testing.AllocsPerRun(200, func() {
		if n, err := r.TryPushBatch(msgs); n != benchBatch || err != nil {
			t.Fatal(n, err)
		}
		if n, err := r.TryPopBatch(bufs, lens); n != benchBatch || err != nil {
			t.Fatal(n, err)
		}
		if n, err := r.PushBatch(ctx, msgs); n != benchBatch || err != nil {
			t.Fatal(n, err)
		}
		if n, err := r.PopBatch(ctx, bufs, lens); n != benchBatch || err != nil {
			t.Fatal(n, err)
		}
		r.TryPushBatch(msgs)
		if n, err := r.TryClaimBatch(leases); n != benchBatch || err != nil {
			t.Fatal(n, err)
		}
		if err := r.AckBatch(leases); err != nil {
			t.Fatal(err)
		}
		r.TryPushBatch(msgs)
		if n, err := r.ClaimBatch(ctx, leases); n != benchBatch || err != nil {
			t.Fatal(n, err)
		}
		if err := r.AckBatch(leases); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("%v allocations per round of batch calls", a)
	}
	if c := r.Counters(); c.Depth() != 0 {
		t.Fatalf("counters after the runs: %+v", c)
	}
}
