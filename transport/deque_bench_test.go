package transport

import (
	"context"
	"testing"
)

// The deque's fast paths allocate nothing either: the benchmarks report it
// and TestDequeZeroAllocs asserts it.

func BenchmarkDequePushPop(b *testing.B) {
	d := newDeque(b, DequeConfig{Capacity: 1024})
	buf := make([]byte, d.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	for b.Loop() {
		if err := d.TryPush(benchMsg); err != nil {
			b.Fatal(err)
		}
		if _, err := d.TryPop(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDequePushSteal(b *testing.B) {
	d := newDeque(b, DequeConfig{Capacity: 1024})
	th := openThief(b, d)
	buf := make([]byte, d.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	for b.Loop() {
		if err := d.TryPush(benchMsg); err != nil {
			b.Fatal(err)
		}
		if _, err := th.TryPop(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDequeClaimAck(b *testing.B) {
	d := newDeque(b, DequeConfig{Capacity: 1024})
	th := openThief(b, d)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMsg)))
	for b.Loop() {
		if err := d.TryPush(benchMsg); err != nil {
			b.Fatal(err)
		}
		l, err := th.TryClaim()
		if err != nil {
			b.Fatal(err)
		}
		if err := th.Ack(l); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDequeStealContended: the owner pushes while GOMAXPROCS thieves
// steal in parallel.
func BenchmarkDequeStealContended(b *testing.B) {
	d := newDeque(b, DequeConfig{Capacity: 1024})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			d.TryPush(benchMsg)
		}
	}()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		th, err := OpenDeque(d.Path())
		if err != nil {
			b.Error(err)
			return
		}
		defer th.Close()
		buf := make([]byte, th.MaxPayload())
		for pb.Next() {
			for {
				if _, err := th.TryPop(buf); err == nil {
					break
				}
			}
		}
	})
	close(stop)
	<-done
}

func TestDequeZeroAllocs(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 64})
	th := openThief(t, d)
	ctx := context.Background()
	msg := make([]byte, 32)
	buf := make([]byte, 64)
	for name, f := range map[string]func(){
		"TryPush+TryPop": func() { d.TryPush(msg); d.TryPop(buf) },
		"TryPush+steal":  func() { d.TryPush(msg); th.TryPop(buf) },
		"TryClaim+Ack": func() {
			d.TryPush(msg)
			l, _ := th.TryClaim()
			th.Ack(l)
		},
		"Push+Pop+Steal+Claim": func() {
			d.Push(ctx, msg)
			d.Pop(ctx, buf)
			d.Push(ctx, msg)
			th.Steal(ctx, buf)
			d.Push(ctx, msg)
			l, _ := th.Claim(ctx)
			th.Ack(l)
		},
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %v allocations", name, a)
		}
	}
	if d.Len() != 0 {
		t.Fatalf("Len %d after balanced runs", d.Len())
	}
}

// The deque's batch benchmarks move benchBatch messages per op and report
// ns/msg; the ...32Singles ones move as many with single calls, the same
// way, for the comparison in one run:
//
//	go test ./transport -run XXX -bench 'Deque.*(Batch32|32Singles)' -benchmem

// BenchmarkDequePushPopBatch32: the owner pushes a batch and pops it back
// (newest first), all at the bottom.
func BenchmarkDequePushPopBatch32(b *testing.B) {
	d := newDeque(b, DequeConfig{Capacity: 1024})
	msgs := benchBatchMsgs()
	bufs, lens := dequeBufs(d, benchBatch)
	b.ReportAllocs()
	b.SetBytes(int64(benchBatch * len(benchMsg)))
	for b.Loop() {
		if n, err := d.TryPushBatch(msgs); n != benchBatch || err != nil {
			b.Fatal(n, err)
		}
		if n, err := d.TryPopBatch(bufs, lens); n != benchBatch || err != nil {
			b.Fatal(n, err)
		}
	}
	reportPerMsg(b)
}

func BenchmarkDequePushPop32Singles(b *testing.B) {
	d := newDeque(b, DequeConfig{Capacity: 1024})
	buf := make([]byte, d.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(benchBatch * len(benchMsg)))
	for b.Loop() {
		for range benchBatch {
			if err := d.TryPush(benchMsg); err != nil {
				b.Fatal(err)
			}
		}
		for range benchBatch {
			if _, err := d.TryPop(buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportPerMsg(b)
}

// BenchmarkDequePushStealBatch32: the owner pushes a batch, a thief's
// handle pops it (oldest first, from the top, one top step a message).
func BenchmarkDequePushStealBatch32(b *testing.B) {
	d := newDeque(b, DequeConfig{Capacity: 1024})
	th := openThief(b, d)
	msgs := benchBatchMsgs()
	bufs, lens := dequeBufs(d, benchBatch)
	b.ReportAllocs()
	b.SetBytes(int64(benchBatch * len(benchMsg)))
	for b.Loop() {
		if n, err := d.TryPushBatch(msgs); n != benchBatch || err != nil {
			b.Fatal(n, err)
		}
		if n, err := th.TryPopBatch(bufs, lens); n != benchBatch || err != nil {
			b.Fatal(n, err)
		}
	}
	reportPerMsg(b)
}

func BenchmarkDequePushSteal32Singles(b *testing.B) {
	d := newDeque(b, DequeConfig{Capacity: 1024})
	th := openThief(b, d)
	buf := make([]byte, d.MaxPayload())
	b.ReportAllocs()
	b.SetBytes(int64(benchBatch * len(benchMsg)))
	for b.Loop() {
		for range benchBatch {
			if err := d.TryPush(benchMsg); err != nil {
				b.Fatal(err)
			}
		}
		for range benchBatch {
			if _, err := th.TryPop(buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportPerMsg(b)
}

func BenchmarkDequeClaimAckBatch32(b *testing.B) {
	d := newDeque(b, DequeConfig{Capacity: 1024})
	th := openThief(b, d)
	msgs := benchBatchMsgs()
	leases := make([]Lease, benchBatch)
	b.ReportAllocs()
	b.SetBytes(int64(benchBatch * len(benchMsg)))
	for b.Loop() {
		if n, err := d.TryPushBatch(msgs); n != benchBatch || err != nil {
			b.Fatal(n, err)
		}
		if n, err := th.TryClaimBatch(leases); n != benchBatch || err != nil {
			b.Fatal(n, err)
		}
		if err := th.AckBatch(leases); err != nil {
			b.Fatal(err)
		}
	}
	reportPerMsg(b)
}

func BenchmarkDequeClaimAck32Singles(b *testing.B) {
	d := newDeque(b, DequeConfig{Capacity: 1024})
	th := openThief(b, d)
	leases := make([]Lease, benchBatch)
	b.ReportAllocs()
	b.SetBytes(int64(benchBatch * len(benchMsg)))
	for b.Loop() {
		for range benchBatch {
			if err := d.TryPush(benchMsg); err != nil {
				b.Fatal(err)
			}
		}
		for i := range leases {
			l, err := th.TryClaim()
			if err != nil {
				b.Fatal(err)
			}
			leases[i] = l
		}
		for _, l := range leases {
			if err := th.Ack(l); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportPerMsg(b)
}

func TestDequeBatchFastPathsZeroAllocs(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 256})
	th := openThief(t, d)
	ctx := context.Background()
	msgs := benchBatchMsgs()
	bufs, lens := dequeBufs(d, benchBatch)
	leases := make([]Lease, benchBatch)
	want := func(n int, err error) {
		if n != benchBatch || err != nil {
			t.Fatal(n, err)
		}
	}
	if a := testing.AllocsPerRun(200, func() {
		want(d.TryPushBatch(msgs))
		want(d.TryPopBatch(bufs, lens))
		want(d.PushBatch(ctx, msgs))
		want(d.PopBatch(ctx, bufs, lens))
		want(d.TryPushBatch(msgs))
		want(th.TryPopBatch(bufs, lens))
		want(d.PushBatch(ctx, msgs))
		want(th.PopBatch(ctx, bufs, lens))
		want(d.TryPushBatch(msgs))
		want(d.TryStealBatch(bufs, lens))
		want(d.TryPushBatch(msgs))
		want(th.StealBatch(ctx, bufs, lens))
		want(d.TryPushBatch(msgs))
		want(th.TryClaimBatch(leases))
		if err := th.AckBatch(leases); err != nil {
			t.Fatal(err)
		}
		want(d.TryPushBatch(msgs))
		want(th.ClaimBatch(ctx, leases))
		if err := th.AckBatch(leases); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("%v allocations per round of batch calls", a)
	}
	if d.Len() != 0 {
		t.Fatalf("Len %d after balanced runs", d.Len())
	}
}
