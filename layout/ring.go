package layout

import (
	"errors"
	"fmt"
	"math/bits"
)

// Ring format (kind 2). The ring's area follows the common header:
//
//	area offset
//	   0 +--------------------------------------------------------------+
//	     | tail | pushed | full_hits | burned        (producers' line)  |
//	  64 | head | popped | empty_hits | deferred     (consumers' line)  |
//	 128 | not_empty_seq | not_empty_waiters         (futex line)       |
//	 192 | not_full_seq  | not_full_waiters          (futex line)       |
//	 256 | correlation                                                  |
//	 320 | claimed | acked | requeued | poisoned | abandoned | repairs  |
//	 384 | repair_lock                                                  |
//	 448 +--------------------------------------------------------------+
//	     | participant[0..P]: ctl | start | boot | attached | pid_ns    |
//	     |   (64 B each; entry P is the repairer entry, see PeerEntries) |
//	     +--------------------------------------------------------------+
//	     | slot[0..capacity): word (8 B) | payload (slot_size-8 B)      |
//	     |   with message ids: word (8 B) | payload (slot_size-16 B)    |
//	     |                     | id (8 B, the slot's last 8 bytes)      |
//	     +--------------------------------------------------------------+
//
// Every control word a different role writes sits on its own cache line.
// Geometry: Capacity is the slot count (a power of two), SlotSize the bytes
// per slot (a multiple of 64), Param0 the participant table's size,
// Param1 the delivery limit after which a message is set aside as poison
// and Param2 the options, chosen at creation: bit 0 (RingOptMessageIDs)
// gives every slot a message id, a uint64 in the slot's last 8 bytes
// written with the payload (the payload holds 8 bytes less); the other
// bits are reserved and a file that sets one is refused. These constants
// are part of the format.
const (
	RingOffTail           = 0
	RingOffPushed         = 8
	RingOffFullHits       = 16
	RingOffBurned         = 24
	RingOffHead           = 64
	RingOffPopped         = 72
	RingOffEmptyHits      = 80
	RingOffDeferred       = 88
	RingOffNotEmptySeq    = 128
	RingOffNotEmptyWait   = 132
	RingOffNotFullSeq     = 192
	RingOffNotFullWait    = 196
	RingOffCorrelation    = 256
	RingOffClaimed        = 320
	RingOffAcked          = 328
	RingOffRequeued       = 336
	RingOffPoisoned       = 344
	RingOffAbandoned      = 352
	RingOffRepairs        = 360
	RingOffRepairLock     = 384
	RingOffParticipants   = 448
	RingParticipantSize   = PeerEntrySize
	RingSlotWordSize      = 8
	RingMinSlotSize       = 64
	RingMaxSlotSize       = 1 << 20
	RingMaxCapacity       = 1 << 24
	RingMaxParticipants   = 1022 // owner field is 10 bits, 0 meaning none, 1023 the repairer entry at most
	RingMaxDeliveryLimit  = 15   // delivery count field is 4 bits
	RingDefaultSlotSize   = 64
	RingDefaultPeers      = 64
	RingDefaultDeliveries = 5

	// RingOptMessageIDs is option bit 0 (Param2) of a ring or a deque:
	// each slot ends with its message's id (RingSlotIDSize bytes, uint64
	// little-endian), which moves with the message when a repair requeues
	// it. RingKnownOptions are the option bits this format defines.
	RingOptMessageIDs uint32 = 1 << 0
	RingKnownOptions         = RingOptMessageIDs
	RingSlotIDSize           = 8
)

// RingGeometry returns the geometry of a ring.
func RingGeometry(capacity uint64, slotSize, participants, deliveryLimit uint32) Geometry {
	return Geometry{Capacity: capacity, SlotSize: slotSize, Params: [3]uint32{participants, deliveryLimit}}
}

// SlotGeometry is what a ring's and a deque's layouts share: a validated
// geometry of slots and participants with the derived offsets, relative to
// the kind's area (add the header size for file offsets). Slot words are
// validated against it (SlotWord.Validate).
type SlotGeometry struct {
	Capacity      uint64
	CapShift      uint // log2(Capacity)
	SlotSize      uint64
	Participants  uint64 // entries processes attach to
	Entries       uint64 // Participants + the repairer entry (PeerEntries)
	DeliveryLimit uint32
	SlotsOff      uint64
	BodySize      uint64
	// MessageIDs says whether the slots carry message ids (option
	// RingOptMessageIDs); IDSize is then RingSlotIDSize, else 0: the
	// bytes at the end of each slot that the id takes from the payload.
	MessageIDs bool
	IDSize     uint64
	// AllowReturned says whether SlotReturned is a valid slot state: true
	// for a deque's slots (NewDequeLayout), false for a ring's
	// (NewRingLayout), whose returned slot is corrupt.
	AllowReturned bool
}

// RingLayout is a validated ring geometry with its derived offsets.
type RingLayout struct {
	SlotGeometry
}

// PayloadMax is the largest message a slot holds.
func (l *SlotGeometry) PayloadMax() uint64 { return l.SlotSize - RingSlotWordSize - l.IDSize }

// IDOff is the offset of the message id inside a slot (its last
// RingSlotIDSize bytes); meaningful only when MessageIDs is set.
func (l *SlotGeometry) IDOff() uint64 { return l.SlotSize - RingSlotIDSize }

// SlotOff is the area offset of slot i's word. i must be < Capacity.
func (l *SlotGeometry) SlotOff(i uint64) uint64 { return l.SlotsOff + i*l.SlotSize }

// ParticipantOff is the area offset of participant entry i (rings and
// deques keep the table at the same offset).
func (l *SlotGeometry) ParticipantOff(i uint64) uint64 {
	return RingOffParticipants + i*RingParticipantSize
}

// NewRingLayout validates a ring geometry and derives its layout.
func NewRingLayout(g Geometry) (RingLayout, error) {
	sg, err := newSlotGeometry(g)
	return RingLayout{SlotGeometry: sg}, err
}

// newSlotGeometry validates the geometry rings and deques share and
// derives its offsets.
func newSlotGeometry(g Geometry) (SlotGeometry, error) {
	l := SlotGeometry{Capacity: g.Capacity, SlotSize: uint64(g.SlotSize), Participants: uint64(g.Params[0]), DeliveryLimit: g.Params[1]}
	switch {
	case g.Capacity < 2 || g.Capacity > RingMaxCapacity || g.Capacity&(g.Capacity-1) != 0:
		return l, fmt.Errorf("capacity %d must be a power of two in [2, %d]", g.Capacity, RingMaxCapacity)
	case g.SlotSize < RingMinSlotSize || g.SlotSize > RingMaxSlotSize || g.SlotSize%CacheLine != 0:
		return l, fmt.Errorf("slot size %d must be a multiple of 64 in [64, %d]", g.SlotSize, RingMaxSlotSize)
	case l.Participants < 1 || l.Participants > RingMaxParticipants:
		return l, fmt.Errorf("participant table size %d must be in [1, %d]", l.Participants, RingMaxParticipants)
	case l.DeliveryLimit < 1 || l.DeliveryLimit > RingMaxDeliveryLimit:
		return l, fmt.Errorf("delivery limit %d must be in [1, %d]", l.DeliveryLimit, RingMaxDeliveryLimit)
	case g.Params[2]&^RingKnownOptions != 0:
		return l, fmt.Errorf("options %#x set unknown bits %#x (this format defines %#x)", g.Params[2], g.Params[2]&^RingKnownOptions, RingKnownOptions)
	}
	if g.Params[2]&RingOptMessageIDs != 0 {
		l.MessageIDs, l.IDSize = true, RingSlotIDSize
	}
	l.CapShift = uint(bits.TrailingZeros64(g.Capacity))
	l.Entries = PeerEntries(l.Participants)
	table := l.Entries * RingParticipantSize
	l.SlotsOff = alignUp(RingOffParticipants+table, CacheLine)
	slots, err := checkedProduct(l.Capacity, l.SlotSize)
	if err != nil {
		return l, err
	}
	if l.BodySize, err = checkedSum(l.SlotsOff, slots); err != nil {
		return l, err
	}
	return l, nil
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }

func init() {
	register(&Spec{
		Kind:         KindRing,
		ParamNames:   [3]string{"participants", "delivery_limit", "options"},
		UsesSlotSize: true,
		Body: func(g Geometry) (uint64, Map, error) {
			l, err := NewRingLayout(g)
			if err != nil {
				return 0, Map{}, err
			}
			return l.BodySize, l.fieldMap(), nil
		},
	})
}

func (l *RingLayout) fieldMap() Map {
	u64 := func(name string, off uint64, meaning string) Field { return Field{name, off, 8, meaning} }
	u32 := func(name string, off uint64, meaning string) Field { return Field{name, off, 4, meaning} }
	m := Map{Fields: []Field{
		u64("ring.tail", RingOffTail, "next position producers take"),
		u64("ring.pushed", RingOffPushed, "messages published"),
		u64("ring.full_hits", RingOffFullHits, "pushes that found the ring full"),
		u64("ring.burned", RingOffBurned, "positions skipped because their slot still held a lease"),
		u64("ring.head", RingOffHead, "next position consumers take"),
		u64("ring.popped", RingOffPopped, "messages taken by plain pops"),
		u64("ring.empty_hits", RingOffEmptyHits, "pops and claims that found the ring empty"),
		u64("ring.deferred", RingOffDeferred, "messages of dead participants waiting for room to be requeued"),
		u32("ring.not_empty_seq", RingOffNotEmptySeq, "futex word consumers sleep on"),
		u32("ring.not_empty_waiters", RingOffNotEmptyWait, "non-zero while a consumer may sleep"),
		u32("ring.not_full_seq", RingOffNotFullSeq, "futex word producers sleep on"),
		u32("ring.not_full_waiters", RingOffNotFullWait, "non-zero while a producer may sleep"),
		u64("ring.correlation", RingOffCorrelation, "ring-wide id counter (fetch-add)"),
		u64("ring.claimed", RingOffClaimed, "messages leased by Claim"),
		u64("ring.acked", RingOffAcked, "leases released by Ack"),
		u64("ring.requeued", RingOffRequeued, "messages recovered from dead owners"),
		u64("ring.poisoned", RingOffPoisoned, "messages set aside after too many deliveries"),
		u64("ring.abandoned", RingOffAbandoned, "half-written slots released: dead producers' (by repairs) and aborted loans"),
		u64("ring.repairs", RingOffRepairs, "repair passes that changed something"),
		u64("ring.repair_lock", RingOffRepairLock, "repairer, a role word: participant index+1 (bits 0-15), generation (16-39); 0 when free"),
	}}
	m.Areas = []Area{
		PeerArea(RingOffParticipants, l.Entries),
		l.slotArea(),
	}
	return m
}

// RingGeometryWith is RingGeometry with options (Param2: RingOptMessageIDs).
func RingGeometryWith(capacity uint64, slotSize, participants, deliveryLimit, options uint32) Geometry {
	g := RingGeometry(capacity, slotSize, participants, deliveryLimit)
	g.Params[2] = options
	return g
}

// slotArea describes the slots of a ring or deque.
func (l *SlotGeometry) slotArea() Area {
	fields := []Field{
		{"word", 0, 8, "state (bits 0-2), deliveries (3-6), owner (7-16), length (17-36), lap (37-63)"},
		{"payload", 8, l.PayloadMax(), "message bytes"},
	}
	if l.MessageIDs {
		fields = append(fields, Field{"id", l.IDOff(), RingSlotIDSize, "message id (u64), written with the payload, kept by a requeue"})
	}
	return Area{Name: "slot", Offset: l.SlotsOff, Stride: l.SlotSize, Count: l.Capacity, Fields: fields}
}

// SlotState is the state field of a slot word.
type SlotState uint8

// Slot states. These values are part of the format.
const (
	SlotFree     SlotState = 0 // empty; a producer at this lap may take it
	SlotWriting  SlotState = 1 // a producer (owner) is writing the payload
	SlotReady    SlotState = 2 // a published message for this lap
	SlotReading  SlotState = 3 // a plain consumer (owner) is copying it out
	SlotLeased   SlotState = 4 // claimed by owner until Ack; lap moves on as producers pass
	SlotPoisoned SlotState = 5 // set aside after too many deliveries; lap moves on likewise
	SlotReturned SlotState = 6 // deque only: a message handed back below the top, to be taken again
)

var slotStateNames = [...]string{"free", "writing", "ready", "reading", "leased", "poisoned", "returned"}

func (s SlotState) String() string {
	if int(s) < len(slotStateNames) {
		return slotStateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Valid reports whether s is a defined state.
func (s SlotState) Valid() bool { return int(s) < len(slotStateNames) }

// Slot word fields. These constants are part of the format.
const (
	slotStateBits = 3
	slotDelivBits = 4
	slotOwnerBits = 10
	slotLenBits   = 20
	SlotLapBits   = 27

	slotDelivShift = slotStateBits
	slotOwnerShift = slotDelivShift + slotDelivBits
	slotLenShift   = slotOwnerShift + slotOwnerBits
	slotLapShift   = slotLenShift + slotLenBits

	// SlotLapMask masks a lap number to the bits a slot word keeps.
	SlotLapMask = 1<<SlotLapBits - 1
)

// SlotWord is the decoded 8-byte word at the start of every ring slot. One
// atomic word holds all of it, so a single CAS changes state and owner
// together: the owner of a slot is never anonymous.
type SlotWord struct {
	State      SlotState
	Deliveries uint8  // times the message has been handed out
	Owner      uint16 // participant index + 1; 0 means none
	Length     uint32 // payload bytes
	Lap        uint32 // position / capacity, modulo 2^SlotLapBits
}

// Pack encodes w. Fields wider than their bit widths are truncated; callers
// pass validated values.
func (w SlotWord) Pack() uint64 {
	return uint64(w.State)&(1<<slotStateBits-1) |
		uint64(w.Deliveries)&(1<<slotDelivBits-1)<<slotDelivShift |
		uint64(w.Owner)&(1<<slotOwnerBits-1)<<slotOwnerShift |
		uint64(w.Length)&(1<<slotLenBits-1)<<slotLenShift |
		uint64(w.Lap)&SlotLapMask<<slotLapShift
}

// UnpackSlot decodes a slot word. It never fails; Validate says whether the
// result makes sense for a given ring.
func UnpackSlot(v uint64) SlotWord {
	return SlotWord{
		State:      SlotState(v & (1<<slotStateBits - 1)),
		Deliveries: uint8(v >> slotDelivShift & (1<<slotDelivBits - 1)),
		Owner:      uint16(v >> slotOwnerShift & (1<<slotOwnerBits - 1)),
		Length:     uint32(v >> slotLenShift & (1<<slotLenBits - 1)),
		Lap:        uint32(v >> slotLapShift & SlotLapMask),
	}
}

// ErrSlotCorrupt marks a slot word that no ring operation could have written.
var ErrSlotCorrupt = errors.New("layout: corrupt slot word")

// Validate checks a decoded slot word against a ring's or deque's
// geometry: a state that exists (SlotReturned only where l.AllowReturned),
// a length that fits the slot, an owner inside the participant table
// exactly when the state has one.
func (w SlotWord) Validate(l *SlotGeometry) error {
	if !w.State.Valid() || (w.State == SlotReturned && !l.AllowReturned) {
		return fmt.Errorf("%w: state %d", ErrSlotCorrupt, w.State)
	}
	if uint64(w.Length) > l.PayloadMax() {
		return fmt.Errorf("%w: length %d exceeds payload size %d", ErrSlotCorrupt, w.Length, l.PayloadMax())
	}
	owned := w.State == SlotWriting || w.State == SlotReading || w.State == SlotLeased
	if owned && (w.Owner == 0 || uint64(w.Owner) > l.Entries) {
		return fmt.Errorf("%w: %s slot with owner %d outside the table of %d entries", ErrSlotCorrupt, w.State, w.Owner, l.Entries)
	}
	if !owned && w.Owner != 0 {
		return fmt.Errorf("%w: %s slot with owner %d", ErrSlotCorrupt, w.State, w.Owner)
	}
	if w.State == SlotFree && (w.Length != 0 || w.Deliveries != 0) {
		return fmt.Errorf("%w: free slot with length %d, deliveries %d", ErrSlotCorrupt, w.Length, w.Deliveries)
	}
	return nil
}

// LapOf returns the lap of a position, as slot words store it.
func (l *SlotGeometry) LapOf(pos uint64) uint32 { return uint32(pos>>l.CapShift) & SlotLapMask }

// LapDiff returns a-b as a signed distance in laps, modulo 2^SlotLapBits:
// laps in a slot word are only ever a few laps from any live position.
func LapDiff(a, b uint32) int32 {
	d := (a - b) & SlotLapMask
	return int32(d<<(32-SlotLapBits)) >> (32 - SlotLapBits)
}

// PeerEntrySize is the size of one participant table entry (ring, deque and
// hash map files keep such a table): ctl, start, boot, attached_ns,
// pid_ns, and reserved bytes. Each entry fills a cache line, and its bytes
// are also the range its holder keeps locked (an open-file-description
// lock: shm.Region.LockEntry) for as long as it holds the entry, which is
// the proof of life every judge asks for. These constants are part of the
// format.
const (
	PeerEntrySize   = 64
	PeerOffCtl      = 0
	PeerOffStart    = 8
	PeerOffBoot     = 16
	PeerOffAttached = 24
	PeerOffPidNS    = 32
)

// PeerEntries is the number of entries of a participant table for n
// participants: n entries that processes attach to, and after them entry
// n, the repairer entry. Nobody attaches to the repairer entry: a process
// that repairs without an entry of its own (a tool, or an attach that
// found the table full of dead processes' entries and recovers them)
// holds it, locked like any entry, while it holds the repair lock, and
// stamps what it writes (a requeued message's copy) with it. Messages a
// repair could not requeue for want of room may be parked on it (it is
// then left marked dead, and the next repair finishes it).
func PeerEntries(n uint64) uint64 { return n + 1 }

// PeerArea describes a participant table of n entries (PeerEntries of the
// participant count) at off.
func PeerArea(off, n uint64) Area {
	return Area{Name: "participant", Offset: off, Stride: PeerEntrySize, Count: n, Fields: []Field{
		{"ctl", PeerOffCtl, 8, "state (bits 0-7), generation (8-31), pid (32-63)"},
		{"start", PeerOffStart, 8, "process start time, clock ticks since boot"},
		{"boot", PeerOffBoot, 8, "first 8 bytes of the boot id"},
		{"attached_ns", PeerOffAttached, 8, "attach time, Unix nanoseconds"},
		{"pid_ns", PeerOffPidNS, 8, "inode of the holder's pid namespace (/proc/self/ns/pid), 0 if unknown"},
		{"reserved", 40, 24, "zero"},
	}}
}

// Participant entry control word: state, generation and pid in one atomic
// word. These constants are part of the format.
const (
	PeerFree     uint8 = 0 // unused
	PeerClaiming uint8 = 1 // being taken; start and boot not yet written
	PeerActive   uint8 = 2 // attached
	PeerDead     uint8 = 3 // proven dead; its slots are being repaired under the repair lock
)

var peerStateNames = [...]string{"free", "claiming", "active", "dead"}

// PeerStateName names a participant state.
func PeerStateName(s uint8) string {
	if int(s) < len(peerStateNames) {
		return peerStateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// PeerCtl is a decoded participant control word.
type PeerCtl struct {
	State uint8
	Gen   uint32 // 24 bits: bumped each time the entry is freed
	PID   uint32
}

// Pack encodes c.
func (c PeerCtl) Pack() uint64 {
	return uint64(c.State) | uint64(c.Gen&0xffffff)<<8 | uint64(c.PID)<<32
}

// UnpackPeer decodes a participant control word.
func UnpackPeer(v uint64) PeerCtl {
	return PeerCtl{State: uint8(v), Gen: uint32(v>>8) & 0xffffff, PID: uint32(v >> 32)}
}
