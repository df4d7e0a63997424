// Package bareref is a reference ring for measurements only: a bounded
// multi-producer multi-consumer queue after Dmitry Vyukov's design, laid
// over memory the caller maps and shares between processes. It has no crash
// safety at all: a process killed between taking a position and publishing
// it wedges the ring for good, nothing records who holds what, and nothing
// checks the memory it is given. Do not use it to carry data.
//
// It exists so that passbench and the transport benchmarks can measure
// shmkit's ring against the fastest ring of the same shape in the same loop
// on the same machine, and so show what crash safety costs there (issue 17,
// docs/bench.md "The bare loop").
//
// Layout of the memory, all words little-endian and 8-byte aligned:
//
//	0    tail (next position to push), alone on its cache line
//	64   head (next position to pop), alone on its cache line
//	128  slot 0: 8-byte sequence word, then the payload
//	...  slot i at 128 + i*slotSize
//
// A slot's sequence word holds seq<<8 | length. A slot at index i starts
// with seq i; a push of position p waits for seq p, writes the payload and
// stores seq p+1; a pop of position p waits for seq p+1, copies the
// payload and stores seq p+slots, which frees the slot for the next lap.
package bareref

import (
	"errors"
	"sync/atomic"
	"unsafe"
)

const (
	cacheLine  = 64
	offTail    = 0
	offHead    = cacheLine
	offSlots   = 2 * cacheLine
	wordSize   = 8
	lenBits    = 8
	maxPayload = 1<<lenBits - 1
)

// ErrGeometry is returned for a slot count that is not a power of two, a
// slot size that is not a multiple of 8 in [16, 256], or memory too small.
var ErrGeometry = errors.New("bareref: bad geometry")

// Size returns the bytes of memory a ring of this geometry needs.
func Size(slots, slotSize int) int { return offSlots + slots*slotSize }

// Ring is one process's view of a reference ring.
type Ring struct {
	mem      []byte
	tail     *atomic.Uint64
	head     *atomic.Uint64
	mask     uint64
	slots    uint64
	slotSize uint64
	payload  uint64
}

// Init lays out an empty ring in mem (which must be zeroed or unused by
// anyone) and returns a view of it.
func Init(mem []byte, slots, slotSize int) (*Ring, error) {
	r, err := view(mem, slots, slotSize)
	if err != nil {
		return nil, err
	}
	r.tail.Store(0)
	r.head.Store(0)
	for i := uint64(0); i < r.slots; i++ {
		r.seq(i).Store(i << lenBits)
	}
	return r, nil
}

// Attach returns a view of a ring another process laid out with Init and
// the same geometry.
func Attach(mem []byte, slots, slotSize int) (*Ring, error) {
	return view(mem, slots, slotSize)
}

func view(mem []byte, slots, slotSize int) (*Ring, error) {
	if slots < 2 || slots&(slots-1) != 0 || slotSize%wordSize != 0 ||
		slotSize < 2*wordSize || slotSize-wordSize > maxPayload || len(mem) < Size(slots, slotSize) ||
		uintptr(unsafe.Pointer(&mem[0]))%cacheLine != 0 {
		return nil, ErrGeometry
	}
	return &Ring{
		mem:      mem,
		tail:     (*atomic.Uint64)(unsafe.Pointer(&mem[offTail])),
		head:     (*atomic.Uint64)(unsafe.Pointer(&mem[offHead])),
		mask:     uint64(slots - 1),
		slots:    uint64(slots),
		slotSize: uint64(slotSize),
		payload:  uint64(slotSize - wordSize),
	}, nil
}

// MaxPayload is the largest message a slot holds.
func (r *Ring) MaxPayload() int { return int(r.payload) }

func (r *Ring) seq(i uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&r.mem[offSlots+i*r.slotSize]))
}

// TryPush publishes msg, or returns false when the ring is full. A message
// longer than MaxPayload is cut to it (this is a measuring tool).
func (r *Ring) TryPush(msg []byte) bool {
	for {
		p := r.tail.Load()
		i := p & r.mask
		w := r.seq(i)
		s := w.Load() >> lenBits
		switch {
		case s == p:
			if !r.tail.CompareAndSwap(p, p+1) {
				continue
			}
			off := offSlots + i*r.slotSize + wordSize
			n := uint64(copy(r.mem[off:off+r.payload], msg))
			w.Store((p+1)<<lenBits | n)
			return true
		case int64(s-p) < 0:
			return false
		}
		// Another producer took p: look again.
	}
}

// TryPop copies the oldest message into buf and returns its length, or
// returns false when the ring is empty.
func (r *Ring) TryPop(buf []byte) (int, bool) {
	for {
		p := r.head.Load()
		i := p & r.mask
		w := r.seq(i)
		v := w.Load()
		s := v >> lenBits
		switch {
		case s == p+1:
			if !r.head.CompareAndSwap(p, p+1) {
				continue
			}
			off := offSlots + i*r.slotSize + wordSize
			n := copy(buf, r.mem[off:off+(v&maxPayload)])
			w.Store((p + r.slots) << lenBits)
			return n, true
		case int64(s-(p+1)) < 0:
			return 0, false
		}
	}
}

// TryPushBatch publishes as many of msgs, in order, as fit in the free
// positions at the tail, with one tail CAS for all of them, and returns how
// many it published (0 when the ring is full). It is the reference for a
// batch push: what a batch costs when a run of positions is taken in one
// atomic step and each slot is written with plain stores.
func (r *Ring) TryPushBatch(msgs [][]byte) int {
	for {
		p := r.tail.Load()
		k := uint64(0)
		for most := min(uint64(len(msgs)), r.slots); k < most; k++ {
			if r.seq((p+k)&r.mask).Load()>>lenBits != p+k {
				break
			}
		}
		if k == 0 {
			if int64(r.seq(p&r.mask).Load()>>lenBits-p) < 0 {
				return 0
			}
			continue // another producer took p: look again
		}
		if !r.tail.CompareAndSwap(p, p+k) {
			continue
		}
		for j := uint64(0); j < k; j++ {
			i := (p + j) & r.mask
			off := offSlots + i*r.slotSize + wordSize
			n := uint64(copy(r.mem[off:off+r.payload], msgs[j]))
			r.seq(i).Store((p+j+1)<<lenBits | n)
		}
		return int(k)
	}
}

// TryPopBatch copies as many of the oldest messages as are published (up
// to len(bufs)) into bufs, with one head CAS for all of them, records
// their lengths in lens, and returns how many (0 when the ring is empty).
func (r *Ring) TryPopBatch(bufs [][]byte, lens []int) int {
	for {
		p := r.head.Load()
		k := uint64(0)
		for most := min(uint64(len(bufs)), uint64(len(lens)), r.slots); k < most; k++ {
			if r.seq((p+k)&r.mask).Load()>>lenBits != p+k+1 {
				break
			}
		}
		if k == 0 {
			if int64(r.seq(p&r.mask).Load()>>lenBits-(p+1)) < 0 {
				return 0
			}
			continue
		}
		if !r.head.CompareAndSwap(p, p+k) {
			continue
		}
		for j := uint64(0); j < k; j++ {
			i := (p + j) & r.mask
			w := r.seq(i)
			off := offSlots + i*r.slotSize + wordSize
			lens[j] = copy(bufs[j], r.mem[off:off+(w.Load()&maxPayload)])
			w.Store((p + j + r.slots) << lenBits)
		}
		return int(k)
	}
}

// The stamped calls are the reference ring with the locked instructions
// shmkit's ring makes per message and the reference does not, and nothing
// else of shmkit's: a push claims its slot with a CAS on the slot word
// before the tail CAS (shmkit stamps the owner there), a pop likewise
// before the head CAS, and each adds to a counter on its side's line
// (shmkit's pushed and popped, whose adds are also the barrier before the
// waiter-flag load). No owner, no validation, no crash points: what they
// measure is the floor of a slot-word design with crash safety, in the
// same loop as the reference. Do not mix them with the unstamped calls on
// one ring.
const busy = 1 << 63

const (
	offPushed = offTail + wordSize
	offPopped = offHead + wordSize
)

func (r *Ring) counter(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&r.mem[off]))
}

// TryPushStamped is TryPush with shmkit's locked instructions.
func (r *Ring) TryPushStamped(msg []byte) bool {
	for {
		p := r.tail.Load()
		i := p & r.mask
		w := r.seq(i)
		v := w.Load()
		s := (v &^ busy) >> lenBits
		switch {
		case s == p && v&busy != 0:
			r.tail.CompareAndSwap(p, p+1) // claimed, tail not yet moved: help it
		case s == p:
			if !w.CompareAndSwap(v, v|busy) {
				continue
			}
			r.tail.CompareAndSwap(p, p+1)
			off := offSlots + i*r.slotSize + wordSize
			n := uint64(copy(r.mem[off:off+r.payload], msg))
			w.Store((p+1)<<lenBits | n)
			r.counter(offPushed).Add(1)
			return true
		case int64(s-p) < 0:
			return false
		}
	}
}

// TryPopStamped is TryPop with shmkit's locked instructions.
func (r *Ring) TryPopStamped(buf []byte) (int, bool) {
	for {
		p := r.head.Load()
		i := p & r.mask
		w := r.seq(i)
		v := w.Load()
		s := (v &^ busy) >> lenBits
		switch {
		case s == p+1 && v&busy != 0:
			r.head.CompareAndSwap(p, p+1) // taken, head not yet moved: help it
		case s == p+1:
			if !w.CompareAndSwap(v, v|busy) {
				continue
			}
			r.head.CompareAndSwap(p, p+1)
			off := offSlots + i*r.slotSize + wordSize
			n := copy(buf, r.mem[off:off+(v&maxPayload)])
			w.Store((p + r.slots) << lenBits)
			r.counter(offPopped).Add(1)
			return n, true
		case int64(s-(p+1)) < 0:
			return 0, false
		}
	}
}
