package layout

import (
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
		if err != nil || !l.Deque {
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
		slots := m.Areas[1]
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
