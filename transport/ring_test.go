package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

func ringPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join(shm.DefaultDir, fmt.Sprintf("shmkit-ring-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(p) })
	return p
}

func newRing(t testing.TB, cfg RingConfig) *Ring {
	t.Helper()
	r, err := CreateRing(ringPath(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRingConfigValidation(t *testing.T) {
	for _, cfg := range []RingConfig{
		{Capacity: 0}, {Capacity: 3}, {Capacity: 1}, {Capacity: 8, SlotSize: 100},
		{Capacity: 8, SlotSize: 32}, {Capacity: 8, DeliveryLimit: 16}, {Capacity: 8, Participants: 1024},
	} {
		if _, err := CreateRing(ringPath(t), cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

func TestPushPopPreservesBoundaries(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	if r.MaxPayload() != 56 {
		t.Fatalf("default payload %d", r.MaxPayload())
	}
	msgs := [][]byte{{}, {1}, []byte("hello"), make([]byte, 56)}
	msgs[3][55] = 9
	for _, m := range msgs {
		if err := r.TryPush(m); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 64)
	for _, want := range msgs {
		n, err := r.TryPop(buf)
		if err != nil || string(buf[:n]) != string(want) {
			t.Fatalf("got %q %v, want %q", buf[:n], err, want)
		}
	}
	if _, err := r.TryPop(buf); err != ErrEmpty {
		t.Fatalf("empty ring: %v", err)
	}
}

func TestTooLargeAndShortBuffer(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	err := r.TryPush(make([]byte, 57))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("57 bytes: %v", err)
	}
	if err := r.TryPush([]byte("twelve bytes")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.TryPop(make([]byte, 4)); !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("short buffer: %v", err)
	}
	buf := make([]byte, 12)
	if n, err := r.TryPop(buf); err != nil || n != 12 {
		t.Fatalf("message lost after short buffer: %d %v", n, err)
	}
}

func TestFullAndWrapAround(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4, SlotSize: 128})
	buf := make([]byte, r.MaxPayload())
	next := 0
	for round := 0; round < 50; round++ {
		for i := 0; i < 4; i++ {
			if err := r.TryPush([]byte(fmt.Sprint(next + i))); err != nil {
				t.Fatalf("round %d push %d: %v", round, i, err)
			}
		}
		if err := r.TryPush([]byte("x")); err != ErrFull {
			t.Fatalf("round %d: full ring accepted a push: %v", round, err)
		}
		for i := 0; i < 4; i++ {
			n, err := r.TryPop(buf)
			if err != nil || string(buf[:n]) != fmt.Sprint(next+i) {
				t.Fatalf("round %d pop %d: %q %v", round, i, buf[:n], err)
			}
		}
		next += 4
	}
	c := r.Counters()
	if c.Pushed != 200 || c.Popped != 200 || c.FullHits != 50 || c.Depth() != 0 {
		t.Fatalf("counters %+v", c)
	}
}

func TestClaimAckAndZeroCopy(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	r.TryPush([]byte("job-1"))
	l, err := r.TryClaim()
	if err != nil || string(l.Data()) != "job-1" || l.Deliveries != 1 {
		t.Fatalf("claim: %q %v %d", l.Data(), err, l.Deliveries)
	}
	if err := r.Ack(l); err != nil {
		t.Fatal(err)
	}
	if err := r.Ack(l); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("double ack: %v", err)
	}
	// The zero Lease that comes with a TryClaim error acks nothing.
	r.TryPush([]byte("job-2"))
	held, _ := r.TryClaim()
	if err := r.Ack(Lease{}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("ack of a zero lease: %v", err)
	}
	if err := r.Release(Lease{}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("release of a zero lease: %v", err)
	}
	r.Ack(held)
	if _, err := r.TryClaim(); err != ErrEmpty {
		t.Fatalf("after ack: %v", err)
	}
	c := r.Counters()
	if c.Claimed != 2 || c.Acked != 2 {
		t.Fatalf("%+v", c)
	}
}

// TestHeldLeaseDoesNotStallProducers: producers pass over a leased slot
// (burning its position) instead of waiting a whole lap behind it.
func TestHeldLeaseDoesNotStallProducers(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4})
	r.TryPush([]byte("slow"))
	held, err := r.TryClaim()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for i := 0; i < 40; i++ {
		if err := r.TryPush([]byte(fmt.Sprint(i))); err != nil {
			t.Fatalf("push %d with one lease held: %v", i, err)
		}
		n, err := r.TryPop(buf)
		if err != nil || string(buf[:n]) != fmt.Sprint(i) {
			t.Fatalf("pop %d: %q %v", i, buf[:n], err)
		}
	}
	// With the lease held, three slots remain usable.
	for i := 0; i < 3; i++ {
		if err := r.TryPush([]byte("f")); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.TryPush([]byte("f")); err != ErrFull {
		t.Fatalf("expected full with 3 messages and one lease: %v", err)
	}
	if string(held.Data()) != "slow" {
		t.Fatalf("leased payload changed to %q", held.Data())
	}
	if err := r.Ack(held); err != nil {
		t.Fatal(err)
	}
	if r.Counters().Burned == 0 {
		t.Fatal("no positions burned")
	}
	for i := 0; i < 3; i++ {
		if _, err := r.TryPop(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.TryPush([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if n, err := r.TryPop(buf); err != nil || string(buf[:n]) != "after" {
		t.Fatalf("%q %v", buf[:n], err)
	}
}

func TestAllSlotsLeasedIsFull(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 2})
	r.TryPush([]byte("a"))
	r.TryPush([]byte("b"))
	a, _ := r.TryClaim()
	b, _ := r.TryClaim()
	if err := r.TryPush([]byte("c")); err != ErrFull {
		t.Fatalf("all leased: %v", err)
	}
	r.Ack(a)
	if err := r.TryPush([]byte("c")); err != nil {
		t.Fatal(err)
	}
	r.Ack(b)
}

func TestReleaseRedeliversAndPoisons(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4, DeliveryLimit: 3})
	r.TryPush([]byte("bad"))
	for want := 1; want <= 3; want++ {
		l, err := r.TryClaim()
		if err != nil || l.Deliveries != want {
			t.Fatalf("delivery %d: %v %d", want, err, l.Deliveries)
		}
		if err := r.Release(l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.TryClaim(); err != ErrEmpty {
		t.Fatalf("poison delivered a 4th time: %v", err)
	}
	rep := r.Scan()
	if rep.States[layout.SlotPoisoned] != 1 || r.Counters().Poisoned != 1 {
		t.Fatalf("poison not set aside: %+v", rep.States)
	}
	buf := make([]byte, 64)
	n, d, err := r.TakePoisoned(buf)
	if err != nil || string(buf[:n]) != "bad" || d != 3 {
		t.Fatalf("take poisoned: %q %d %v", buf[:n], d, err)
	}
	if _, _, err := r.TakePoisoned(buf); err != ErrEmpty {
		t.Fatal(err)
	}
}

func TestNextIDUniqueAcrossHandles(t *testing.T) {
	a := newRing(t, RingConfig{Capacity: 4})
	b, err := OpenRing(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seen := map[uint64]bool{}
	for i := 0; i < 100; i++ {
		for _, r := range []*Ring{a, b} {
			id := r.NextID()
			if seen[id] {
				t.Fatalf("id %d handed out twice", id)
			}
			seen[id] = true
		}
	}
}

func TestBlockingPopPushAndCancel(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 2})
	buf := make([]byte, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := r.Pop(ctx, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("pop on empty ring: %v", err)
	}
	// Cancellation without a deadline wakes the sleeper.
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel2() }()
	if _, err := r.Claim(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("claim cancelled: %v", err)
	}
	// A sleeping consumer is woken by a push.
	done := make(chan string)
	go func() {
		n, err := r.Pop(context.Background(), buf)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(buf[:n])
	}()
	time.Sleep(20 * time.Millisecond)
	r.TryPush([]byte("wake"))
	if got := <-done; got != "wake" {
		t.Fatalf("got %q", got)
	}
	// A full ring blocks Push until a pop.
	r.TryPush([]byte("1"))
	r.TryPush([]byte("2"))
	ctx3, cancel3 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel3()
	if err := r.Push(ctx3, []byte("3")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("push on full ring: %v", err)
	}
	popped := make(chan struct{})
	go func() { time.Sleep(20 * time.Millisecond); r.TryPop(make([]byte, 64)); close(popped) }()
	if err := r.Push(context.Background(), []byte("3")); err != nil {
		t.Fatal(err)
	}
	<-popped
}

// TestConcurrentMPMC: goroutines push and pop (plain and leased) checksummed
// messages at once; every message arrives exactly once, intact.
func TestConcurrentMPMC(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 16})
	const producers, perProducer, consumers = 4, 3000, 4
	var mu sync.Mutex
	seen := map[uint64]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < perProducer; i++ {
				if err := r.Push(ctx, encodeMsg(uint64(p)<<32|uint64(i))); err != nil {
					t.Error(err)
					return
				}
			}
		}(p)
	}
	total := producers * perProducer
	got := make(chan uint64, total)
	var cw sync.WaitGroup
	for c := 0; c < consumers; c++ {
		cw.Add(1)
		go func(c int) {
			defer cw.Done()
			buf := make([]byte, 64)
			for ctx.Err() == nil {
				var id uint64
				var err error
				if c%2 == 0 {
					var n int
					n, err = r.Pop(ctx, buf)
					if err == nil {
						id, err = decodeMsg(buf[:n])
					}
				} else {
					var l Lease
					l, err = r.Claim(ctx)
					if err == nil {
						id, err = decodeMsg(l.Data())
						if aerr := r.Ack(l); aerr != nil {
							t.Error(aerr)
						}
					}
				}
				if err != nil {
					return
				}
				got <- id
			}
		}(c)
	}
	for i := 0; i < total; i++ {
		select {
		case id := <-got:
			mu.Lock()
			seen[id]++
			mu.Unlock()
		case <-ctx.Done():
			t.Fatalf("only %d of %d messages arrived", i, total)
		}
	}
	cancel()
	wg.Wait()
	cw.Wait()
	if len(seen) != total {
		t.Fatalf("%d distinct messages, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("message %x delivered %d times", id, n)
		}
	}
}

// encodeMsg makes a 20-byte message: id, a filler word and a CRC over both.
func encodeMsg(id uint64) []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint64(b, id)
	binary.LittleEndian.PutUint64(b[8:], ^id*0x9e3779b97f4a7c15)
	binary.LittleEndian.PutUint32(b[16:], crc32.ChecksumIEEE(b[:16]))
	return b
}

func decodeMsg(b []byte) (uint64, error) {
	if len(b) != 20 || binary.LittleEndian.Uint32(b[16:]) != crc32.ChecksumIEEE(b[:16]) {
		return 0, fmt.Errorf("corrupt message % x", b)
	}
	return binary.LittleEndian.Uint64(b), nil
}

func TestParticipantsReusedAfterClose(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4, Participants: 2})
	for i := 0; i < 10; i++ {
		o, err := OpenRing(r.Path())
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		o.Close()
	}
	o, _ := OpenRing(r.Path())
	defer o.Close()
	if _, err := OpenRing(r.Path()); !errors.Is(err, ErrTooManyPeers) {
		t.Fatalf("third participant in a table of 2: %v", err)
	}
}

func TestCloseReleasesLeases(t *testing.T) {
	a := newRing(t, RingConfig{Capacity: 4})
	b, err := OpenRing(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	a.TryPush([]byte("held"))
	if _, err := b.TryClaim(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	l, err := a.TryClaim()
	if err != nil || string(l.Data()) != "held" || l.Deliveries != 2 {
		t.Fatalf("lease of a closed handle not redelivered: %q %v %d", l.Data(), err, l.Deliveries)
	}
}

func TestReadOnlyScan(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8})
	r.TryPush([]byte("a"))
	r.TryPush([]byte("b"))
	r.TryClaim()
	ro, err := OpenRingReadOnly(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.TryPush([]byte("x")); err != ErrNotAttached {
		t.Fatalf("read-only push: %v", err)
	}
	rep := ro.Scan()
	if rep.States[layout.SlotReady] != 1 || rep.States[layout.SlotLeased] != 1 || rep.Problems != 0 {
		t.Fatalf("scan %+v", rep)
	}
}
