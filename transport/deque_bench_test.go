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
