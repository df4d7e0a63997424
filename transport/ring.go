package transport

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// RingConfig is the geometry of a new ring. Zero fields take defaults.
type RingConfig struct {
	Capacity      uint64 // slots, a power of two (required)
	SlotSize      uint32 // bytes per slot, a multiple of 64 (default 64: 56-byte payload)
	Participants  uint32 // size of the participant table (default 64)
	DeliveryLimit uint32 // deliveries after which a message is poison (default 5, at most 15)
	// MessageIDs gives every message a 64-bit id, kept in the last 8
	// bytes of its slot (so a slot holds 8 bytes less payload: 48 of a
	// 64-byte slot) and kept when a repair requeues the message. Chosen
	// at creation (the file's option bit, docs/format.md); off by
	// default. See Ring.MessageIDs.
	MessageIDs bool
}

func (c RingConfig) geometry() layout.Geometry {
	if c.SlotSize == 0 {
		c.SlotSize = layout.RingDefaultSlotSize
	}
	if c.Participants == 0 {
		c.Participants = layout.RingDefaultPeers
	}
	if c.DeliveryLimit == 0 {
		c.DeliveryLimit = layout.RingDefaultDeliveries
	}
	var opts uint32
	if c.MessageIDs {
		opts |= layout.RingOptMessageIDs
	}
	return layout.RingGeometryWith(c.Capacity, c.SlotSize, c.Participants, c.DeliveryLimit, opts)
}

// SlotSizeFor returns the smallest slot size whose payload holds n bytes
// (without message ids; SlotSizeForIDs with them).
func SlotSizeFor(n int) uint32 {
	s := (uint32(n) + layout.RingSlotWordSize + layout.CacheLine - 1) &^ (layout.CacheLine - 1)
	return max(s, layout.RingMinSlotSize)
}

// SlotSizeForIDs returns the smallest slot size whose payload holds n
// bytes in a ring or deque with message ids (RingConfig.MessageIDs).
func SlotSizeForIDs(n int) uint32 { return SlotSizeFor(n + layout.RingSlotIDSize) }

// Ring is a bounded multi-producer multi-consumer queue of fixed-size slots
// in a mapped file, shared by any number of goroutines and processes. A Ring
// value is one participant: it is registered in the file's participant
// table, and every slot it takes is stamped with that registration, so what
// it leaves behind if its process dies can be found and recovered exactly.
//
// All methods are safe for concurrent use, except Close, which must come
// after every other call on the value has returned.
type Ring struct {
	fileHandle // the mapping, the file id, the participant table (our entry: tab.Self)
	lay        layout.RingLayout
	area       shm.Words // the ring's area: reg.Bytes()[header size:]
	mask       uint64
	// slots is slot 0's address in the mapping (&area[SlotsOff]): slot
	// and payload address slots from it without a bounds check, since
	// a position masked by mask always falls inside the area, which
	// viewRegion checked holds every slot (and which stays mapped, at
	// that size, until Close).
	slots unsafe.Pointer

	tail, head               *atomic.Uint64
	pushed, popped           *atomic.Uint64
	fullHits, emptyHits      *atomic.Uint64
	deferred                 *atomic.Uint64
	burned, correlation      *atomic.Uint64
	claimed, acked, requeued *atomic.Uint64
	poisoned, abandoned      *atomic.Uint64
	repairs                  *atomic.Uint64
	notEmptySeq, notEmptyW   *atomic.Uint32
	notFullSeq, notFullW     *atomic.Uint32

	// inPlaceHook, when not nil, runs in a repair's in-place re-publish
	// between its look at the tail and its CAS (recoverWithoutPush): tests
	// set it on their own handle to put other operations in that window.
	// nil in production; only that slow path reads it.
	inPlaceHook func(slot uint64)
	// detachHook runs in Close between marking the entry dead (leases
	// deferred for want of room) and raising the deferred hint;
	// repairHook at the start of a repair, after the handle (or its
	// repairer copy) holds its entry and before it takes the repair lock.
	// Tests only, like inPlaceHook.
	detachHook, repairHook func()
}

// CreateRing creates a ring file at path (a bare name lives in /dev/shm).
// shm options set the mode and so on. The returned Ring is attached.
func CreateRing(path string, cfg RingConfig, opts ...shm.Option) (*Ring, error) {
	g, err := cfg.validGeometry(path)
	if err != nil {
		return nil, err
	}
	return shm.CreateAs(path, shm.Spec{Kind: layout.KindRing, Geometry: g}, attachRegion, opts...)
}

// OpenRing opens an existing ring and attaches to it (with shm.ReadOnly(),
// it maps the ring without attaching, as OpenRingReadOnly does).
func OpenRing(path string, opts ...shm.Option) (*Ring, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindRing}, func(reg *shm.Region) (*Ring, error) {
		if reg.ReadOnly() {
			return viewRegion(reg)
		}
		return attachRegion(reg)
	}, opts...)
}

// OpenOrCreateRing opens the ring at path, creating it with cfg if it does
// not exist. Racing processes all end up attached to one ring.
func OpenOrCreateRing(path string, cfg RingConfig, opts ...shm.Option) (*Ring, bool, error) {
	g, err := cfg.validGeometry(path)
	if err != nil {
		return nil, false, err
	}
	return shm.OpenOrCreateAs(path, shm.Spec{Kind: layout.KindRing, Geometry: g}, attachRegion, opts...)
}

// OpenRingReadOnly maps a ring read-only without attaching: for inspectors,
// which may Scan and read counters but not push, pop or repair.
func OpenRingReadOnly(path string, opts ...shm.Option) (*Ring, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindRing}, viewRegion, append(opts, shm.ReadOnly())...)
}

// OpenRingForRepair maps a ring read-write without attaching: for tools
// that check and repair a ring without taking a participant entry (which
// a full table may not have). Check, PlanRepair, Scan and counters work;
// Repair runs as the table's repairer entry (see Ring.Repair); push, pop
// and claim return ErrNotAttached.
func OpenRingForRepair(path string, opts ...shm.Option) (*Ring, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindRing}, viewRegion, opts...)
}

func (c RingConfig) validGeometry(path string) (layout.Geometry, error) {
	g := c.geometry()
	if _, err := layout.NewRingLayout(g); err != nil {
		return g, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, path, err)
	}
	return g, nil
}

func viewRegion(reg *shm.Region) (*Ring, error) {
	h := reg.Header()
	lay, err := layout.NewRingLayout(h.Geometry)
	if err != nil { // layout.Decode already validated it; be certain
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, reg.Path(), err)
	}
	r := &Ring{lay: lay, area: reg.Bytes()[h.HeaderSize:], mask: lay.Capacity - 1}
	r.fileHandle = fileHandle{reg: reg, geo: &r.lay.SlotGeometry}
	if uint64(len(r.area)) != lay.BodySize {
		return nil, fmt.Errorf("%w: %s: area is %d bytes, geometry needs %d", ErrCorrupt, reg.Path(), len(r.area), lay.BodySize)
	}
	u64, u32 := r.area.U64, r.area.U32
	if uintptr(unsafe.Pointer(&r.area[0]))%layout.CacheLine != 0 {
		return nil, fmt.Errorf("%w: %s: ring area not cache-line aligned", ErrCorrupt, reg.Path())
	}
	r.slots = unsafe.Pointer(&r.area[lay.SlotsOff])
	r.tail, r.pushed, r.fullHits, r.burned = u64(layout.RingOffTail), u64(layout.RingOffPushed), u64(layout.RingOffFullHits), u64(layout.RingOffBurned)
	r.head, r.popped, r.emptyHits = u64(layout.RingOffHead), u64(layout.RingOffPopped), u64(layout.RingOffEmptyHits)
	r.deferred = u64(layout.RingOffDeferred)
	r.notEmptySeq, r.notEmptyW = u32(layout.RingOffNotEmptySeq), u32(layout.RingOffNotEmptyWait)
	r.notFullSeq, r.notFullW = u32(layout.RingOffNotFullSeq), u32(layout.RingOffNotFullWait)
	r.correlation = u64(layout.RingOffCorrelation)
	r.claimed, r.acked, r.requeued = u64(layout.RingOffClaimed), u64(layout.RingOffAcked), u64(layout.RingOffRequeued)
	r.poisoned, r.abandoned, r.repairs = u64(layout.RingOffPoisoned), u64(layout.RingOffAbandoned), u64(layout.RingOffRepairs)
	r.tab = peers.New(reg, r.area, layout.RingOffParticipants, lay.Participants, u64(layout.RingOffRepairLock))
	r.id, _ = layout.FileID(reg.Bytes()) // a mapped file always holds a full header
	return r, nil
}

func attachRegion(reg *shm.Region) (*Ring, error) {
	r, err := viewRegion(reg)
	if err != nil {
		return nil, err
	}
	if err := r.attach(); err != nil {
		return nil, err
	}
	return r, nil
}

// NextID returns a ring-wide unique 64-bit id (a fetch-add on a counter in
// the file): ids handed out by different processes never collide. The first
// id is 1.
func (r *Ring) NextID() uint64 { return r.correlation.Add(1) }

// MessageIDs reports whether the ring's messages carry ids (created with
// RingConfig.MessageIDs): then a push stamps each message with an id
// (TryPush: its position+1, unique in this file; TryPushID: the caller's),
// which pops (TryPopID), leases (Lease.ID) and Peek report and which a
// repair that requeues the message keeps. With FileID it names a message
// uniquely across re-creations of the file.
func (r *Ring) MessageIDs() bool { return r.lay.MessageIDs }

// FileID returns the file's id (layout.FileID: from its creation time
// and creator), the same as ID: the half of a global message name that a
// message id (Lease.ID) is unique within.
func (r *Ring) FileID() uint64 { return r.id }

// Close releases this participant's leases back to the ring, rolls back
// the loans it still holds (as Abort does: their Data must not be touched
// afterwards), detaches from the participant table and unmaps the file.
// Messages stay in the file.
func (r *Ring) Close() error {
	var err error
	if r.tab.Self != 0 {
		// Guarded: a file truncated under a long-lived handle must not
		// crash its process on the way out.
		_, err = guarded(r.reg, "close", func() (struct{}, error) { return struct{}{}, r.detach() })
	}
	return r.unmap(err)
}

// Counters is a snapshot of the ring's statistics, read without stopping
// anyone (each counter is read atomically; together they are not a
// consistent cut).
type Counters struct {
	Head, Tail uint64
	Pushed     uint64 // messages published
	Popped     uint64 // messages taken by Pop
	Claimed    uint64 // messages leased by Claim
	Acked      uint64 // leases released by Ack
	Requeued   uint64 // messages recovered from dead participants
	Poisoned   uint64 // messages set aside after too many deliveries
	Abandoned  uint64 // half-written slots released: dead producers' (by repairs), aborted loans
	Burned     uint64 // positions producers skipped because the slot held a lease
	FullHits   uint64
	EmptyHits  uint64
	Repairs    uint64
	Deferred   uint64 // messages of dead participants waiting for room to be requeued
	NextID     uint64 // the correlation counter's current value
}

// Depth is the number of positions between head and tail: messages ready
// or being written, plus positions burned past held leases. A push batch
// claims its positions before it moves the tail past them, so Depth leaves
// out claims ahead of the tail (for good, until a repair, if their
// producer died there); consumers may then step the head past such a
// tail, and Depth is 0.
func (c Counters) Depth() uint64 {
	if c.Tail < c.Head {
		return 0
	}
	return c.Tail - c.Head
}

// Counters reads the ring's counters.
func (r *Ring) Counters() Counters {
	return Counters{
		Head: r.head.Load(), Tail: r.tail.Load(),
		Pushed: r.pushed.Load(), Popped: r.popped.Load(),
		Claimed: r.claimed.Load(), Acked: r.acked.Load(),
		Requeued: r.requeued.Load(), Poisoned: r.poisoned.Load(),
		Abandoned: r.abandoned.Load(), Burned: r.burned.Load(),
		FullHits: r.fullHits.Load(), EmptyHits: r.emptyHits.Load(),
		Repairs: r.repairs.Load(), Deferred: r.deferred.Load(), NextID: r.correlation.Load(),
	}
}

// slot returns the address of slot i (of position i: it is masked by the
// capacity, so it is inside the area whatever i is). i is always a local
// value, never an index read from the mapping.
func (r *Ring) slot(i uint64) unsafe.Pointer {
	return unsafe.Add(r.slots, (i&r.mask)*r.lay.SlotSize)
}

// idWord returns the message id of the slot at address s (from slot):
// its last 8 bytes, little-endian (an 8-aligned word: slots are 64-byte
// aligned and sized). Meaningful only in a file with message ids; the
// id is written and read only by whoever holds the slot (as its payload
// is), or copied by Peek and checked stable against the slot word.
func idWord(s unsafe.Pointer, g *layout.SlotGeometry) *[8]byte {
	return (*[8]byte)(unsafe.Add(s, g.IDOff()))
}

// loadID reads the message id of the slot at address s.
func loadID(s unsafe.Pointer, g *layout.SlotGeometry) uint64 {
	return binary.LittleEndian.Uint64(idWord(s, g)[:])
}

// storeID writes the message id of the slot at address s.
func storeID(s unsafe.Pointer, g *layout.SlotGeometry, id uint64) {
	binary.LittleEndian.PutUint64(idWord(s, g)[:], id)
}

// leaseID is the id a lease of position i reports: its slot's id, 0 in a
// file without ids.
func (r *Ring) leaseID(i uint64) uint64 {
	if !r.lay.MessageIDs {
		return 0
	}
	return loadID(r.slot(i), &r.lay.SlotGeometry)
}

// slotWord returns the atomic word of slot i (see slot).
func (r *Ring) slotWord(i uint64) *atomic.Uint64 { return (*atomic.Uint64)(r.slot(i)) }

// payload returns slot i's payload bytes [0, n), with room up to
// MaxPayload. Callers validate n against MaxPayload before use (a length
// read from the mapping, as take does); the slice expression checks it
// again, one compare, so that a caller's mistake cannot reach the next
// slot.
func (r *Ring) payload(i uint64, n uint32) []byte {
	return payloadAt(r.slot(i), r.lay.PayloadMax(), n)
}

// payloadAt is payload of the slot at address s (from slot), whose
// payloads hold max bytes.
func payloadAt(s unsafe.Pointer, max uint64, n uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(s, layout.RingSlotWordSize)), max)[:n]
}

// corrupt wraps a bad slot word as an error naming the file and slot.
func (r *Ring) corrupt(i uint64, raw uint64, err error) error {
	return fmt.Errorf("%w: %s: slot %d word %#016x: %v", ErrCorrupt, r.reg.Path(), i&r.mask, raw, err)
}
