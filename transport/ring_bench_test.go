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
