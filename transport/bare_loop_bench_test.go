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
// on TryPush and TryPop (ns/op is per message through the ring; full/msg
// and empty/msg count the misses per message, see bareIdle);
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
// path"). The rings' calls are written out in each loop rather than
// reached through a func or an interface, so that no ring pays for an
// indirect call another does not make (the one-goroutine loops' bodies
// run through cpuLoop's closure, one indirect call per iteration for
// every ring alike).

const (
	bareSlots    = 1024
	bareSlotSize = 64
	bareMsgLen   = 56
	// After a miss (full, empty) a loop pauses barePause register-only
	// iterations before it tries again, as passbench's poll loop does: a
	// producer that retries at once at a full ring keeps reading the
	// very slot the consumer is freeing and takes its line away
	// (docs/bench.md, "Ring against a channel"). After bareSpins misses
	// in a row it yields instead: on two shared cores the other side
	// may not be running at all.
	barePause = 64
	bareSpins = 64
)

// barePauseFor spins n iterations on registers only; not inlined, so the
// loop is not removed.
//
//go:noinline
func barePauseFor(n int) int {
	x := 0
	for i := range n {
		x += i
	}
	return x
}

// bareIdle is the back-off after the miss-th miss in a row; it returns
// the next miss count.
func bareIdle(miss int) int {
	if miss < bareSpins {
		barePauseFor(barePause)
		return miss + 1
	}
	runtime.Gosched()
	return 0
}

// threadCPU returns the CPU time this thread has run, in nanoseconds.
func threadCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}

// cpuLoop runs a single-goroutine loop body under b.Loop and reports,
// beside the wall time, cpu-ns/op: the CPU time of the loop's thread
// per iteration. On a machine shared with other work the wall time also
// counts the time the thread waited for a CPU; the thread's CPU time does
// not (it still counts what co-runners do to the caches).
func cpuLoop(b *testing.B, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := 0
	start := threadCPU(b)
	for b.Loop() {
		body()
		n++
	}
	b.ReportMetric(float64(threadCPU(b)-start)/float64(n), "cpu-ns/op")
}

// reportMisses reports the misses per message of a two-goroutine loop.
func reportMisses(b *testing.B, full, empty int) {
	b.ReportMetric(float64(full)/float64(b.N), "full/msg")
	b.ReportMetric(float64(empty)/float64(b.N), "empty/msg")
}

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
	full, empty := 0, 0
	var wg sync.WaitGroup
	wg.Add(1)
	b.ResetTimer()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			for miss := 0; ; {
				err := r.TryPush(bareMsg)
				if err == nil {
					break
				}
				if err != ErrFull {
					b.Error(err)
					return
				}
				full++
				miss = bareIdle(miss)
			}
		}
	}()
	buf := make([]byte, bareSlotSize)
	for i := 0; i < n; i++ {
		for miss := 0; ; {
			_, err := r.TryPop(buf)
			if err == nil {
				break
			}
			if err != ErrEmpty {
				b.Fatal(err)
			}
			empty++
			miss = bareIdle(miss)
		}
	}
	b.StopTimer()
	wg.Wait()
	reportMisses(b, full, empty)
}

func benchSPSCBare(b *testing.B) {
	r := newBareRef(b)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	n := b.N
	full, empty := 0, 0
	var wg sync.WaitGroup
	wg.Add(1)
	b.ResetTimer()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			for miss := 0; ; {
				if r.TryPush(bareMsg) {
					break
				}
				full++
				miss = bareIdle(miss)
			}
		}
	}()
	buf := make([]byte, bareSlotSize)
	for i := 0; i < n; i++ {
		for miss := 0; ; {
			if _, ok := r.TryPop(buf); ok {
				break
			}
			empty++
			miss = bareIdle(miss)
		}
	}
	b.StopTimer()
	wg.Wait()
	reportMisses(b, full, empty)
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
	full, empty := 0, 0
	var wg sync.WaitGroup
	wg.Add(1)
	b.ResetTimer()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			for miss := 0; ; {
				if r.TryPush(bareMsg) {
					break
				}
				full++
				miss = bareIdle(miss)
			}
			prod.rmw()
		}
	}()
	buf := make([]byte, bareSlotSize)
	for i := 0; i < n; i++ {
		for miss := 0; ; {
			if _, ok := r.TryPop(buf); ok {
				break
			}
			empty++
			miss = bareIdle(miss)
		}
		cons.rmw()
	}
	b.StopTimer()
	wg.Wait()
	reportMisses(b, full, empty)
}

func benchPushPopBareRMW(b *testing.B) {
	r := newBareRef(b)
	var prod, cons rmwLine
	buf := make([]byte, bareSlotSize)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	cpuLoop(b, func() {
		if !r.TryPush(bareMsg) {
			b.Fatal("bare ring full")
		}
		prod.rmw()
		if _, ok := r.TryPop(buf); !ok {
			b.Fatal("bare ring empty")
		}
		cons.rmw()
	})
}

func benchPushPopShmkit(b *testing.B) {
	r := newBareLoopRing(b)
	buf := make([]byte, bareSlotSize)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	cpuLoop(b, func() {
		if err := r.TryPush(bareMsg); err != nil {
			b.Fatal(err)
		}
		if _, err := r.TryPop(buf); err != nil {
			b.Fatal(err)
		}
	})
}

func benchPushPopBare(b *testing.B) {
	r := newBareRef(b)
	buf := make([]byte, bareSlotSize)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	cpuLoop(b, func() {
		if !r.TryPush(bareMsg) {
			b.Fatal("bare ring full")
		}
		if _, ok := r.TryPop(buf); !ok {
			b.Fatal("bare ring empty")
		}
	})
}

func benchClaimAckShmkit(b *testing.B) {
	r := newBareLoopRing(b)
	b.ReportAllocs()
	b.SetBytes(bareMsgLen)
	cpuLoop(b, func() {
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
	})
}
