package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
)

func newDeque(t testing.TB, cfg DequeConfig) *Deque {
	t.Helper()
	d, err := CreateDeque(ringPath(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func openThief(t testing.TB, d *Deque) *Deque {
	t.Helper()
	th, err := OpenDeque(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { th.Close() })
	return th
}

func u64msg(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func TestDequeOwnerLIFOThiefFIFO(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8})
	th := openThief(t, d)
	if !d.IsOwner() || th.IsOwner() {
		t.Fatalf("owner flags: creator %v, opener %v", d.IsOwner(), th.IsOwner())
	}
	for i := uint64(1); i <= 4; i++ {
		if err := d.TryPush(u64msg(i)); err != nil {
			t.Fatal(err)
		}
	}
	if d.Len() != 4 {
		t.Fatalf("Len %d", d.Len())
	}
	buf := make([]byte, 64)
	take := func(q *Deque) uint64 {
		t.Helper()
		n, err := q.TryPop(buf)
		if err != nil || n != 8 {
			t.Fatalf("pop: %d %v", n, err)
		}
		return binary.LittleEndian.Uint64(buf)
	}
	// The owner takes the newest, the thief the oldest.
	for _, step := range []struct {
		q    *Deque
		want uint64
	}{{d, 4}, {th, 1}, {th, 2}, {d, 3}} {
		if got := take(step.q); got != step.want {
			t.Fatalf("got %d, want %d", got, step.want)
		}
	}
	for _, q := range []*Deque{d, th} {
		if _, err := q.TryPop(buf); err != ErrEmpty {
			t.Fatalf("empty: %v", err)
		}
	}
	c := d.Counters()
	if c.Pushed != 4 || c.OwnerPopped != 2 || c.Stolen != 2 || c.Top != c.Bottom {
		t.Fatalf("counters %+v", c)
	}
}

func TestDequeErrors(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 4})
	th := openThief(t, d)
	if err := th.TryPush([]byte("x")); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("thief push: %v", err)
	}
	if err := d.TryPush(make([]byte, 57)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("57 bytes: %v", err)
	}
	for i := 0; i < 4; i++ {
		if err := d.TryPush([]byte("twelve bytes")); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.TryPush([]byte("x")); err != ErrFull {
		t.Fatalf("full: %v", err)
	}
	if _, err := th.TryPop(make([]byte, 4)); !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("short steal: %v", err)
	}
	if _, err := d.TryPop(make([]byte, 4)); !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("short pop: %v", err)
	}
	if d.Len() != 4 {
		t.Fatalf("a short buffer lost a message: Len %d", d.Len())
	}
	if _, err := CreateDeque(ringPath(t), DequeConfig{Capacity: 3}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("capacity 3: %v", err)
	}
	if err := th.Ack(Lease{}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("ack of nothing: %v", err)
	}
}

func TestDequeWrapsManyLaps(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 4})
	th := openThief(t, d)
	buf := make([]byte, 64)
	next, want := uint64(0), uint64(0)
	for round := 0; round < 200; round++ {
		for i := 0; i < 3; i++ {
			if err := d.TryPush(u64msg(next)); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			next++
		}
		// Steal two (oldest first), pop one (newest).
		for i := 0; i < 2; i++ {
			if _, err := th.TryPop(buf); err != nil {
				t.Fatal(err)
			}
			if got := binary.LittleEndian.Uint64(buf); got != want {
				t.Fatalf("round %d: stole %d, want %d", round, got, want)
			}
			want++
		}
		if _, err := d.TryPop(buf); err != nil {
			t.Fatal(err)
		}
		if got := binary.LittleEndian.Uint64(buf); got != next-1 {
			t.Fatalf("round %d: popped %d, want %d", round, got, next-1)
		}
		want++ // the popped one is gone; the next steal takes the one after
	}
}

func TestDequeClaimAckRelease(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8, DeliveryLimit: 3})
	th := openThief(t, d)
	if err := d.TryPush([]byte("a")); err != nil {
		t.Fatal(err)
	}
	l, err := th.TryClaim()
	if err != nil || string(l.Data()) != "a" || l.Deliveries != 1 {
		t.Fatalf("claim: %q %d %v", l.Data(), l.Deliveries, err)
	}
	// Released: returned, and taken again once the deque is otherwise
	// empty.
	if err := th.Release(l); err != nil {
		t.Fatal(err)
	}
	if err := th.Ack(l); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("ack after release: %v", err)
	}
	for want := 2; want <= 3; want++ {
		l, err = th.TryClaim()
		if err != nil || string(l.Data()) != "a" || l.Deliveries != want {
			t.Fatalf("claim again: %q %d %v", l.Data(), l.Deliveries, err)
		}
		if err := th.Release(l); err != nil {
			t.Fatal(err)
		}
	}
	// Three deliveries: the next look makes it poison, and b is next.
	d.TryPush([]byte("b"))
	d.TryPush([]byte("c"))
	for _, want := range []string{"b", "c"} {
		l, err = th.TryClaim()
		if err != nil || string(l.Data()) != want {
			t.Fatalf("claim: %q %v, want %s", l.Data(), err, want)
		}
		if err := th.Ack(l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := th.TryClaim(); err != ErrEmpty {
		t.Fatalf("claim with only poison left: %v", err)
	}
	rep := d.Scan()
	if rep.States[layout.SlotPoisoned] != 1 || rep.Problems != 1 {
		t.Fatalf("scan: %+v", rep)
	}
	buf := make([]byte, 64)
	n, deliveries, err := th.TakePoisoned(buf)
	if err != nil || string(buf[:n]) != "a" || deliveries != 3 {
		t.Fatalf("take poisoned: %q %d %v", buf[:n], deliveries, err)
	}
	c := d.Counters()
	if c.Claimed != 5 || c.Acked != 2 || c.Returned != 3 || c.Poisoned != 1 || c.Pending != 0 {
		t.Fatalf("counters %+v", c)
	}
}

// A returned message in the slot the owner's push reaches is published
// again there, as the newest, instead of stalling the owner.
func TestDequeOwnerRepublishesReturned(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 2})
	th := openThief(t, d)
	d.TryPush([]byte("a"))
	d.TryPush([]byte("b"))
	l, _ := th.TryClaim() // a, slot 0
	if err := th.Release(l); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := th.TryPop(buf); err != nil || string(buf[:n]) != "b" {
		t.Fatalf("steal: %q %v", buf[:n], err)
	}
	// Position 2 is slot 0, which holds a: republished, then c at 3.
	if err := d.TryPush([]byte("c")); err != nil {
		t.Fatal(err)
	}
	if c := d.Counters(); c.Pending != 0 || d.Len() != 2 {
		t.Fatalf("after republish: %+v len %d", c, d.Len())
	}
	var got []string
	for {
		n, err := th.TryPop(buf)
		if err == ErrEmpty {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(buf[:n]))
	}
	if len(got) != 2 || got[0] != "a" || got[1] != "c" {
		t.Fatalf("drained %v, want [a c]", got)
	}
}

func TestDequeAdoptAfterClose(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 8})
	th := openThief(t, d)
	if _, err := th.Adopt(); !errors.Is(err, ErrOwnerAlive) {
		t.Fatalf("adopt from a live owner: %v", err)
	}
	d.TryPush([]byte("left behind"))
	path := d.Path()
	d.Close()
	if _, err := th.Adopt(); err != nil {
		t.Fatal(err)
	}
	if !th.IsOwner() || th.Counters().Owner != th.Participant() {
		t.Fatalf("adopter is not the owner: %+v", th.Counters())
	}
	buf := make([]byte, 64)
	if n, err := th.TryPop(buf); err != nil || string(buf[:n]) != "left behind" {
		t.Fatalf("%q %v", buf[:n], err)
	}
	if err := th.TryPush([]byte("new")); err != nil {
		t.Fatal(err)
	}
	_ = path
	// Disown hands the role on without closing.
	if err := th.Disown(); err != nil || th.IsOwner() {
		t.Fatalf("disown: %v", err)
	}
	if err := th.TryPush([]byte("x")); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("push after disown: %v", err)
	}
	if err := th.Disown(); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("second disown: %v", err)
	}
	other := openThief(t, th)
	if _, err := other.Adopt(); err != nil {
		t.Fatal(err)
	}
}

func TestDequeBlockingStealAndCancel(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 4})
	th := openThief(t, d)
	done := make(chan string)
	go func() {
		buf := make([]byte, 64)
		n, err := th.Steal(context.Background(), buf)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(buf[:n])
	}()
	time.Sleep(50 * time.Millisecond) // let it sleep on the futex
	if err := d.TryPush([]byte("wake")); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != "wake" {
		t.Fatalf("blocked steal got %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := th.Claim(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim on empty: %v", err)
	}
	// The owner's blocking push waits for room.
	for i := 0; i < 4; i++ {
		d.TryPush([]byte("x"))
	}
	popped := make(chan struct{})
	go func() {
		defer close(popped)
		time.Sleep(30 * time.Millisecond)
		th.TryPop(make([]byte, 64))
	}()
	if err := d.Push(context.Background(), []byte("room")); err != nil {
		t.Fatal(err)
	}
	<-popped
}

// Many thieves and the owner's pops race for every message: each is taken
// exactly once.
func TestDequeConcurrentExactlyOnce(t *testing.T) {
	const n = 20000
	d := newDeque(t, DequeConfig{Capacity: 64})
	var seen [n]atomic.Int32
	var wg sync.WaitGroup
	var taken atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	record := func(buf []byte) {
		v := binary.LittleEndian.Uint64(buf)
		if v >= n {
			t.Errorf("bad message %d", v)
			return
		}
		seen[v].Add(1)
		taken.Add(1)
	}
	for k := 0; k < 3; k++ {
		th := openThief(t, d)
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			buf := make([]byte, 64)
			for taken.Load() < n {
				if k == 0 {
					l, err := th.TryClaim()
					if err == nil {
						record(l.Data())
						th.Ack(l)
					}
					continue
				}
				if _, err := th.TryPop(buf); err == nil {
					record(buf)
				}
			}
		}(k)
	}
	buf := make([]byte, 64)
	for i := uint64(0); i < n; i++ {
		if err := d.Push(ctx, u64msg(i)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if _, err := d.TryPop(buf); err == nil {
				record(buf)
			}
		}
	}
	for taken.Load() < n {
		if _, err := d.TryPop(buf); err == nil {
			record(buf)
		}
	}
	wg.Wait()
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Fatalf("message %d taken %d times", i, c)
		}
	}
}

// A lease held while the owner comes round to its slot does not stall the
// owner: it burns the position, and its pops step back over it.
func TestDequeOwnerBurnsPastHeldLease(t *testing.T) {
	d := newDeque(t, DequeConfig{Capacity: 4})
	th := openThief(t, d)
	for i := uint64(0); i < 4; i++ {
		d.TryPush(u64msg(i))
	}
	held, err := th.TryClaim() // message 0, slot 0
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for i := 0; i < 3; i++ { // messages 1..3 stolen: slots 1..3 free a lap on
		if _, err := th.TryPop(buf); err != nil {
			t.Fatal(err)
		}
	}
	// Positions 4..7: slot 0 still holds the lease, so position 4 is
	// burned and 5, 6, 7 take the new messages.
	for i := uint64(10); i < 13; i++ {
		if err := d.TryPush(u64msg(i)); err != nil {
			t.Fatalf("push %d with a lease held: %v", i, err)
		}
	}
	if c := d.Counters(); c.Burned != 1 {
		t.Fatalf("burned %d, want 1", c.Burned)
	}
	// The owner pops all three, newest first, stepping over the hole...
	for want := uint64(12); want >= 10; want-- {
		n, err := d.TryPop(buf)
		if err != nil || binary.LittleEndian.Uint64(buf[:n]) != want {
			t.Fatalf("pop: %d %v, want %d", binary.LittleEndian.Uint64(buf[:n]), err, want)
		}
	}
	if _, err := d.TryPop(buf); err != ErrEmpty {
		t.Fatalf("after the hole: %v", err)
	}
	// ... and pushes again over it, whether the lease is still held or
	// acked meanwhile.
	d.TryPush(u64msg(20)) // position 5 after stepping over 4
	if err := th.Ack(held); err != nil {
		t.Fatalf("ack of a burned lease: %v", err)
	}
	d.TryPush(u64msg(21))
	got := []uint64{}
	for {
		n, err := th.TryPop(buf)
		if err == ErrEmpty {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, binary.LittleEndian.Uint64(buf[:n]))
	}
	if len(got) != 2 || got[0] != 20 || got[1] != 21 {
		t.Fatalf("stole %v, want [20 21]", got)
	}
	if rep := d.Scan(); rep.Problems != 0 || d.Len() != 0 {
		t.Fatalf("scan %+v, len %d", rep, d.Len())
	}
}

// Leases held across many pushes (the owner burns past them), leases
// released (returned and taken again, some until they are poison), plain
// steals and the owner's pops, all at once on a small deque: every
// message is finally taken exactly once (poison by TakePoisoned).
func TestDequeStressHeldAndReleasedLeases(t *testing.T) {
	n := uint64(30000)
	if testing.Short() {
		n = 5000
	}
	d := newDeque(t, DequeConfig{Capacity: 16, DeliveryLimit: 15})
	seen := make([]atomic.Int32, n)
	var taken atomic.Uint64
	record := func(b []byte) {
		v := binary.LittleEndian.Uint64(b)
		if v >= n {
			t.Errorf("bad message %d", v)
			return
		}
		seen[v].Add(1)
		taken.Add(1)
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	worker := func(role int) {
		defer wg.Done()
		th := openThief(t, d)
		buf := make([]byte, 64)
		var held []Lease
		for i := 0; taken.Load() < n && ctx.Err() == nil; i++ {
			switch role {
			case 0: // holds up to 3 leases, acks the oldest
				if l, err := th.TryClaim(); err == nil {
					held = append(held, l)
				}
				if len(held) > 3 || (len(held) > 0 && i%5 == 0) {
					record(held[0].Data())
					if err := th.Ack(held[0]); err != nil {
						t.Error(err)
						return
					}
					held = held[1:]
				}
			case 1: // releases every other lease it claims
				if l, err := th.TryClaim(); err == nil {
					if i%2 == 0 {
						if err := th.Release(l); err != nil {
							t.Error(err)
							return
						}
					} else {
						record(l.Data())
						if err := th.Ack(l); err != nil {
							t.Error(err)
							return
						}
					}
				}
			case 2:
				if _, err := th.TryPop(buf); err == nil {
					record(buf)
				}
			}
		}
		for _, l := range held {
			record(l.Data())
			th.Ack(l)
		}
	}
	for role := 0; role < 3; role++ {
		wg.Add(1)
		go worker(role)
	}
	buf := make([]byte, 64)
	for i := uint64(0); i < n; i++ {
		if err := d.Push(ctx, u64msg(i)); err != nil {
			t.Fatalf("push %d: %v (%+v)", i, err, d.Counters())
		}
		if i%3 == 0 {
			if _, err := d.TryPop(buf); err == nil {
				record(buf)
			}
		}
	}
	// Messages released up to the delivery limit are poison: taken aside.
	for taken.Load() < n && ctx.Err() == nil {
		if _, err := d.TryPop(buf); err == nil {
			record(buf)
		} else if _, _, err := d.TakePoisoned(buf); err == nil {
			record(buf)
		}
	}
	wg.Wait()
	if taken.Load() < n {
		var missing []int
		for i := range seen {
			if seen[i].Load() == 0 && len(missing) < 10 {
				missing = append(missing, i)
			}
		}
		t.Fatalf("stuck at %d of %d taken; missing %v; %+v; slots %+v", taken.Load(), n, missing, d.Counters(), d.Scan().Slots)
	}
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Fatalf("message %d taken %d times (%+v)", i, c, d.Counters())
		}
	}
	if c := d.Counters(); c.Burned == 0 || c.Returned == 0 {
		t.Logf("no burn or return happened: %+v", c)
	}
}
