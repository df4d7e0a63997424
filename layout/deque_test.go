package layout

import (
	"errors"
	"math"
	"strconv"
	"testing"
)

func TestDequeControlLines(t *testing.T) {
	roles := map[string][]uint64{
		"owner":       {DequeOffBottom, DequeOffPushed, DequeOffFullHits, DequeOffOwnerPopped},
		"thieves":     {DequeOffTop, DequeOffStolen, DequeOffEmptyHits},
		"not-empty":   {DequeOffNotEmptySeq, DequeOffNotEmptyW},
		"not-full":    {DequeOffNotFullSeq, DequeOffNotFullW},
		"correlation": {DequeOffCorrelation},
		"stats":       {DequeOffClaimed, DequeOffAcked, DequeOffReturned, DequeOffPoisoned, DequeOffAbandoned, DequeOffRepairs, DequeOffAdopted, DequeOffRolledBack},
		"roles":       {DequeOffRepairLock, DequeOffOwner, DequeOffPending, DequeOffBurned},
		"peers":       {DequeOffPeers},
	}
	checkControlLines(t, roles)
}

// A deque's file map tiles like a ring's: header, control words inside the
// control area, the participant table, then slots to the end of the file.
func TestDequeHeaderMap(t *testing.T) {
	for _, g := range []Geometry{
		RingGeometry(8, 64, 4, 5),
		RingGeometry(2, 128, 3, 1),
		RingGeometry(1024, 4096, RingMaxParticipants, RingMaxDeliveryLimit),
	} {
		h, err := NewHeader(KindDeque, g, 1, Creator{PID: 1})
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		l, err := NewDequeLayout(g)
		if err != nil || !l.AllowReturned {
			t.Fatalf("%+v: %v %+v", g, err, l)
		}
		if h.FileSize != HeaderSize+l.BodySize {
			t.Fatalf("%+v: FileSize %d, want %d", g, h.FileSize, HeaderSize+l.BodySize)
		}
		m, err := h.Map()
		if err != nil {
			t.Fatal(err)
		}
		var next uint64
		for _, f := range m.Fields {
			if f.Offset < next {
				t.Fatalf("%+v: %s at %d overlaps the field ending at %d", g, f.Name, f.Offset, next)
			}
			if f.Offset >= HeaderSize {
				if f.Size != 4 && f.Size != 8 || f.Offset%f.Size != 0 {
					t.Errorf("%s: %d bytes at %d: not an aligned atomic word", f.Name, f.Size, f.Offset)
				}
				if f.Offset+f.Size > HeaderSize+DequeOffPeers {
					t.Fatalf("%+v: %s runs past the control area", g, f.Name)
				}
			}
			next = f.Offset + f.Size
		}
		if len(m.Areas) != 2 || m.Areas[0].Name != "participant" || m.Areas[1].Name != "slot" {
			t.Fatalf("%+v: areas %+v", g, m.Areas)
		}
		peers, slots := m.Areas[0], m.Areas[1]
		// P participants and the repairer entry, 64 bytes each, right
		// before the slots.
		if peers.Offset != HeaderSize+DequeOffPeers || peers.Stride != 64 || peers.Count != uint64(g.Params[0])+1 || peers.Offset+64*peers.Count != slots.Offset {
			t.Fatalf("%+v: participant area %+v, slots at %d", g, peers, slots.Offset)
		}
		if slots.Offset != HeaderSize+l.SlotsOff || slots.Offset+slots.Stride*slots.Count != h.FileSize {
			t.Fatalf("%+v: slot area %+v, file %d", g, slots, h.FileSize)
		}
		for _, a := range m.Areas {
			checkRecordFields(t, a)
		}
		for _, tc := range []struct {
			off  uint64
			name string
		}{
			{HeaderSize + DequeOffBottom, "deque.bottom"},
			{HeaderSize + DequeOffTop + 3, "deque.top"},
			{HeaderSize + DequeOffOwner, "deque.owner"},
			{HeaderSize + DequeOffPeers + uint64(g.Params[0])*64 + 32, "participant[" + strconv.FormatUint(uint64(g.Params[0]), 10) + "].pid_ns"},
			{HeaderSize + l.SlotsOff + 9, "slot[0].payload"},
		} {
			if name, _, _, ok := m.Locate(tc.off); !ok || name != tc.name {
				t.Errorf("%+v: Locate(%d) = %q %v, want %q", g, tc.off, name, ok, tc.name)
			}
		}
	}
	if _, err := NewDequeLayout(RingGeometry(3, 64, 1, 1)); err == nil {
		t.Fatal("capacity 3 accepted")
	}
}

// A deque's slot geometry is the ring's for the same geometry, but for
// the returned state, which is valid in a deque's slots only.
func TestDequeLayoutSharesRingGeometry(t *testing.T) {
	g := RingGeometry(16, 128, 7, 3)
	r, err := NewRingLayout(g)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDequeLayout(g)
	if err != nil {
		t.Fatal(err)
	}
	if r.AllowReturned || !d.AllowReturned {
		t.Fatalf("AllowReturned: ring %v, deque %v", r.AllowReturned, d.AllowReturned)
	}
	sg := d.SlotGeometry
	sg.AllowReturned = false
	if sg != r.SlotGeometry {
		t.Fatalf("deque geometry %+v, ring %+v", d.SlotGeometry, r.SlotGeometry)
	}
	w := SlotWord{State: SlotReturned, Deliveries: 1, Length: 5}
	if err := w.Validate(&d.SlotGeometry); err != nil {
		t.Errorf("deque rejected a returned slot: %v", err)
	}
	if err := w.Validate(&r.SlotGeometry); !errors.Is(err, ErrSlotCorrupt) {
		t.Errorf("ring accepted a returned slot: %v", err)
	}
}

// FuzzDequeLayout: NewDequeLayout never panics on any geometry; what it
// accepts is the ring's layout for that geometry with the returned state
// allowed, it fits (as FuzzRingLayout checks), and the header agrees.
func FuzzDequeLayout(f *testing.F) {
	f.Add(uint64(8), uint32(64), uint32(4), uint32(5), uint32(0))
	f.Add(uint64(RingMaxCapacity), uint32(RingMaxSlotSize), uint32(RingMaxParticipants), uint32(RingMaxDeliveryLimit), uint32(0))
	f.Add(uint64(1<<63), uint32(math.MaxUint32), uint32(math.MaxUint32), uint32(math.MaxUint32), uint32(1))
	f.Add(uint64(0), uint32(0), uint32(0), uint32(0), uint32(0))
	f.Add(uint64(8), uint32(64), uint32(4), uint32(5), RingOptMessageIDs)
	f.Add(uint64(8), uint32(64), uint32(4), uint32(5), uint32(1<<31|1))
	f.Fuzz(func(t *testing.T, capacity uint64, slotSize, p0, p1, p2 uint32) {
		g := Geometry{Capacity: capacity, SlotSize: slotSize, Params: [3]uint32{p0, p1, p2}}
		l, err := NewDequeLayout(g)
		r, rerr := NewRingLayout(g)
		h, herr := NewHeader(KindDeque, g, 0, Creator{})
		if (err == nil) != (rerr == nil) {
			t.Fatalf("%+v: deque %v, ring %v", g, err, rerr)
		}
		if err != nil {
			if herr == nil {
				t.Fatalf("NewHeader accepted %+v that NewDequeLayout rejects: %v", g, err)
			}
			return
		}
		if !l.AllowReturned {
			t.Fatalf("deque layout %+v does not allow the returned state", l)
		}
		sg := l.SlotGeometry
		sg.AllowReturned = false
		if sg != r.SlotGeometry {
			t.Fatalf("deque geometry %+v, ring %+v", l.SlotGeometry, r.SlotGeometry)
		}
		checkSlotGeometry(t, g, &l.SlotGeometry)
		if p2&^RingKnownOptions != 0 {
			t.Fatalf("NewDequeLayout accepted unknown option bits %#x", p2)
		}
		if herr != nil {
			t.Fatalf("NewHeader rejected %+v that NewDequeLayout accepts: %v", g, herr)
		}
		if h.FileSize != HeaderSize+l.BodySize || h.FileSize > MaxFileSize {
			t.Fatalf("FileSize %d for body %d", h.FileSize, l.BodySize)
		}
	})
}
