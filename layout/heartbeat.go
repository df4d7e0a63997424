package layout

import (
	"errors"
	"fmt"
	"hash/fnv"
)

// Heartbeat table format (kind 5). The table's area follows the common
// header:
//
//	area offset
//	   0 +-----------------------------------------------------------+
//	     | registered | unregistered | reclaimed (totals, u64 each)  |
//	  64 +-----------------------------------------------------------+
//	     | slot[0 .. capacity): slot_size bytes each                 |
//	     |    0 ctl: state (bits 0-7), gen (8-31), pid (32-63)       |
//	     |    8 start ticks    16 boot tag    24 last beat (mono ns) |
//	     |   32 registered (Unix ns)   40 last exit                  |
//	     |   48 label (16 bytes, NUL padded)                         |
//	     |   64 pid namespace inode    72..96 reserved               |
//	     |   96 lease[0 .. leases): 32 bytes each                    |
//	     |        0 version (u32, odd while written)  4 deliveries   |
//	     |        8 ring id   16 ring slot (u32) | lap (u32)         |
//	     |       24 claimed (mono ns)                                |
//	     +-----------------------------------------------------------+
//
// Geometry: Capacity is the number of participant slots, SlotSize the
// bytes per slot (96 + 32 per lease, rounded up to 64), Param0 the leases
// each slot can record. A registered member holds an entry lock
// (shm.Region.LockEntry) on its slot's bytes for as long as it is
// registered: the proof of life judges ask for. These constants are part
// of the format.
const (
	HBOffRegistered   = 0
	HBOffUnregistered = 8
	HBOffReclaimed    = 16
	HBSlotsOff        = 64

	HBSlotCtl        = 0
	HBSlotStart      = 8
	HBSlotBoot       = 16
	HBSlotBeat       = 24
	HBSlotRegistered = 32
	HBSlotLastExit   = 40
	HBSlotLabel      = 48
	HBLabelSize      = 16
	HBSlotPidNS      = 64
	HBSlotLeases     = 96

	HBLeaseSize       = 32
	HBLeaseVersion    = 0
	HBLeaseDeliveries = 4
	HBLeaseRing       = 8
	HBLeasePos        = 16
	HBLeaseClaimed    = 24

	HBMaxCapacity = 1 << 16
	HBMaxLeases   = 1 << 10
)

// Heartbeat slot states. The ctl word packs them like a ring participant's
// (PeerCtl): state, a generation bumped on every free, and the pid.
const (
	HBFree       uint8 = 0
	HBClaiming   uint8 = 1 // being registered; start and boot not yet written
	HBActive     uint8 = 2 // registered
	HBReclaiming uint8 = 3 // proven dead; a watchdog is requeueing its work
)

var hbStateNames = [...]string{"free", "claiming", "active", "reclaiming"}

// HBStateName names a heartbeat slot state.
func HBStateName(s uint8) string {
	if int(s) < len(hbStateNames) {
		return hbStateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// Exit reasons recorded in a slot's last-exit word when it is freed.
const (
	ExitUnregistered uint8 = 1 // the participant unregistered itself
	ExitReclaimed    uint8 = 2 // proven dead; a watchdog requeued its work and freed the slot
)

// LastExit is the decoded last-exit word of a slot: who last left it and
// how, and the slot generation it left (the generation before the free).
type LastExit struct {
	PID    uint32
	Reason uint8
	Gen    uint32 // 24 bits
}

// Pack encodes e.
func (e LastExit) Pack() uint64 {
	return uint64(e.Reason) | uint64(e.Gen&0xffffff)<<8 | uint64(e.PID)<<32
}

// UnpackLastExit decodes a last-exit word.
func UnpackLastExit(v uint64) LastExit {
	return LastExit{Reason: uint8(v), Gen: uint32(v>>8) & 0xffffff, PID: uint32(v >> 32)}
}

// HBSlotSize returns the slot size a table with the given leases per slot
// must declare.
func HBSlotSize(leases uint32) uint32 {
	return uint32(alignUp(uint64(HBSlotLeases)+uint64(leases)*HBLeaseSize, CacheLine))
}

// HeartbeatGeometry returns the geometry of a heartbeat table.
func HeartbeatGeometry(capacity, leases uint32) Geometry {
	return Geometry{Capacity: uint64(capacity), SlotSize: HBSlotSize(leases), Params: [3]uint32{leases}}
}

// HeartbeatLayout is a validated heartbeat geometry.
type HeartbeatLayout struct {
	Capacity uint64
	SlotSize uint64
	Leases   uint64
	BodySize uint64
}

// SlotOff is the area offset of slot i (i < Capacity).
func (l *HeartbeatLayout) SlotOff(i uint64) uint64 { return HBSlotsOff + i*l.SlotSize }

// LeaseOff is the area offset of lease j of slot i.
func (l *HeartbeatLayout) LeaseOff(i, j uint64) uint64 {
	return l.SlotOff(i) + HBSlotLeases + j*HBLeaseSize
}

// NewHeartbeatLayout validates a heartbeat geometry.
func NewHeartbeatLayout(g Geometry) (HeartbeatLayout, error) {
	l := HeartbeatLayout{Capacity: g.Capacity, SlotSize: uint64(g.SlotSize), Leases: uint64(g.Params[0])}
	switch {
	case l.Capacity < 1 || l.Capacity > HBMaxCapacity:
		return l, fmt.Errorf("capacity %d must be in [1, %d]", l.Capacity, HBMaxCapacity)
	case l.Leases < 1 || l.Leases > HBMaxLeases:
		return l, fmt.Errorf("leases per slot %d must be in [1, %d]", l.Leases, HBMaxLeases)
	case g.SlotSize != HBSlotSize(g.Params[0]):
		return l, fmt.Errorf("slot size %d must be %d for %d leases", g.SlotSize, HBSlotSize(g.Params[0]), l.Leases)
	}
	slots, err := checkedProduct(l.Capacity, l.SlotSize)
	if err != nil {
		return l, err
	}
	l.BodySize, err = checkedSum(HBSlotsOff, slots)
	return l, err
}

func init() {
	register(&Spec{
		Kind:         KindHeartbeat,
		ParamNames:   [3]string{"leases_per_slot"},
		UsesSlotSize: true,
		Body: func(g Geometry) (uint64, Map, error) {
			l, err := NewHeartbeatLayout(g)
			if err != nil {
				return 0, Map{}, err
			}
			return l.BodySize, l.fieldMap(), nil
		},
	})
}

func (l *HeartbeatLayout) fieldMap() Map {
	fields := []Field{
		{"hb.registered", HBOffRegistered, 8, "registrations ever made"},
		{"hb.unregistered", HBOffUnregistered, 8, "participants that unregistered themselves"},
		{"hb.reclaimed", HBOffReclaimed, 8, "dead participants reclaimed by a watchdog"},
		{"hb.reserved", 24, HBSlotsOff - 24, "reserved, zero"},
	}
	slot := []Field{
		{"ctl", HBSlotCtl, 8, "state (bits 0-7: free, claiming, active, reclaiming), generation (8-31), pid (32-63)"},
		{"start", HBSlotStart, 8, "process start time, clock ticks since boot"},
		{"boot", HBSlotBoot, 8, "first 8 bytes of the boot id"},
		{"beat", HBSlotBeat, 8, "last beat, CLOCK_MONOTONIC ns"},
		{"registered", HBSlotRegistered, 8, "registration time, Unix ns"},
		{"last_exit", HBSlotLastExit, 8, "reason (bits 0-7), generation (8-31), pid (32-63) of the last participant to leave"},
		{"label", HBSlotLabel, HBLabelSize, "participant's label, NUL padded"},
		{"pid_ns", HBSlotPidNS, 8, "inode of the participant's pid namespace, 0 if unknown"},
		{"reserved", HBSlotPidNS + 8, HBSlotLeases - HBSlotPidNS - 8, "zero"},
	}
	for j := uint64(0); j < l.Leases; j++ {
		base := HBSlotLeases + j*HBLeaseSize
		p := fmt.Sprintf("lease[%d].", j)
		slot = append(slot,
			Field{p + "version", base + HBLeaseVersion, 4, "seqlock version: odd while being written, 0 when never used"},
			Field{p + "deliveries", base + HBLeaseDeliveries, 4, "delivery count of the leased message"},
			Field{p + "ring", base + HBLeaseRing, 8, "id of the ring the lease is in (0: empty)"},
			Field{p + "pos", base + HBLeasePos, 8, "ring slot (low 32 bits) and lap (high 32 bits)"},
			Field{p + "claimed", base + HBLeaseClaimed, 8, "claim time, CLOCK_MONOTONIC ns"},
		)
	}
	if pad := l.SlotSize - (HBSlotLeases + l.Leases*HBLeaseSize); pad > 0 {
		slot = append(slot, Field{"pad", l.SlotSize - pad, pad, "padding to a cache line"})
	}
	return Map{Fields: fields, Areas: []Area{{Name: "slot", Offset: HBSlotsOff, Stride: l.SlotSize, Count: l.Capacity, Fields: slot}}}
}

// FileID identifies one shmkit file for as long as it exists: a 64-bit
// FNV-1a hash of its immutable header bytes (kind, geometry, creation time,
// creator). Heartbeat lease records name rings by it. It is never 0.
func FileID(header []byte) (uint64, error) {
	if len(header) < ChecksumedSize {
		return 0, errors.New("layout: header too short for a file id")
	}
	h := fnv.New64a()
	h.Write(header[:ChecksumedSize])
	id := h.Sum64()
	if id == 0 {
		id = 1
	}
	return id, nil
}
