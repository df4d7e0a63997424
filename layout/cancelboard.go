package layout

import "fmt"

// Cancel board format (kind 7): the cancellation requests of a Pass
// scheduler's submitters, read by every worker pool on the same submit
// queue. A submitter cancelling a pass whose result it no longer wants
// writes the pass's token into a free entry and bumps the epoch; the
// workers, woken on the epoch, cancel the context of any closure running
// that pass and skip it if they claim it later. The area follows the
// common header:
//
//	area offset
//	   0 +-----------------------------------------------------------+
//	     | epoch (u32, futex word) | reserved (u32)                  |
//	     |   8 requests (u64): entries in use, a hint (0: skip scan) |
//	     |  16..64 reserved                                          |
//	  64 +-----------------------------------------------------------+
//	     | entry[0 .. capacity): 16 bytes each                       |
//	     |    0 owner: heartbeat slot+1 (bits 0-31, 0: entry free),  |
//	     |      slot generation (32-55), reserved (56-63)            |
//	     |    8 token (u64; 0 while the entry is written or cleared) |
//	     +-----------------------------------------------------------+
//
// Geometry: Capacity is the number of entries; SlotSize and the params are
// unused. An entry is taken by a CAS of its owner word from 0 and only then
// given its token; it is cleared token first, owner last. Its owner is the
// submitter's registration in the heartbeat table (slot and generation), so
// anyone can tell an entry whose submitter has left (that registration is
// no longer the slot's) and clear it. These constants are part of the
// format.
const (
	CBOffEpoch    = 0
	CBOffRequests = 8
	CBEntriesOff  = 64

	CBEntrySize  = 16
	CBEntryOwner = 0
	CBEntryToken = 8

	CBMaxEntries     = 1 << 16
	CBDefaultEntries = 256
)

// CBOwner is a decoded cancel-board owner word: whose registration asked.
type CBOwner struct {
	Slot uint32 // heartbeat slot of the submitter
	Gen  uint32 // 24 bits: the slot's generation while the submitter held it
}

// Pack encodes o; 0 is reserved for a free entry, so the slot is stored
// plus one.
func (o CBOwner) Pack() uint64 { return uint64(o.Slot+1) | uint64(o.Gen&0xffffff)<<32 }

// UnpackCBOwner decodes an owner word; ok is false for a free entry.
func UnpackCBOwner(v uint64) (o CBOwner, ok bool) {
	s := uint32(v)
	if s == 0 {
		return CBOwner{}, false
	}
	return CBOwner{Slot: s - 1, Gen: uint32(v>>32) & 0xffffff}, true
}

// CancelBoardGeometry returns the geometry of a board of n entries.
func CancelBoardGeometry(n uint32) Geometry { return Geometry{Capacity: uint64(n)} }

// CancelBoardLayout is a validated cancel-board geometry, relative to the
// area (add the header size for file offsets).
type CancelBoardLayout struct {
	Entries  uint64
	BodySize uint64
}

// EntryOff is the area offset of entry i (i < Entries).
func (l *CancelBoardLayout) EntryOff(i uint64) uint64 { return CBEntriesOff + i*CBEntrySize }

// NewCancelBoardLayout validates a cancel-board geometry.
func NewCancelBoardLayout(g Geometry) (CancelBoardLayout, error) {
	l := CancelBoardLayout{Entries: g.Capacity}
	if l.Entries < 1 || l.Entries > CBMaxEntries {
		return l, fmt.Errorf("entries %d must be in [1, %d]", l.Entries, CBMaxEntries)
	}
	l.BodySize = alignUp(CBEntriesOff+l.Entries*CBEntrySize, CacheLine)
	return l, nil
}

func init() {
	register(&Spec{
		Kind: KindCancelBoard,
		Body: func(g Geometry) (uint64, Map, error) {
			l, err := NewCancelBoardLayout(g)
			if err != nil {
				return 0, Map{}, err
			}
			return l.BodySize, l.fieldMap(), nil
		},
	})
}

func (l *CancelBoardLayout) fieldMap() Map {
	fields := []Field{
		{"cb.epoch", CBOffEpoch, 4, "futex word: bumped after every request, so waiting workers rescan"},
		{"cb.reserved0", 4, 4, "reserved, zero"},
		{"cb.requests", CBOffRequests, 8, "entries in use (a hint: a worker skips the scan when it reads 0)"},
		{"cb.reserved1", CBOffRequests + 8, CBEntriesOff - (CBOffRequests + 8), "reserved, zero"},
	}
	entry := []Field{
		{"owner", CBEntryOwner, 8, "0: free; else heartbeat slot+1 (bits 0-31) and slot generation (32-55) of the submitter"},
		{"token", CBEntryToken, 8, "token of the pass to cancel (0 while written or cleared)"},
	}
	m := Map{Fields: fields, Areas: []Area{{Name: "entry", Offset: CBEntriesOff, Stride: CBEntrySize, Count: l.Entries, Fields: entry}}}
	if pad := l.BodySize - (CBEntriesOff + l.Entries*CBEntrySize); pad > 0 {
		m.Fields = append(m.Fields, Field{"cb.pad", CBEntriesOff + l.Entries*CBEntrySize, pad, "padding to a cache line"})
	}
	return m
}
