package layout

import (
	"errors"
	"math"
	"sort"
	"strconv"
	"testing"
)

func TestNewRingLayout(t *testing.T) {
	tests := []struct {
		name     string
		g        Geometry
		ok       bool
		slotsOff uint64 // checked when ok
		body     uint64 // checked when ok
	}{
		// A table for P participants has P+1 entries of 64 bytes (entry P
		// is the repairer entry): 1 participant, 2 entries, 448+128 = 576.
		{"minimal", RingGeometry(2, 64, 1, 1), true, 576, 576 + 2*64},
		// 64 participants, 65 entries: 448+4160 = 4608.
		{"defaults", RingGeometry(8, RingDefaultSlotSize, RingDefaultPeers, RingDefaultDeliveries), true, 4608, 4608 + 8*64},
		// 3 participants, 4 entries end at 448+256 = 704: entries fill a
		// line each and the table starts on one, so no padding.
		{"three participants", RingGeometry(4, 128, 3, 5), true, 704, 704 + 4*128},
		// 2 participants, 3 entries end at 448+192 = 640.
		{"two participants", RingGeometry(4, 64, 2, 5), true, 640, 640 + 4*64},
		// 1022 participants, 1023 entries: 448+65472 = 65920.
		{"max participants", RingGeometry(2, 64, RingMaxParticipants, RingMaxDeliveryLimit), true, 65920, 65920 + 2*64},
		{"max capacity", RingGeometry(RingMaxCapacity, 64, 1, 1), true, 576, 576 + RingMaxCapacity*64},
		{"max slot", RingGeometry(2, RingMaxSlotSize, 1, 1), true, 576, 576 + 2*RingMaxSlotSize},
		// 2^24 slots of 2^20 bytes is 16 TiB: beyond MaxFileSize.
		{"too big", RingGeometry(RingMaxCapacity, RingMaxSlotSize, 1, 1), false, 0, 0},
		{"capacity 0", RingGeometry(0, 64, 1, 1), false, 0, 0},
		{"capacity 1", RingGeometry(1, 64, 1, 1), false, 0, 0},
		{"capacity 3", RingGeometry(3, 64, 1, 1), false, 0, 0},
		{"capacity over max", RingGeometry(RingMaxCapacity*2, 64, 1, 1), false, 0, 0},
		{"capacity 2^63", RingGeometry(1<<63, 64, 1, 1), false, 0, 0},
		{"capacity max u64", RingGeometry(math.MaxUint64, 64, 1, 1), false, 0, 0},
		{"slot 0", RingGeometry(8, 0, 1, 1), false, 0, 0},
		{"slot 32", RingGeometry(8, 32, 1, 1), false, 0, 0},
		{"slot 100", RingGeometry(8, 100, 1, 1), false, 0, 0},
		{"slot over max", RingGeometry(8, RingMaxSlotSize+64, 1, 1), false, 0, 0},
		{"slot max u32", RingGeometry(8, math.MaxUint32, 1, 1), false, 0, 0},
		{"participants 0", RingGeometry(8, 64, 0, 1), false, 0, 0},
		// 1023 participants would need entry 1023 for the repairer and
		// owner 1024 for it: past the 10-bit owner field.
		{"participants 1023", RingGeometry(8, 64, RingMaxParticipants+1, 1), false, 0, 0},
		{"participants 1024", RingGeometry(8, 64, 1024, 1), false, 0, 0},
		{"delivery limit 0", RingGeometry(8, 64, 1, 0), false, 0, 0},
		{"delivery limit 16", RingGeometry(8, 64, 1, RingMaxDeliveryLimit+1), false, 0, 0},
		// Option bit 0 (message ids) changes no offset, only what a
		// slot's bytes mean; every other option bit is refused.
		{"message ids", RingGeometryWith(8, 64, 1, 1, RingOptMessageIDs), true, 576, 576 + 8*64},
		{"message ids max slot", RingGeometryWith(2, RingMaxSlotSize, 1, 1, RingOptMessageIDs), true, 576, 576 + 2*RingMaxSlotSize},
		{"option bit 1", RingGeometryWith(8, 64, 1, 1, 1<<1), false, 0, 0},
		{"option bit 31", RingGeometryWith(8, 64, 1, 1, 1<<31), false, 0, 0},
		{"ids and unknown", RingGeometryWith(8, 64, 1, 1, RingOptMessageIDs|1<<7), false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewRingLayout(tt.g)
			if !tt.ok {
				if err == nil {
					t.Fatalf("accepted %+v: %+v", tt.g, l)
				}
				if _, herr := NewHeader(KindRing, tt.g, 0, Creator{}); !errors.Is(herr, ErrGeometry) {
					t.Fatalf("NewHeader accepted a geometry NewRingLayout rejects: %v", herr)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected %+v: %v", tt.g, err)
			}
			if l.SlotsOff != tt.slotsOff || l.BodySize != tt.body {
				t.Fatalf("SlotsOff %d BodySize %d, want %d %d", l.SlotsOff, l.BodySize, tt.slotsOff, tt.body)
			}
			checkRingLayout(t, tt.g, l)
		})
	}
}

// checkRingLayout asserts the invariants every accepted ring layout has.
func checkRingLayout(t *testing.T, g Geometry, l RingLayout) {
	t.Helper()
	if l.AllowReturned {
		t.Fatalf("ring layout %+v allows the returned state", l)
	}
	checkSlotGeometry(t, g, &l.SlotGeometry)
}

// checkSlotGeometry asserts the invariants every accepted ring or deque
// layout has.
func checkSlotGeometry(t *testing.T, g Geometry, l *SlotGeometry) {
	t.Helper()
	if l.Capacity != g.Capacity || l.SlotSize != uint64(g.SlotSize) ||
		l.Participants != uint64(g.Params[0]) || l.DeliveryLimit != g.Params[1] {
		t.Fatalf("layout %+v does not echo geometry %+v", l, g)
	}
	if l.CapShift >= 64 || uint64(1)<<l.CapShift != l.Capacity {
		t.Fatalf("CapShift %d for capacity %d", l.CapShift, l.Capacity)
	}
	if l.SlotsOff%CacheLine != 0 || l.SlotSize%CacheLine != 0 {
		t.Fatalf("SlotsOff %d / SlotSize %d not cache-line aligned", l.SlotsOff, l.SlotSize)
	}
	if l.Entries != PeerEntries(l.Participants) || l.Entries != l.Participants+1 {
		t.Fatalf("%d entries for %d participants, want %d (the repairer entry last)", l.Entries, l.Participants, l.Participants+1)
	}
	if l.Entries > 1<<slotOwnerBits-1 {
		t.Fatalf("%d entries: owner %d does not fit the owner field", l.Entries, l.Entries)
	}
	tableEnd := l.ParticipantOff(l.Entries)
	if l.SlotsOff < tableEnd || l.SlotsOff-tableEnd >= CacheLine {
		t.Fatalf("SlotsOff %d, participant table ends at %d", l.SlotsOff, tableEnd)
	}
	if l.ParticipantOff(0) != RingOffParticipants || RingOffParticipants%CacheLine != 0 {
		t.Fatalf("participant table at %d", l.ParticipantOff(0))
	}
	if l.SlotOff(0) != l.SlotsOff {
		t.Fatalf("SlotOff(0) = %d, SlotsOff %d", l.SlotOff(0), l.SlotsOff)
	}
	if last := l.SlotOff(l.Capacity - 1); last+l.SlotSize != l.BodySize {
		t.Fatalf("last slot at %d + %d != BodySize %d", last, l.SlotSize, l.BodySize)
	}
	if l.BodySize > MaxFileSize {
		t.Fatalf("BodySize %d beyond MaxFileSize", l.BodySize)
	}
	idBytes := uint64(0)
	if g.Params[2]&RingOptMessageIDs != 0 {
		idBytes = RingSlotIDSize
	}
	if l.MessageIDs != (idBytes != 0) || l.IDSize != idBytes {
		t.Fatalf("options %#x: MessageIDs %v IDSize %d", g.Params[2], l.MessageIDs, l.IDSize)
	}
	if l.PayloadMax() != l.SlotSize-RingSlotWordSize-idBytes || l.PayloadMax() >= 1<<slotLenBits {
		t.Fatalf("PayloadMax %d for slot size %d (length field holds %d)", l.PayloadMax(), l.SlotSize, 1<<slotLenBits-1)
	}
	if l.MessageIDs && (l.IDOff() != RingSlotWordSize+l.PayloadMax() || l.IDOff()%8 != 0) {
		t.Fatalf("id at %d of a %d-byte slot, payload %d", l.IDOff(), l.SlotSize, l.PayloadMax())
	}
}

// TestRingControlLines: control words written by different roles are on
// different cache lines, and every word is aligned for atomic access.
func TestRingControlLines(t *testing.T) {
	roles := map[string][]uint64{
		"producers":    {RingOffTail, RingOffPushed, RingOffFullHits, RingOffBurned},
		"consumers":    {RingOffHead, RingOffPopped, RingOffEmptyHits, RingOffDeferred},
		"not-empty":    {RingOffNotEmptySeq, RingOffNotEmptyWait},
		"not-full":     {RingOffNotFullSeq, RingOffNotFullWait},
		"correlation":  {RingOffCorrelation},
		"lease stats":  {RingOffClaimed, RingOffAcked, RingOffRequeued, RingOffPoisoned, RingOffAbandoned, RingOffRepairs},
		"repair lock":  {RingOffRepairLock},
		"participants": {RingOffParticipants},
	}
	checkControlLines(t, roles)
	m := (&RingLayout{SlotGeometry{Participants: 1, Entries: 2, Capacity: 2, SlotSize: 64, SlotsOff: 576}}).fieldMap()
	for _, f := range m.Fields {
		if f.Size != 4 && f.Size != 8 || f.Offset%f.Size != 0 {
			t.Errorf("%s: %d bytes at %d: not an aligned atomic word", f.Name, f.Size, f.Offset)
		}
		if f.Offset+f.Size > RingOffParticipants {
			t.Errorf("%s at %d runs into the participant table", f.Name, f.Offset)
		}
	}
}

// checkControlLines: each role's words share one cache line, and no two
// roles share a line.
func checkControlLines(t *testing.T, roles map[string][]uint64) {
	t.Helper()
	lineOf := map[uint64]string{}
	for role, offs := range roles {
		line := offs[0] / CacheLine
		for _, off := range offs {
			if off/CacheLine != line {
				t.Errorf("%s: offset %d is not on line %d with its role's other words", role, off, line)
			}
		}
		if other, dup := lineOf[line]; dup {
			t.Errorf("%s and %s share cache line %d", role, other, line)
		}
		lineOf[line] = role
	}
}

func TestRingHeaderMap(t *testing.T) {
	for _, g := range []Geometry{
		RingGeometry(8, 64, 4, 5),
		RingGeometry(2, 128, 3, 1),
		RingGeometry(1024, 4096, RingMaxParticipants, RingMaxDeliveryLimit),
	} {
		h, err := NewHeader(KindRing, g, 1, Creator{PID: 1})
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		l, _ := NewRingLayout(g)
		if h.FileSize != HeaderSize+l.BodySize {
			t.Fatalf("%+v: FileSize %d, want %d", g, h.FileSize, HeaderSize+l.BodySize)
		}
		m, err := h.Map()
		if err != nil {
			t.Fatal(err)
		}
		// Fields are sorted; they must not overlap. The header's exactly
		// cover [0, HeaderSize); the ring's lie inside its control area.
		var next, headerEnd uint64
		for _, f := range m.Fields {
			if f.Offset < next {
				t.Fatalf("%+v: %s at %d overlaps the field ending at %d", g, f.Name, f.Offset, next)
			}
			if f.Offset < HeaderSize {
				if f.Offset != next {
					t.Fatalf("%+v: gap in the header before %s at %d", g, f.Name, f.Offset)
				}
				headerEnd = f.Offset + f.Size
			} else if f.Offset+f.Size > HeaderSize+RingOffParticipants {
				t.Fatalf("%+v: %s at %d runs past the control area", g, f.Name, f.Offset)
			}
			next = f.Offset + f.Size
		}
		if headerEnd != HeaderSize {
			t.Fatalf("%+v: header fields end at %d", g, headerEnd)
		}
		if len(m.Areas) != 2 || m.Areas[0].Name != "participant" || m.Areas[1].Name != "slot" {
			t.Fatalf("%+v: areas %+v", g, m.Areas)
		}
		peers, slots := m.Areas[0], m.Areas[1]
		if peers.Offset != HeaderSize+RingOffParticipants || peers.Stride != RingParticipantSize || peers.Count != uint64(g.Params[0])+1 {
			t.Fatalf("%+v: participant area %+v", g, peers)
		}
		if end := peers.Offset + peers.Stride*peers.Count; end > slots.Offset {
			t.Fatalf("%+v: participant area ends at %d, after the slots start at %d", g, end, slots.Offset)
		}
		if slots.Offset%CacheLine != 0 || slots.Stride != uint64(g.SlotSize) || slots.Count != g.Capacity {
			t.Fatalf("%+v: slot area %+v", g, slots)
		}
		if end := slots.Offset + slots.Stride*slots.Count; end != h.FileSize {
			t.Fatalf("%+v: slot area ends at %d, file is %d", g, end, h.FileSize)
		}
		for _, a := range m.Areas {
			checkRecordFields(t, a)
		}
		// Spot checks through Locate.
		for _, tc := range []struct {
			off  uint64
			name string
		}{
			{HeaderSize + RingOffTail, "ring.tail"},
			{HeaderSize + RingOffRepairLock + 7, "ring.repair_lock"},
			{HeaderSize + RingOffParticipants + RingParticipantSize + 9, "participant[1].start"},
			// The repairer entry, entry P, and its pid namespace.
			{HeaderSize + RingOffParticipants + uint64(g.Params[0])*64 + 32, "participant[" + strconv.FormatUint(uint64(g.Params[0]), 10) + "].pid_ns"},
			{HeaderSize + RingOffParticipants + uint64(g.Params[0])*64 + 63, "participant[" + strconv.FormatUint(uint64(g.Params[0]), 10) + "].reserved"},
			{HeaderSize + l.SlotsOff + 3, "slot[0].word"},
			{h.FileSize - 1, "slot[" + strconv.FormatUint(g.Capacity-1, 10) + "].payload"},
		} {
			if tc.name == "participant[1].start" && g.Params[0] < 2 {
				continue
			}
			if name, _, _, ok := m.Locate(tc.off); !ok || name != tc.name {
				t.Errorf("%+v: Locate(%d) = %q %v, want %q", g, tc.off, name, ok, tc.name)
			}
		}
		if _, _, _, ok := m.Locate(HeaderSize + RingOffTail + 32); ok {
			t.Errorf("%+v: Locate found a field in the producers' line padding", g)
		}
		if _, _, _, ok := m.Locate(h.FileSize); ok {
			t.Errorf("%+v: Locate found a field past the end", g)
		}
	}
}

// checkRecordFields: an area's record fields tile the record exactly.
func checkRecordFields(t *testing.T, a Area) {
	t.Helper()
	fs := append([]Field(nil), a.Fields...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Offset < fs[j].Offset })
	var next uint64
	for _, f := range fs {
		if f.Offset != next {
			t.Fatalf("area %s: field %s at %d, expected %d", a.Name, f.Name, f.Offset, next)
		}
		next += f.Size
	}
	if next != a.Stride {
		t.Fatalf("area %s: fields cover %d of %d bytes", a.Name, next, a.Stride)
	}
}

func TestSlotWordRoundTrip(t *testing.T) {
	const maxOwner = 1<<slotOwnerBits - 1
	const maxLen = 1<<slotLenBits - 1
	const maxDeliv = 1<<slotDelivBits - 1
	words := []SlotWord{
		{},
		{State: SlotFree, Lap: 1},
		{State: SlotReady, Deliveries: 3, Length: 56, Lap: 12345},
		{State: SlotWriting, Owner: 1, Lap: SlotLapMask},
		{State: SlotLeased, Deliveries: maxDeliv, Owner: RingMaxParticipants, Length: maxLen, Lap: SlotLapMask},
		{State: 7, Deliveries: maxDeliv, Owner: maxOwner, Length: maxLen, Lap: SlotLapMask},
		// Each field at its maximum alone: no bleeding into neighbours.
		{State: 7}, {Deliveries: maxDeliv}, {Owner: maxOwner}, {Length: maxLen}, {Lap: SlotLapMask},
	}
	for _, w := range words {
		got := UnpackSlot(w.Pack())
		if got != w {
			t.Errorf("UnpackSlot(Pack(%+v)) = %+v", w, got)
		}
	}
	// The fields use all 64 bits.
	all := SlotWord{State: 7, Deliveries: maxDeliv, Owner: maxOwner, Length: maxLen, Lap: SlotLapMask}
	if all.Pack() != math.MaxUint64 {
		t.Errorf("all fields at max pack to %#x", all.Pack())
	}
	if UnpackSlot(math.MaxUint64) != all {
		t.Errorf("UnpackSlot(^0) = %+v", UnpackSlot(math.MaxUint64))
	}
	for _, v := range []uint64{0, 1, 0x8000000000000000, 0x0123456789abcdef, math.MaxUint64, 0xdeadbeefcafef00d} {
		if got := UnpackSlot(v).Pack(); got != v {
			t.Errorf("Pack(UnpackSlot(%#x)) = %#x", v, got)
		}
	}
	// Over-wide values are truncated to their field, never spill over.
	wide := SlotWord{State: 8 | SlotReady, Deliveries: 16 | 2, Owner: 1024 | 5, Length: 1<<20 | 9, Lap: 1<<27 | 4}
	want := SlotWord{State: SlotReady, Deliveries: 2, Owner: 5, Length: 9, Lap: 4}
	if got := UnpackSlot(wide.Pack()); got != want {
		t.Errorf("truncated pack: %+v, want %+v", got, want)
	}
}

func TestSlotWordValidate(t *testing.T) {
	l, err := NewRingLayout(RingGeometry(8, 64, 4, 5))
	if err != nil {
		t.Fatal(err)
	}
	if l.Entries != 5 {
		t.Fatalf("%d entries for 4 participants, want 5", l.Entries)
	}
	tests := []struct {
		name string
		w    SlotWord
		ok   bool
	}{
		{"free", SlotWord{Lap: 3}, true},
		{"free lap max", SlotWord{Lap: SlotLapMask}, true},
		{"ready", SlotWord{State: SlotReady, Deliveries: 2, Length: 56}, true},
		{"ready empty message", SlotWord{State: SlotReady}, true},
		{"writing", SlotWord{State: SlotWriting, Owner: 1}, true},
		{"reading last participant", SlotWord{State: SlotReading, Owner: 4, Deliveries: 1, Length: 10}, true},
		// Owner 5 is entry 4 of 4 participants: the repairer entry, which
		// stamps the copies a repair writes.
		{"leased repairer entry", SlotWord{State: SlotLeased, Owner: 5, Deliveries: 2, Length: 8}, true},
		{"writing repairer entry", SlotWord{State: SlotWriting, Owner: 5}, true},
		{"leased", SlotWord{State: SlotLeased, Owner: 2, Deliveries: 15, Length: 56}, true},
		{"poisoned", SlotWord{State: SlotPoisoned, Deliveries: 5, Length: 3}, true},

		{"state 6", SlotWord{State: 6}, false},
		{"state 7", SlotWord{State: 7, Owner: 1}, false},
		{"length over payload", SlotWord{State: SlotReady, Length: 57}, false},
		{"length max", SlotWord{State: SlotLeased, Owner: 1, Length: 1<<slotLenBits - 1}, false},
		{"writing owner 0", SlotWord{State: SlotWriting}, false},
		{"reading owner 0", SlotWord{State: SlotReading, Length: 1}, false},
		{"leased owner 0", SlotWord{State: SlotLeased, Length: 1}, false},
		{"leased owner past table", SlotWord{State: SlotLeased, Owner: 6}, false},
		{"reading owner past table", SlotWord{State: SlotReading, Owner: 6, Length: 1}, false},
		{"writing owner max", SlotWord{State: SlotWriting, Owner: 1023}, false},
		{"ready with owner", SlotWord{State: SlotReady, Owner: 1}, false},
		{"poisoned with owner", SlotWord{State: SlotPoisoned, Owner: 2}, false},
		{"free with owner", SlotWord{Owner: 1}, false},
		{"free with length", SlotWord{Length: 1}, false},
		{"free with deliveries", SlotWord{Deliveries: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.w.Validate(&l.SlotGeometry)
			if tt.ok && err != nil {
				t.Fatalf("%+v: %v", tt.w, err)
			}
			if !tt.ok && !errors.Is(err, ErrSlotCorrupt) {
				t.Fatalf("%+v: got %v, want ErrSlotCorrupt", tt.w, err)
			}
		})
	}
}

func TestSlotStateNames(t *testing.T) {
	for s := SlotState(0); s < 8; s++ {
		if s.Valid() != (s <= SlotReturned) {
			t.Errorf("%d.Valid() = %v", s, s.Valid())
		}
		if s.String() == "" {
			t.Errorf("state %d has no name", s)
		}
	}
	if SlotLeased.String() != "leased" || SlotState(7).String() != "state(7)" {
		t.Errorf("names: %s %s", SlotLeased, SlotState(7))
	}
	// Returned is a deque's state: a ring's slot in it is corrupt.
	w := SlotWord{State: SlotReturned, Length: 3}
	if err := w.Validate(&SlotGeometry{Participants: 1, Entries: 2, SlotSize: 64}); !errors.Is(err, ErrSlotCorrupt) {
		t.Errorf("ring accepted a returned slot: %v", err)
	}
	if err := w.Validate(&SlotGeometry{Participants: 1, Entries: 2, SlotSize: 64, AllowReturned: true}); err != nil {
		t.Errorf("deque rejected a returned slot: %v", err)
	}
}

func TestLapDiff(t *testing.T) {
	const half = 1 << (SlotLapBits - 1)
	tests := []struct {
		a, b uint32
		want int32
	}{
		{0, 0, 0},
		{5, 5, 0},
		{1, 0, 1},
		{0, 1, -1},
		{7, 3, 4},
		{3, 7, -4},
		// Wrap-around at 2^27.
		{0, SlotLapMask, 1},
		{SlotLapMask, 0, -1},
		{1, SlotLapMask, 2},
		{SlotLapMask - 1, 1, -3},
		{SlotLapMask, SlotLapMask, 0},
		// The signed range is [-2^26, 2^26).
		{half - 1, 0, half - 1},
		{half, 0, -half},
		{0, half, -half},
		{0, half - 1, -(half - 1)},
		// Bits above the lap field are ignored.
		{1<<SlotLapBits | 3, 1, 2},
		{0, 1 << SlotLapBits, 0},
		{math.MaxUint32, 0, -1},
	}
	for _, tt := range tests {
		if got := LapDiff(tt.a, tt.b); got != tt.want {
			t.Errorf("LapDiff(%#x, %#x) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	// Antisymmetric everywhere except at the one distance with no negation.
	for _, p := range [][2]uint32{{0, 1}, {SlotLapMask, 2}, {half + 5, 3}, {12345, SlotLapMask - 99}} {
		if LapDiff(p[0], p[1]) != -LapDiff(p[1], p[0]) {
			t.Errorf("LapDiff(%d,%d)=%d, LapDiff(%d,%d)=%d", p[0], p[1], LapDiff(p[0], p[1]), p[1], p[0], LapDiff(p[1], p[0]))
		}
	}
}

func TestLapOf(t *testing.T) {
	l, err := NewRingLayout(RingGeometry(8, 64, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pos  uint64
		want uint32
	}{
		{0, 0}, {7, 0}, {8, 1}, {17, 2},
		{8 << SlotLapBits, 0},             // wraps at 2^27 laps
		{8<<SlotLapBits - 1, SlotLapMask}, // the lap before the wrap
		{math.MaxUint64, SlotLapMask},     // a position at the very end
	} {
		if got := l.LapOf(tc.pos); got != tc.want {
			t.Errorf("LapOf(%d) = %d, want %d", tc.pos, got, tc.want)
		}
	}
	// Consecutive laps differ by one, across the wrap too.
	for _, pos := range []uint64{0, 8<<SlotLapBits - 8, math.MaxUint64 - 8} {
		if d := LapDiff(l.LapOf(pos+8), l.LapOf(pos)); d != 1 {
			t.Errorf("LapDiff across %d: %d", pos, d)
		}
	}
}

// TestPeerEntry pins the participant table entry of format 2: 64 bytes
// (ctl, start, boot, attached_ns, pid_ns, 24 reserved bytes), and n+1
// entries for n participants, entry n the repairer entry.
func TestPeerEntry(t *testing.T) {
	if PeerEntrySize != 64 || RingParticipantSize != 64 {
		t.Fatalf("entry size %d (ring %d), want 64", PeerEntrySize, RingParticipantSize)
	}
	for name, c := range map[string][2]uint64{
		"ctl":         {PeerOffCtl, 0},
		"start":       {PeerOffStart, 8},
		"boot":        {PeerOffBoot, 16},
		"attached_ns": {PeerOffAttached, 24},
		"pid_ns":      {PeerOffPidNS, 32},
	} {
		if c[0] != c[1] {
			t.Errorf("%s at %d, want %d", name, c[0], c[1])
		}
	}
	for _, c := range [][2]uint64{{1, 2}, {4, 5}, {64, 65}, {1022, 1023}} {
		if got := PeerEntries(c[0]); got != c[1] {
			t.Errorf("PeerEntries(%d) = %d, want %d", c[0], got, c[1])
		}
	}
	if RingMaxParticipants != 1022 || HashMapMaxParticipants != 1022 {
		t.Fatalf("max participants ring %d, hash map %d, want 1022", RingMaxParticipants, HashMapMaxParticipants)
	}
	// The repairer entry of the largest table is owner 1023, the largest
	// value of the 10-bit owner field (0 means none).
	if PeerEntries(RingMaxParticipants) != 1<<slotOwnerBits-1 || PeerEntries(HashMapMaxParticipants) != 1<<bucketOwnerBits-1 {
		t.Fatalf("largest owner %d does not fill the owner field", PeerEntries(RingMaxParticipants))
	}
	a := PeerArea(1000, 3)
	if a.Offset != 1000 || a.Stride != 64 || a.Count != 3 {
		t.Fatalf("PeerArea(1000, 3) = %+v", a)
	}
	want := []Field{
		{"ctl", 0, 8, ""}, {"start", 8, 8, ""}, {"boot", 16, 8, ""}, {"attached_ns", 24, 8, ""},
		{"pid_ns", 32, 8, ""}, {"reserved", 40, 24, ""},
	}
	if len(a.Fields) != len(want) {
		t.Fatalf("entry fields %+v", a.Fields)
	}
	for i, f := range a.Fields {
		if f.Name != want[i].Name || f.Offset != want[i].Offset || f.Size != want[i].Size {
			t.Errorf("entry field %d: %s at %d (%d bytes), want %s at %d (%d bytes)", i, f.Name, f.Offset, f.Size, want[i].Name, want[i].Offset, want[i].Size)
		}
	}
	checkRecordFields(t, a)
}

func TestPeerCtl(t *testing.T) {
	for _, c := range []PeerCtl{
		{},
		{State: PeerFree, Gen: 1},
		{State: PeerClaiming, PID: 1},
		{State: PeerActive, Gen: 0xffffff, PID: math.MaxUint32},
		{State: PeerDead, Gen: 0xabcdef, PID: 4194304},
		{State: 0xff, Gen: 0xffffff, PID: math.MaxUint32},
	} {
		if got := UnpackPeer(c.Pack()); got != c {
			t.Errorf("UnpackPeer(Pack(%+v)) = %+v", c, got)
		}
	}
	if (PeerCtl{State: 0xff, Gen: 0xffffff, PID: math.MaxUint32}).Pack() != math.MaxUint64 {
		t.Error("peer control word does not use all 64 bits")
	}
	// Gen is 24 bits: it wraps without touching state or pid.
	c := UnpackPeer(PeerCtl{State: PeerActive, Gen: 0x1000000 | 7, PID: 42}.Pack())
	if c != (PeerCtl{State: PeerActive, Gen: 7, PID: 42}) {
		t.Errorf("wide generation: %+v", c)
	}
	if v := (PeerCtl{State: PeerActive, Gen: 2, PID: 3}).Pack(); v != 3<<32|2<<8|2 {
		t.Errorf("Pack = %#x", v)
	}
	for s, want := range map[uint8]string{PeerFree: "free", PeerClaiming: "claiming", PeerActive: "active", PeerDead: "dead", 9: "state(9)"} {
		if got := PeerStateName(s); got != want {
			t.Errorf("PeerStateName(%d) = %q", s, got)
		}
	}
}

// FuzzRingLayout: NewRingLayout never panics on any geometry, and what it
// accepts is a layout that fits: the last slot ends at BodySize, everything
// is aligned and within MaxFileSize, and the header agrees.
func FuzzRingLayout(f *testing.F) {
	f.Add(uint64(8), uint32(64), uint32(4), uint32(5), uint32(0))
	f.Add(uint64(RingMaxCapacity), uint32(RingMaxSlotSize), uint32(RingMaxParticipants), uint32(RingMaxDeliveryLimit), uint32(0))
	f.Add(uint64(RingMaxCapacity), uint32(65472), uint32(RingMaxParticipants), uint32(1), uint32(0))
	f.Add(uint64(1<<63), uint32(math.MaxUint32), uint32(math.MaxUint32), uint32(math.MaxUint32), uint32(1))
	f.Add(uint64(0), uint32(0), uint32(0), uint32(0), uint32(0))
	f.Add(uint64(8), uint32(64), uint32(4), uint32(5), RingOptMessageIDs)
	f.Add(uint64(8), uint32(64), uint32(4), uint32(5), uint32(2))
	f.Add(uint64(2), uint32(RingMaxSlotSize), uint32(1), uint32(1), uint32(math.MaxUint32))
	f.Fuzz(func(t *testing.T, capacity uint64, slotSize, p0, p1, p2 uint32) {
		g := Geometry{Capacity: capacity, SlotSize: slotSize, Params: [3]uint32{p0, p1, p2}}
		l, err := NewRingLayout(g)
		h, herr := NewHeader(KindRing, g, 0, Creator{})
		if err != nil {
			if herr == nil {
				t.Fatalf("NewHeader accepted %+v that NewRingLayout rejects: %v", g, err)
			}
			return
		}
		checkRingLayout(t, g, l)
		if p2&^RingKnownOptions != 0 {
			t.Fatalf("NewRingLayout accepted unknown option bits %#x", p2)
		}
		if herr != nil {
			t.Fatalf("NewHeader rejected %+v that NewRingLayout accepts: %v", g, herr)
		}
		if h.FileSize != HeaderSize+l.BodySize || h.FileSize > MaxFileSize {
			t.Fatalf("FileSize %d for body %d", h.FileSize, l.BodySize)
		}
	})
}
