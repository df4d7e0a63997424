package transport

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/internal/bareref"
)

// The bare loop (issue 17, item 3; docs/bench.md, "The per-message
// path"): shmkit's ring and the reference Vyukov ring without crash safety
// (internal/bareref) in the same minimal loop, measured side by side in one
// run: 56-byte messages, 64-byte slots, 1024 slots, no clock reads,
// checksums or histograms.
//
//	go test ./transport -run '^$' -bench 'BareLoop' -benchmem -count 10 | benchstat -col /ring -
//
// loop=spsc is one producer goroutine and one consumer goroutine spinning
// on TryPush and TryPop (ns/op is per message through the ring);
// loop=pushpop is one goroutine pushing then popping, which isolates the
// instructions of the two calls from the cache-line traffic between cores;
// loop=claimack is shmkit's push, lease and ack in one goroutine (the bare
// ring has no leases: its row is the same push and pop as loop=pushpop).
// ring=bare+rmw is the bare ring with, after each push and each pop, the
// two locked read-modify-writes on a line of the side's own that
// shmkit's ring makes and the bare ring does not (a CAS and an add: the
// tail or head CAS after the slot CAS that stamps the owner, and the
// pushed or popped add that is also the barrier before the waiter-flag
// load), and nothing else: what the bare ring would cost with only
// those, the floor for shmkit's design (docs/bench.md, "The per-message
// path"). The loops are written out once per ring rather than through a
// func or an interface, so that neither pays for an indirect call the
// other does not make.

const (
	bareSlots    = 1024
	bareSlotSize = 64
	bareMsgLen   = 56
	// bareSpins is how many misses (full, empty) a loop spins through
	// before it yields: on two shared cores the other side may not be
	// running at all.
	bareSpins = 64
)

var bareMsg = make([]byte, bareMsgLen)

func newBareRef(b *testing.B) *bareref.Ring {
	b.Helper()
	// A shared anonymous mapping: page-aligned memory of the same kind
	// as the ring's file mapping.
	mem, err := unix.Mmap(-1, 0, bareref.Size(bareSlots, bareSlotSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = unix.Munmap(mem) })
	r, err := bareref.Init(mem, bareSlots, bareSlotSize)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func newBareLoopRing(b *testing.B) *Ring {
	return newRing(b, RingConfig{Capacity: bareSlots, SlotSize: bareSlotSize})
}

func BenchmarkBareLoop(b *testing.B) {
	b.Run("loop=spsc/ring=shmkit", benchSPSCShmkit)
	b.Run("loop=spsc/ring=bare", benchSPSCBare)
	b.Run("loop=spsc/ring=bare+rmw", benchSPSCBareRMW)
	b.Run("loop=pushpop/ring=shmkit", benchPushPopShmkit)
	b.Run("loop=pushpop/ring=bare", benchPushPopBare)
	b.Run("loop=pushpop/ring=bare+rmw", benchPushPopBareRMW)
	b.Run("loop=claimack/ring=shmkit", benchClaimAckShmkit)
	b.Run("loop=claimack/ring=bare", benchPushPopBare)
}

func benchSPSCShmkit(b *testing.B) {
	r := newBareLoopRing(b)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	n := b.N
	var wg sync.WaitGroup
	wg.Add(1)
	b.ResetTimer()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			for miss := 0; ; miss++ {
				err := r.TryPush(bareMsg)
				if err == nil {
					break
				}
				if err != ErrFull {
					b.Error(err)
					return
				}
				if miss >= bareSpins {
					runtime.Gosched()
					miss = 0
				}
			}
		}
	}()
	buf := make([]byte, bareSlotSize)
	for i := 0; i < n; i++ {
		for miss := 0; ; miss++ {
			_, err := r.TryPop(buf)
			if err == nil {
				break
			}
			if err != ErrEmpty {
				b.Fatal(err)
			}
			if miss >= bareSpins {
				runtime.Gosched()
				miss = 0
			}
		}
	}
	b.StopTimer()
	wg.Wait()
}

func benchSPSCBare(b *testing.B) {
	r := newBareRef(b)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	n := b.N
	var wg sync.WaitGroup
	wg.Add(1)
	b.ResetTimer()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			for miss := 0; !r.TryPush(bareMsg); miss++ {
				if miss >= bareSpins {
					runtime.Gosched()
					miss = 0
				}
			}
		}
	}()
	buf := make([]byte, bareSlotSize)
	for i := 0; i < n; i++ {
		for miss := 0; ; miss++ {
			if _, ok := r.TryPop(buf); ok {
				break
			}
			if miss >= bareSpins {
				runtime.Gosched()
				miss = 0
			}
		}
	}
	b.StopTimer()
	wg.Wait()
}

// rmwLine is a cache line of one side's own, for ring=bare+rmw's locked
// read-modify-writes (the position word and counter that shmkit's ring
// keeps on the producers' or the consumers' line).
type rmwLine struct {
	pos, count atomic.Uint64
	_          [48]byte
}

// rmw makes the two locked read-modify-writes shmkit's ring makes per
// message beyond the bare ring's: a CAS of a position word and an add.
func (l *rmwLine) rmw() {
	p := l.pos.Load()
	l.pos.CompareAndSwap(p, p+1)
	l.count.Add(1)
}

func benchSPSCBareRMW(b *testing.B) {
	r := newBareRef(b)
	var prod, cons rmwLine
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	n := b.N
	var wg sync.WaitGroup
	wg.Add(1)
	b.ResetTimer()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			for miss := 0; !r.TryPush(bareMsg); miss++ {
				if miss >= bareSpins {
					runtime.Gosched()
					miss = 0
				}
			}
			prod.rmw()
		}
	}()
	buf := make([]byte, bareSlotSize)
	for i := 0; i < n; i++ {
		for miss := 0; ; miss++ {
			if _, ok := r.TryPop(buf); ok {
				break
			}
			if miss >= bareSpins {
				runtime.Gosched()
				miss = 0
			}
		}
		cons.rmw()
	}
	b.StopTimer()
	wg.Wait()
}

func benchPushPopBareRMW(b *testing.B) {
	r := newBareRef(b)
	var prod, cons rmwLine
	buf := make([]byte, bareSlotSize)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	for b.Loop() {
		if !r.TryPush(bareMsg) {
			b.Fatal("bare ring full")
		}
		prod.rmw()
		if _, ok := r.TryPop(buf); !ok {
			b.Fatal("bare ring empty")
		}
		cons.rmw()
	}
}

func benchPushPopShmkit(b *testing.B) {
	r := newBareLoopRing(b)
	buf := make([]byte, bareSlotSize)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	for b.Loop() {
		if err := r.TryPush(bareMsg); err != nil {
			b.Fatal(err)
		}
		if _, err := r.TryPop(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func benchPushPopBare(b *testing.B) {
	r := newBareRef(b)
	buf := make([]byte, bareSlotSize)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	for b.Loop() {
		if !r.TryPush(bareMsg) {
			b.Fatal("bare ring full")
		}
		if _, ok := r.TryPop(buf); !ok {
			b.Fatal("bare ring empty")
		}
	}
}

func benchClaimAckShmkit(b *testing.B) {
	r := newBareLoopRing(b)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	for b.Loop() {
		if err := r.TryPush(bareMsg); err != nil {
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
