package heartbeat

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// Errors of the heartbeat table.
var (
	ErrTableFull      = errors.New("heartbeat: table full")
	ErrLeaseTableFull = errors.New("heartbeat: no free lease record in this participant's slot")
	ErrNotRegistered  = errors.New("heartbeat: participant no longer registered")
	ErrCorruptTable   = errors.New("heartbeat: table corrupt")
)

// ErrInvalidConfig marks a configuration that cannot work: a table's
// geometry, a slot index out of range, and in package pass (which returns
// it too, so that one errors.Is test covers a pass.Config and the
// heartbeat.Config inside it) a scheduler's configuration. Its message has
// no package prefix for that reason.
var ErrInvalidConfig = errors.New("invalid configuration")

// Config sizes a new heartbeat table.
type Config struct {
	Capacity int // participant slots
	Leases   int // lease records per slot (default 16)
}

// Table is a heartbeat table mapped from its file: who is attached to a
// group of rings and deques, whether they beat, and which leases each holds.
type Table struct {
	reg  *shm.Region
	lay  layout.HeartbeatLayout
	area shm.Words
	boot uint64
}

// Create creates a heartbeat table file.
func Create(path string, cfg Config, opts ...shm.Option) (*Table, error) {
	g, err := cfg.geometry(path)
	if err != nil {
		return nil, err
	}
	return shm.CreateAs(path, shm.Spec{Kind: layout.KindHeartbeat, Geometry: g}, mapTable, opts...)
}

// Open opens an existing table; shm.ReadOnly() maps it read-only
// (for inspectors: snapshots work, registration does not).
func Open(path string, opts ...shm.Option) (*Table, error) {
	return shm.OpenAs(path, shm.Spec{Kind: layout.KindHeartbeat}, mapTable, opts...)
}

// OpenOrCreate opens the table at path or creates it with cfg.
func OpenOrCreate(path string, cfg Config, opts ...shm.Option) (*Table, bool, error) {
	g, err := cfg.geometry(path)
	if err != nil {
		return nil, false, err
	}
	return shm.OpenOrCreateAs(path, shm.Spec{Kind: layout.KindHeartbeat, Geometry: g}, mapTable, opts...)
}

func (c Config) geometry(path string) (layout.Geometry, error) {
	if c.Leases == 0 {
		c.Leases = 16
	}
	if c.Capacity <= 0 || c.Capacity > layout.HBMaxCapacity || c.Leases < 0 || c.Leases > layout.HBMaxLeases {
		return layout.Geometry{}, fmt.Errorf("%w: %s: heartbeat capacity %d, leases %d", ErrInvalidConfig, path, c.Capacity, c.Leases)
	}
	return layout.HeartbeatGeometry(uint32(c.Capacity), uint32(c.Leases)), nil
}

func mapTable(reg *shm.Region) (*Table, error) {
	hdr := reg.Header()
	lay, err := layout.NewHeartbeatLayout(hdr.Geometry)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptTable, reg.Path(), err)
	}
	h := &Table{reg: reg, lay: lay, area: reg.Bytes()[hdr.HeaderSize:], boot: shm.BootTag()}
	if uint64(len(h.area)) != lay.BodySize {
		return nil, fmt.Errorf("%w: %s: area is %d bytes, geometry needs %d", ErrCorruptTable, reg.Path(), len(h.area), lay.BodySize)
	}
	return h, nil
}

// Path returns the table's file path.
func (h *Table) Path() string { return h.reg.Path() }

// Capacity returns the number of participant slots.
func (h *Table) Capacity() int { return int(h.lay.Capacity) }

// LeasesPerSlot returns how many leases each participant can record.
func (h *Table) LeasesPerSlot() int { return int(h.lay.Leases) }

// Header returns the file's common header.
func (h *Table) Header() layout.Header { return h.reg.Header() }

// Close unmaps the table. Registered members must be unregistered first,
// or they stay registered until a watchdog finds their process dead.
func (h *Table) Close() error { return h.reg.Close() }

func (h *Table) ctl(i uint64) *atomic.Uint64 {
	return h.area.U64(h.lay.SlotOff(i) + layout.HBSlotCtl)
}

// Totals are the table's lifetime counters.
type Totals struct{ Registered, Unregistered, Reclaimed uint64 }

// Totals reads the table's counters.
func (h *Table) Totals() Totals {
	return Totals{
		Registered:   h.area.U64(layout.HBOffRegistered).Load(),
		Unregistered: h.area.U64(layout.HBOffUnregistered).Load(),
		Reclaimed:    h.area.U64(layout.HBOffReclaimed).Load(),
	}
}

// Member is this process's registration in a heartbeat table.
type Member struct {
	h    *Table
	slot uint64
	ctl  uint64 // our exact ctl word, so unregistering can never free another's slot

	mu   sync.Mutex
	free []uint64 // unused lease record indexes
}

// Register takes a free slot for this process (pid + start time + boot) and
// beats once. label (at most 16 bytes kept) is shown by inspectors. A full
// table gives ErrTableFull; slots of dead processes are freed by a watchdog.
func (h *Table) Register(label string) (*Member, error) {
	if h.reg.ReadOnly() {
		return nil, fmt.Errorf("%w: %s: table opened read-only", ErrNotRegistered, h.Path())
	}
	self := shm.Self()
	for i := uint64(0); i < h.lay.Capacity; i++ {
		ctl := h.ctl(i)
		v := ctl.Load()
		c := layout.UnpackPeer(v)
		if c.State != layout.HBFree {
			continue
		}
		claiming := layout.PeerCtl{State: layout.HBClaiming, Gen: c.Gen, PID: uint32(self.PID)}.Pack()
		if !ctl.CompareAndSwap(v, claiming) {
			continue
		}
		base := h.lay.SlotOff(i)
		h.area.U64(base + layout.HBSlotStart).Store(self.Start)
		h.area.U64(base + layout.HBSlotBoot).Store(h.boot)
		h.area.U64(base + layout.HBSlotBeat).Store(uint64(shm.MonoNow()))
		h.area.U64(base + layout.HBSlotRegistered).Store(uint64(time.Now().UnixNano()))
		writeLabel(h.area[base+layout.HBSlotLabel:base+layout.HBSlotLabel+layout.HBLabelSize], label)
		m := &Member{h: h, slot: i}
		for j := uint64(0); j < h.lay.Leases; j++ {
			h.clearLease(i, j)
			m.free = append(m.free, h.lay.Leases-1-j)
		}
		shm.CrashPoint(crashHbRegisterAfterClaim)
		active := layout.PeerCtl{State: layout.HBActive, Gen: c.Gen, PID: uint32(self.PID)}.Pack()
		if !ctl.CompareAndSwap(claiming, active) {
			continue // only a watchdog that proved our pid gone changes it
		}
		m.ctl = active
		h.area.U64(layout.HBOffRegistered).Add(1)
		return m, nil
	}
	return nil, fmt.Errorf("%w: %s: all %d slots taken", ErrTableFull, h.Path(), h.lay.Capacity)
}

func writeLabel(dst []byte, label string) {
	n := copy(dst, label)
	clear(dst[n:])
}

// Slot returns the member's slot index.
func (m *Member) Slot() int { return int(m.slot) }

// Beat records that the member is alive now (CLOCK_MONOTONIC, comparable
// across processes). It costs one clock read and one store.
func (m *Member) Beat() {
	m.h.area.U64(m.h.lay.SlotOff(m.slot) + layout.HBSlotBeat).Store(uint64(shm.MonoNow()))
}

// Registered reports whether the slot is still this member's (a watchdog
// frees it only on proof of death, so false means someone else's bug).
func (m *Member) Registered() bool { return m.h.ctl(m.slot).Load() == m.ctl }

// LeaseRef names a lease record in the member's slot.
type LeaseRef struct{ index uint64 }

// RecordLease shows in the member's slot that it holds a lease on ring
// ringID at slot/lap, so inspectors and watchdogs can see what its work is.
// The ring's own slot word stays the truth; this is the readable view.
func (m *Member) RecordLease(ringID, slot uint64, lap uint32, deliveries int) (LeaseRef, error) {
	m.mu.Lock()
	if len(m.free) == 0 {
		m.mu.Unlock()
		return LeaseRef{}, fmt.Errorf("%w: %s: slot %d records %d leases", ErrLeaseTableFull, m.h.Path(), m.slot, m.h.lay.Leases)
	}
	j := m.free[len(m.free)-1]
	m.free = m.free[:len(m.free)-1]
	m.mu.Unlock()
	off := m.h.lay.LeaseOff(m.slot, j)
	ver := m.h.area.U32(off + layout.HBLeaseVersion)
	v := ver.Load()
	ver.Store(v | 1) // odd: being written
	m.h.area.U32(off + layout.HBLeaseDeliveries).Store(uint32(deliveries))
	m.h.area.U64(off + layout.HBLeaseRing).Store(ringID)
	m.h.area.U64(off + layout.HBLeasePos).Store(slot&0xffffffff | uint64(lap)<<32)
	m.h.area.U64(off + layout.HBLeaseClaimed).Store(uint64(shm.MonoNow()))
	ver.Store((v | 1) + 1)
	return LeaseRef{index: j}, nil
}

// ClearLease removes a lease record once the lease is acked or released.
func (m *Member) ClearLease(ref LeaseRef) {
	m.h.clearLease(m.slot, ref.index)
	m.mu.Lock()
	m.free = append(m.free, ref.index)
	m.mu.Unlock()
}

func (h *Table) clearLease(i, j uint64) {
	off := h.lay.LeaseOff(i, j)
	ver := h.area.U32(off + layout.HBLeaseVersion)
	v := ver.Load()
	ver.Store(v | 1)
	h.area.U64(off + layout.HBLeaseRing).Store(0)
	h.area.U64(off + layout.HBLeasePos).Store(0)
	h.area.U32(off + layout.HBLeaseDeliveries).Store(0)
	h.area.U64(off + layout.HBLeaseClaimed).Store(0)
	ver.Store((v | 1) + 1)
}

// Unregister frees the member's slot, recording a normal exit. Leases
// still recorded are cleared: the caller releases them in their rings.
func (m *Member) Unregister() error {
	h := m.h
	for j := uint64(0); j < h.lay.Leases; j++ {
		h.clearLease(m.slot, j)
	}
	c := layout.UnpackPeer(m.ctl)
	exit := layout.LastExit{PID: c.PID, Reason: layout.ExitUnregistered, Gen: c.Gen}.Pack()
	h.area.U64(h.lay.SlotOff(m.slot) + layout.HBSlotLastExit).Store(exit)
	if !h.ctl(m.slot).CompareAndSwap(m.ctl, layout.PeerCtl{State: layout.HBFree, Gen: c.Gen + 1}.Pack()) {
		return fmt.Errorf("%w: %s: slot %d", ErrNotRegistered, h.Path(), m.slot)
	}
	h.area.U64(layout.HBOffUnregistered).Add(1)
	return nil
}
