package bareref

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// A batch takes what fits and no more: a push batch into a ring with room
// for 3 pushes 3, a pop batch of a ring holding 3 pops 3, in order.
func TestBatchesTakeWhatFits(t *testing.T) {
	r, err := Init(aligned(Size(8, 64)), 8, 64)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if !r.TryPush([]byte{byte(100 + i)}) {
			t.Fatal("push refused")
		}
	}
	msgs := make([][]byte, 6)
	for i := range msgs {
		msgs[i] = []byte{byte(i), byte(i)}
	}
	if n := r.TryPushBatch(msgs); n != 3 {
		t.Fatalf("push batch into room for 3 pushed %d", n)
	}
	if n := r.TryPushBatch(msgs); n != 0 {
		t.Fatalf("push batch into a full ring pushed %d", n)
	}
	bufs := make([][]byte, 16)
	for i := range bufs {
		bufs[i] = make([]byte, 64)
	}
	lens := make([]int, 16)
	if n := r.TryPopBatch(bufs[:4], lens); n != 4 {
		t.Fatalf("pop batch of 4 from a full ring popped %d", n)
	}
	if n := r.TryPopBatch(bufs, lens); n != 4 {
		t.Fatalf("pop batch of the 4 left popped %d", n)
	}
	want := [][]byte{{104}, {0, 0}, {1, 1}, {2, 2}}
	for i, w := range want {
		if string(bufs[i][:lens[i]]) != string(w) {
			t.Fatalf("message %d is %x, want %x", i, bufs[i][:lens[i]], w)
		}
	}
	if n := r.TryPopBatch(bufs, lens); n != 0 {
		t.Fatalf("pop batch from an empty ring popped %d", n)
	}
}

// A batch producer and a single producer, a batch consumer and a single
// consumer: every message comes out exactly once.
func TestBatchesAndSinglesDeliverEveryMessageOnce(t *testing.T) {
	mem := aligned(Size(16, 64))
	if _, err := Init(mem, 16, 64); err != nil {
		t.Fatal(err)
	}
	const per = 20000
	var seen [2][per]atomic.Int32
	var taken atomic.Int64
	var wg sync.WaitGroup
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			v, _ := Attach(mem, 16, 64)
			msgs := make([][]byte, 7)
			for i := range msgs {
				msgs[i] = make([]byte, 16)
			}
			for i := 0; i < per; {
				k := min(len(msgs), per-i)
				if p == 1 {
					k = 1
				}
				for j := range k {
					binary.LittleEndian.PutUint64(msgs[j], uint64(p))
					binary.LittleEndian.PutUint64(msgs[j][8:], uint64(i+j))
				}
				for off := 0; off < k; {
					var n int
					if p == 1 {
						if v.TryPush(msgs[0]) {
							n = 1
						}
					} else {
						n = v.TryPushBatch(msgs[off:k])
					}
					if n == 0 {
						runtime.Gosched()
					}
					off += n
				}
				i += k
			}
		}(p)
	}
	for c := 0; c < 2; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			v, _ := Attach(mem, 16, 64)
			bufs := make([][]byte, 5)
			for i := range bufs {
				bufs[i] = make([]byte, 64)
			}
			lens := make([]int, 5)
			for taken.Load() < 2*per {
				n := 0
				if c == 0 {
					n = v.TryPopBatch(bufs, lens)
				} else if l, ok := v.TryPop(bufs[0]); ok {
					n, lens[0] = 1, l
				}
				if n == 0 {
					runtime.Gosched()
					continue
				}
				for j := range n {
					p := binary.LittleEndian.Uint64(bufs[j])
					i := binary.LittleEndian.Uint64(bufs[j][8:])
					if lens[j] != 16 || p > 1 || i >= per {
						t.Errorf("bad message %x", bufs[j][:lens[j]])
						taken.Store(2 * per)
						return
					}
					seen[p][i].Add(1)
				}
				taken.Add(int64(n))
			}
		}(c)
	}
	wg.Wait()
	for p := range seen {
		for i := range seen[p] {
			if n := seen[p][i].Load(); n != 1 {
				t.Fatalf("message %d of producer %d came out %d times", i, p, n)
			}
		}
	}
}

// The stamped calls are a queue too: two producers and two consumers,
// every message exactly once.
func TestStampedCallsDeliverEveryMessageOnce(t *testing.T) {
	mem := aligned(Size(16, 64))
	if _, err := Init(mem, 16, 64); err != nil {
		t.Fatal(err)
	}
	const per = 20000
	var seen [2][per]atomic.Int32
	var taken atomic.Int64
	var wg sync.WaitGroup
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			v, _ := Attach(mem, 16, 64)
			msg := make([]byte, 16)
			for i := 0; i < per; i++ {
				binary.LittleEndian.PutUint64(msg, uint64(p))
				binary.LittleEndian.PutUint64(msg[8:], uint64(i))
				for !v.TryPushStamped(msg) {
					runtime.Gosched()
				}
			}
		}(p)
	}
	for c := 0; c < 2; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _ := Attach(mem, 16, 64)
			buf := make([]byte, 64)
			for taken.Load() < 2*per {
				n, ok := v.TryPopStamped(buf)
				if !ok {
					runtime.Gosched()
					continue
				}
				p, i := binary.LittleEndian.Uint64(buf), binary.LittleEndian.Uint64(buf[8:])
				if n != 16 || p > 1 || i >= per {
					t.Errorf("bad message %x", buf[:n])
					taken.Store(2 * per)
					return
				}
				seen[p][i].Add(1)
				taken.Add(1)
			}
		}()
	}
	wg.Wait()
	v, _ := Attach(mem, 16, 64)
	if a, b := v.counter(offPushed).Load(), v.counter(offPopped).Load(); a != 2*per || b != 2*per {
		t.Errorf("counters say %d pushed, %d popped; want %d each", a, b, 2*per)
	}
	for p := range seen {
		for i := range seen[p] {
			if n := seen[p][i].Load(); n != 1 {
				t.Fatalf("message %d of producer %d came out %d times", i, p, n)
			}
		}
	}
}
