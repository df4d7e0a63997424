package transport

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// DequeConfig is the geometry of a new deque; it follows the ring's rules.
type DequeConfig = RingConfig

// Deque is a work-stealing deque of fixed-size slots in a mapped file: one
// owner process pushes and pops at the bottom (newest first), any number of
// thieves, in any processes, steal from the top (oldest first). It is the
// transport for one producer feeding many consumers: the producer keeps
// its freshest work and idle consumers take the oldest.
//
// Like the ring it is crash-safe: every slot an operation takes is stamped
// with the participant taking it, so what a dead process leaves behind is
// found and recovered on proof of death (Scan, Repair). A dead thief's
// message is handed back (returned) and taken again; a dead owner's
// half-done push or pop is rolled back, and its messages stay in the file
// for a new owner (Adopt) or for thieves.
//
// A Deque value is one participant. The owner role belongs to one handle:
// the creator, or whoever adopts a deque whose owner closed it or is proven
// dead. Owner operations from several goroutines of that handle are
// serialized by a mutex; steals are lock-free. What is not a deque: a
// multi-producer queue (use the Ring) or a map (hashmap.Map).
//
// All methods are safe for concurrent use, except Close, which must come
// after every other call on the value has returned.
type Deque struct {
	fileHandle // the mapping, the file id, the participant table (our entry: tab.Self)
	lay        layout.DequeLayout
	area       shm.Words
	mask       uint64

	bottom, pushed, fullHits, ownerPopped  *atomic.Uint64
	nextID                                 *atomic.Uint64 // message ids only: the last id a push took
	top, stolen, emptyHits                 *atomic.Uint64
	correlation, claimed, acked, returned  *atomic.Uint64
	poisoned, abandoned, repairs, adopted  *atomic.Uint64
	rolledBack, ownerWord, pending, burned *atomic.Uint64
	notEmptySeq, notEmptyW                 *atomic.Uint32
	notFullSeq, notFullW                   *atomic.Uint32
	ownerMu                                sync.Mutex // serializes this handle's owner operations
	topSeen                                uint64     // the owner's last look at top (under ownerMu): re-read only when the deque looks full
	owner                                  atomic.Bool
}

// CreateDeque creates a deque file at path (a bare name lives in /dev/shm).
// The returned Deque is attached and is the deque's owner.
func CreateDeque(path string, cfg DequeConfig, opts ...shm.Option) (*Deque, error) {
	g, err := cfg.validGeometry(path)
	if err != nil {
		return nil, err
	}
	return shm.CreateAs(path, shm.Spec{Kind: layout.KindDeque, Geometry: g}, func(reg *shm.Region) (*Deque, error) {
		d, err := attachDeque(reg)
		if err != nil {
			return nil, err
		}
		if !d.tab.TakeRole(d.ownerWord) {
			d.Close()
			return nil, fmt.Errorf("%w: %s: a new deque already has an owner", ErrCorrupt, reg.Path())
		}
		d.owner.Store(true)
		return d, nil
	}, opts...)
}

// OpenDeque opens an existing deque and attaches to it as a thief (call
// Adopt to become its owner). With shm.ReadOnly() it maps the deque without
// attaching, as OpenDequeReadOnly does.
func OpenDeque(path string, opts ...shm.Option) (*Deque, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindDeque}, func(reg *shm.Region) (*Deque, error) {
		if reg.ReadOnly() {
			return viewDeque(reg)
		}
		return attachDeque(reg)
	}, opts...)
}

// OpenOrCreateDeque opens the deque at path, creating it with cfg if it does
// not exist. The creator is the owner; a process that opened it is a thief
// until it calls Adopt.
func OpenOrCreateDeque(path string, cfg DequeConfig, opts ...shm.Option) (*Deque, bool, error) {
	g, err := cfg.validGeometry(path)
	if err != nil {
		return nil, false, err
	}
	d, created, err := shm.OpenOrCreateAs(path, shm.Spec{Kind: layout.KindDeque, Geometry: g}, attachDeque, opts...)
	if err != nil || !created {
		return d, created, err
	}
	if !d.tab.TakeRole(d.ownerWord) {
		d.Close()
		return nil, false, fmt.Errorf("%w: %s: a new deque already has an owner", ErrCorrupt, path)
	}
	d.owner.Store(true)
	return d, true, nil
}

// OpenDequeForRepair maps a deque read-write without attaching: for
// tools that check and repair a deque without taking a participant entry
// (which a full table may not have). Check, PlanRepair, Scan and counters
// work; Repair runs as the table's repairer entry (see Deque.Repair);
// everything else returns ErrNotAttached.
func OpenDequeForRepair(path string, opts ...shm.Option) (*Deque, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindDeque}, viewDeque, opts...)
}

// OpenDequeReadOnly maps a deque read-only without attaching: for
// inspectors, which may Scan and read counters.
func OpenDequeReadOnly(path string, opts ...shm.Option) (*Deque, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindDeque}, viewDeque, append(opts, shm.ReadOnly())...)
}

func viewDeque(reg *shm.Region) (*Deque, error) {
	h := reg.Header()
	lay, err := layout.NewDequeLayout(h.Geometry)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, reg.Path(), err)
	}
	d := &Deque{lay: lay, area: reg.Bytes()[h.HeaderSize:], mask: lay.Capacity - 1}
	d.fileHandle = fileHandle{reg: reg, geo: &d.lay.SlotGeometry}
	if uint64(len(d.area)) != lay.BodySize {
		return nil, fmt.Errorf("%w: %s: area is %d bytes, geometry needs %d", ErrCorrupt, reg.Path(), len(d.area), lay.BodySize)
	}
	if uintptr(unsafe.Pointer(&d.area[0]))%layout.CacheLine != 0 {
		return nil, fmt.Errorf("%w: %s: deque area not cache-line aligned", ErrCorrupt, reg.Path())
	}
	u64, u32 := d.area.U64, d.area.U32
	d.bottom, d.pushed, d.fullHits, d.ownerPopped = u64(layout.DequeOffBottom), u64(layout.DequeOffPushed), u64(layout.DequeOffFullHits), u64(layout.DequeOffOwnerPopped)
	d.top, d.stolen, d.emptyHits = u64(layout.DequeOffTop), u64(layout.DequeOffStolen), u64(layout.DequeOffEmptyHits)
	d.correlation, d.claimed, d.acked, d.returned = u64(layout.DequeOffCorrelation), u64(layout.DequeOffClaimed), u64(layout.DequeOffAcked), u64(layout.DequeOffReturned)
	d.poisoned, d.abandoned, d.repairs, d.adopted = u64(layout.DequeOffPoisoned), u64(layout.DequeOffAbandoned), u64(layout.DequeOffRepairs), u64(layout.DequeOffAdopted)
	d.rolledBack, d.ownerWord, d.pending = u64(layout.DequeOffRolledBack), u64(layout.DequeOffOwner), u64(layout.DequeOffPending)
	d.burned = u64(layout.DequeOffBurned)
	d.nextID = u64(layout.DequeOffNextID)
	d.notEmptySeq, d.notEmptyW = u32(layout.DequeOffNotEmptySeq), u32(layout.DequeOffNotEmptyW)
	d.notFullSeq, d.notFullW = u32(layout.DequeOffNotFullSeq), u32(layout.DequeOffNotFullW)
	d.tab = peers.New(reg, d.area, layout.DequeOffPeers, lay.Participants, u64(layout.DequeOffRepairLock))
	d.id, _ = layout.FileID(reg.Bytes())
	return d, nil
}

func attachDeque(reg *shm.Region) (*Deque, error) {
	d, err := viewDeque(reg)
	if err != nil {
		return nil, err
	}
	// No entry free: repair as the repairer (which hands back what dead
	// participants held, sets a dead owner's bottom right and frees their
	// entries), then try again.
	err = d.tab.Attach(d.repairAs)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// IsOwner reports whether this handle holds the owner role.
func (d *Deque) IsOwner() bool { return d.owner.Load() }

// NextID returns a deque-wide unique 64-bit id (fetch-add on a counter in
// the file). The first id is 1.
func (d *Deque) NextID() uint64 { return d.correlation.Add(1) }

// Len returns how many messages lie between top and bottom (a snapshot;
// returned and poisoned messages are not counted).
func (d *Deque) Len() int {
	t := d.top.Load()
	b := d.bottom.Load()
	if b <= t || b-t > d.lay.Capacity {
		return 0
	}
	return int(b - t)
}

// DequeCounters are the deque's statistics, read without stopping anyone.
type DequeCounters struct {
	Top, Bottom                 uint64
	Pushed, OwnerPopped, Stolen uint64
	FullHits, EmptyHits         uint64
	Claimed, Acked, Returned    uint64
	Poisoned, Abandoned         uint64
	Repairs, Adopted            uint64
	RolledBack, Pending, Burned uint64
	Correlation                 uint64
	NextMessageID               uint64 // the last message id a push took (message ids only)
	Owner                       int    // participant index of the owner, -1 for none
}

// Counters reads the deque's counters.
func (d *Deque) Counters() DequeCounters {
	c := DequeCounters{
		Top: d.top.Load(), Bottom: d.bottom.Load(),
		Pushed: d.pushed.Load(), OwnerPopped: d.ownerPopped.Load(), Stolen: d.stolen.Load(),
		FullHits: d.fullHits.Load(), EmptyHits: d.emptyHits.Load(),
		Claimed: d.claimed.Load(), Acked: d.acked.Load(), Returned: d.returned.Load(),
		Poisoned: d.poisoned.Load(), Abandoned: d.abandoned.Load(),
		Repairs: d.repairs.Load(), Adopted: d.adopted.Load(),
		RolledBack: d.rolledBack.Load(), Pending: d.pending.Load(), Burned: d.burned.Load(),
		Correlation: d.correlation.Load(), NextMessageID: d.nextID.Load(), Owner: -1,
	}
	if s := d.ownerStamp(); s != 0 {
		c.Owner = int(s) - 1
	}
	return c
}

// ownerStamp is the owner's participant stamp, 0 when there is none (or the
// word is corrupt).
func (d *Deque) ownerStamp() uint16 {
	v := d.ownerWord.Load()
	if layout.ValidateRole(v, d.lay.Entries) != nil {
		return 0
	}
	return layout.UnpackRole(v).Stamp
}

// Close gives up the owner role (messages stay in the file for the next
// owner or for thieves), hands this participant's leases back, detaches
// and unmaps the file.
func (d *Deque) Close() error {
	var err error
	if d.tab.Self != 0 {
		// Guarded: a file truncated under a long-lived handle must not
		// crash its process on the way out.
		_, err = guarded(d.reg, "close", func() (struct{}, error) { d.detach(); return struct{}{}, nil })
	}
	return d.unmap(err)
}

// detach returns our leases (they are taken again by others), drops the
// owner role and frees our entry. Nothing else can be stamped with us:
// Close comes after every other call.
func (d *Deque) detach() {
	for i := uint64(0); i < d.lay.Capacity; i++ {
		raw := d.slotWord(i).Load()
		sw := layout.UnpackSlot(raw)
		if sw.Owner == d.tab.Self && sw.Validate(&d.lay.SlotGeometry) == nil && sw.State == layout.SlotLeased {
			d.giveBack(i, raw, sw)
		}
	}
	if d.owner.Load() {
		d.ownerWord.CompareAndSwap(d.tab.MyLock(), 0)
		d.owner.Store(false)
	}
	d.tab.Release(false)
}

func (d *Deque) slotWord(pos uint64) *atomic.Uint64 {
	return d.area.U64(d.lay.SlotOff(pos & d.mask))
}

func (d *Deque) payload(pos uint64, n uint32) []byte {
	off := d.lay.SlotOff(pos&d.mask) + layout.RingSlotWordSize
	return d.area[off : off+uint64(n)]
}

// slotID is the message id of position pos's slot, 0 in a deque without
// message ids (read by whoever holds the slot, as its payload is).
func (d *Deque) slotID(pos uint64) uint64 {
	if !d.lay.MessageIDs {
		return 0
	}
	off := d.lay.SlotOff(pos&d.mask) + d.lay.IDOff()
	return binary.LittleEndian.Uint64(d.area[off : off+layout.RingSlotIDSize])
}

// setSlotID writes the message id of position pos's slot (a deque with
// message ids; the caller holds the slot WRITING).
func (d *Deque) setSlotID(pos, id uint64) {
	off := d.lay.SlotOff(pos&d.mask) + d.lay.IDOff()
	binary.LittleEndian.PutUint64(d.area[off:off+layout.RingSlotIDSize], id)
}

// MessageIDs reports whether the deque's messages carry ids (created
// with DequeConfig.MessageIDs). A push takes the next number of a
// deque-wide counter in the file (the owner's pushes only: positions are
// reused when the owner pops back, so they cannot name a message), or
// the caller's (TryPushID); pops (TryPopID), leases (Lease.ID) and Peek
// report it, and a message handed back or recovered keeps it (it stays
// in its slot). A push killed after taking a number and before
// publishing leaves a gap: ids are unique, not dense.
func (d *Deque) MessageIDs() bool { return d.lay.MessageIDs }

// FileID returns the file's id (layout.FileID), as Ring.FileID.
func (d *Deque) FileID() uint64 { return d.id }

// idAllowed refuses an id call on a deque without message ids, and id 0.
func (d *Deque) idAllowed(id uint64) error {
	if !d.lay.MessageIDs {
		return fmt.Errorf("%w: %s", ErrNoMessageIDs, d.Path())
	}
	if id == 0 {
		return fmt.Errorf("%w: %s", ErrZeroID, d.Path())
	}
	return nil
}

func (d *Deque) corrupt(pos, raw uint64, err error) error {
	return fmt.Errorf("%w: %s: slot %d word %#x: %v", ErrCorrupt, d.Path(), pos&d.mask, raw, err)
}

func (d *Deque) tooLarge(n int) error {
	return fmt.Errorf("%w: %s: %d bytes, the limit is %d", ErrTooLarge, d.Path(), n, d.lay.PayloadMax())
}

func (d *Deque) wakeThieves() {
	if d.notEmptyW.Swap(0) != 0 {
		d.notEmptySeq.Add(1)
		shm.FutexWake(d.notEmptySeq, -1)
	}
}

func (d *Deque) wakeOwner() {
	if d.notFullW.Swap(0) != 0 {
		d.notFullSeq.Add(1)
		shm.FutexWake(d.notFullSeq, -1)
	}
}

func (d *Deque) wakeIfWaiting() {
	if d.notEmptyW.Load() != 0 {
		d.wakeThieves()
	}
	if d.notFullW.Load() != 0 {
		d.wakeOwner()
	}
}

var _ Queue = (*Deque)(nil)
