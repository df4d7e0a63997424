package layout

import (
	"errors"
	"math"
	"strconv"
	"testing"
)

func TestNewAllGatherLayout(t *testing.T) {
	tests := []struct {
		name       string
		g          Geometry
		ok         bool
		bufferSize uint64 // checked when ok
		slotSize   uint64
	}{
		// 8 + 4 bytes fit one line.
		{"one word", AllGatherGeometry(1, 1), true, 64, 64 + 2*64},
		// 8 + 4*14 = 64: exactly one line.
		{"line exactly", AllGatherGeometry(3, 14), true, 64, 64 + 2*64},
		// 8 + 4*15 = 68: rounded up to two lines.
		{"line plus one", AllGatherGeometry(3, 15), true, 128, 64 + 2*128},
		{"default words", AllGatherGeometry(4, AGDefaultWords), true, 1088, 64 + 2*1088},
		{"maximum", AllGatherGeometry(AGMaxParticipants, AGMaxWords), true, 262208, 64 + 2*262208},
		{"participants 0", AllGatherGeometry(0, 8), false, 0, 0},
		{"participants over max", AllGatherGeometry(AGMaxParticipants+1, 8), false, 0, 0},
		{"participants 2^63", Geometry{Capacity: 1 << 63, Params: [3]uint32{8}}, false, 0, 0},
		{"words 0", AllGatherGeometry(2, 0), false, 0, 0},
		{"words over max", AllGatherGeometry(2, AGMaxWords+1), false, 0, 0},
		{"words max u32", AllGatherGeometry(2, math.MaxUint32), false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewAllGatherLayout(tt.g)
			if !tt.ok {
				if err == nil {
					t.Fatalf("accepted %+v: %+v", tt.g, l)
				}
				if _, herr := NewHeader(KindAllGather, tt.g, 0, Creator{}); !errors.Is(herr, ErrGeometry) {
					t.Fatalf("NewHeader accepted a geometry NewAllGatherLayout rejects: %v", herr)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected %+v: %v", tt.g, err)
			}
			if l.BufferSize != tt.bufferSize || l.SlotSize != tt.slotSize {
				t.Fatalf("BufferSize %d SlotSize %d, want %d %d", l.BufferSize, l.SlotSize, tt.bufferSize, tt.slotSize)
			}
			checkAllGatherLayout(t, tt.g, l)
		})
	}
}

// checkAllGatherLayout asserts the invariants every accepted layout has.
func checkAllGatherLayout(t *testing.T, g Geometry, l AllGatherLayout) {
	t.Helper()
	if l.Participants != g.Capacity || l.Words != uint64(g.Params[0]) {
		t.Fatalf("layout %+v does not echo geometry %+v", l, g)
	}
	if l.BufferSize%CacheLine != 0 || l.SlotSize%CacheLine != 0 {
		t.Fatalf("buffer %d / slot %d not cache-line aligned", l.BufferSize, l.SlotSize)
	}
	if l.BufferSize < AGBufWords+4*l.Words || l.BufferSize >= AGBufWords+4*l.Words+CacheLine {
		t.Fatalf("buffer %d for %d words", l.BufferSize, l.Words)
	}
	last := l.Participants - 1
	if l.BufferOff(last, 1)+l.BufferSize != l.BodySize || l.SlotOff(last)+l.SlotSize != l.BodySize {
		t.Fatalf("last slot ends at %d, body is %d", l.SlotOff(last)+l.SlotSize, l.BodySize)
	}
	if l.BodySize > MaxFileSize-HeaderSize {
		t.Fatalf("body %d beyond MaxFileSize", l.BodySize)
	}
	if l.BufferOff(0, 0) != AGSlotsOff+AGSlotBuffers || l.BufferOff(0, 1) != AGSlotsOff+AGSlotBuffers+l.BufferSize || l.BufferOff(0, 2) != l.BufferOff(0, 0) {
		t.Fatalf("buffer offsets %d %d %d", l.BufferOff(0, 0), l.BufferOff(0, 1), l.BufferOff(0, 2))
	}
}

// TestAllGatherControlLines: the futex line (written by publishers that
// wake) and the abort line (read on every wait) are separate, slot words
// are aligned for atomics, and each participant's slot starts on its own
// line.
func TestAllGatherControlLines(t *testing.T) {
	if AGOffSeq/CacheLine != AGOffWaiters/CacheLine || AGOffSeq/CacheLine == AGOffAbort/CacheLine {
		t.Fatal("futex words and abort word share or split lines wrongly")
	}
	if AGOffAbort+8 > AGSlotsOff || AGSlotsOff%CacheLine != 0 {
		t.Fatal("control area overlaps the slots")
	}
	for _, off := range []uint64{AGSlotCtl, AGSlotStart, AGSlotBoot, AGSlotRound, AGSlotJoined, AGSlotPidNS} {
		if off%8 != 0 || off+8 > AGSlotBuffers {
			t.Errorf("slot word at %d misaligned or in the buffers", off)
		}
	}
	// Format 2: the pid namespace at 40, then reserved bytes to 64.
	if AGSlotJoined != 32 || AGSlotPidNS != 40 || AGSlotBuffers != 64 {
		t.Errorf("joined at %d, pid_ns at %d, buffers at %d; want 32, 40, 64", AGSlotJoined, AGSlotPidNS, AGSlotBuffers)
	}
	if AGBufLen%4 != 0 || AGBufRound%4 != 0 || AGBufWords%4 != 0 {
		t.Error("buffer words misaligned")
	}
}

func TestAllGatherHeaderMap(t *testing.T) {
	for _, g := range []Geometry{AllGatherGeometry(1, 1), AllGatherGeometry(3, 15), AllGatherGeometry(2, 14), AllGatherGeometry(5, AGDefaultWords)} {
		h, err := NewHeader(KindAllGather, g, 1, Creator{PID: 1})
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		l, _ := NewAllGatherLayout(g)
		if h.FileSize != HeaderSize+l.BodySize {
			t.Fatalf("%+v: FileSize %d, want %d", g, h.FileSize, HeaderSize+l.BodySize)
		}
		m, err := h.Map()
		if err != nil {
			t.Fatal(err)
		}
		var next uint64
		for _, f := range m.Fields {
			if f.Offset != next {
				t.Fatalf("%+v: field %s at %d, expected %d", g, f.Name, f.Offset, next)
			}
			next = f.Offset + f.Size
		}
		if next != HeaderSize+AGSlotsOff {
			t.Fatalf("%+v: fields end at %d, slots start at %d", g, next, HeaderSize+AGSlotsOff)
		}
		if len(m.Areas) != 1 {
			t.Fatalf("areas %+v", m.Areas)
		}
		a := m.Areas[0]
		if a.Offset != HeaderSize+AGSlotsOff || a.Stride != l.SlotSize || a.Count != g.Capacity || a.Offset+a.Stride*a.Count != h.FileSize {
			t.Fatalf("%+v: participant area %+v", g, a)
		}
		checkRecordFields(t, a)
		for _, tc := range []struct {
			off  uint64
			name string
		}{
			{HeaderSize + AGOffSeq + 1, "ag.seq"},
			{HeaderSize + AGOffAbort + 7, "ag.abort"},
			{HeaderSize + l.SlotOff(0) + AGSlotRound, "participant[0].round"},
			{HeaderSize + l.SlotOff(0) + 40, "participant[0].pid_ns"},
			{HeaderSize + l.SlotOff(g.Capacity-1) + 47, "participant[" + strconv.FormatUint(g.Capacity-1, 10) + "].pid_ns"},
			{HeaderSize + l.SlotOff(0) + 48, "participant[0].reserved"},
			{HeaderSize + l.SlotOff(0) + 63, "participant[0].reserved"},
			{HeaderSize + l.SlotOff(0) + 64, "participant[0].buffer[0].len"},
			{HeaderSize + l.BufferOff(0, 1) + AGBufRound, "participant[0].buffer[1].round"},
			{HeaderSize + l.BufferOff(g.Capacity-1, 0) + AGBufWords + 4*l.Words - 1, "participant[" + strconv.FormatUint(g.Capacity-1, 10) + "].buffer[0].words"},
		} {
			if name, _, _, ok := m.Locate(tc.off); !ok || name != tc.name {
				t.Errorf("%+v: Locate(%d) = %q %v, want %q", g, tc.off, name, ok, tc.name)
			}
		}
	}
}

func TestAllGatherAbortWord(t *testing.T) {
	l, _ := NewAllGatherLayout(AllGatherGeometry(AGMaxParticipants, 1))
	for _, a := range []AGAbort{
		{Reason: AGAbortTimeout, Reporter: 1, Culprit: 2, Round: 7},
		{Reason: AGAbortTooLarge, Reporter: AGMaxParticipants, Culprit: 0, Round: math.MaxUint32},
		{Reason: AGAbortDead, Reporter: 0xfff, Culprit: 0xfff, Round: 1},
	} {
		got := UnpackAGAbort(a.Pack())
		if got != a {
			t.Errorf("%+v round-trips to %+v", a, got)
		}
	}
	if err := (AGAbort{Reason: AGAbortDead, Reporter: 1, Culprit: 2}).Validate(&l); err != nil {
		t.Error(err)
	}
	for _, bad := range []AGAbort{
		{Reason: 0, Reporter: 1},
		{Reason: 7, Reporter: 1},
		{Reason: AGAbortDead, Reporter: 0},
		{Reason: AGAbortDead, Reporter: AGMaxParticipants + 1},
		{Reason: AGAbortDead, Reporter: 1, Culprit: AGMaxParticipants + 1},
	} {
		if bad.Validate(&l) == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	if AGAbortName(AGAbortLength) != "length mismatch" || AGAbortName(0) != "reason(0)" || AGAbortName(99) != "reason(99)" {
		t.Error("abort names")
	}
	if AGStateName(AGLeft) != "left" || AGStateName(9) != "state(9)" {
		t.Error("state names")
	}
}

// FuzzAllGatherLayout: NewAllGatherLayout never panics on any geometry;
// what it accepts fits (the last slot ends at BodySize, all aligned, within
// MaxFileSize), the header agrees, and the field map tiles every slot.
func FuzzAllGatherLayout(f *testing.F) {
	f.Add(uint64(3), uint32(0), uint32(16), uint32(0), uint32(0), uint64(0))
	f.Add(uint64(AGMaxParticipants), uint32(0), uint32(AGMaxWords), uint32(0), uint32(0), uint64(1))
	f.Add(uint64(1<<63), uint32(64), uint32(math.MaxUint32), uint32(1), uint32(1), uint64(math.MaxUint64))
	f.Add(uint64(0), uint32(0), uint32(0), uint32(0), uint32(0), uint64(0))
	f.Fuzz(func(t *testing.T, capacity uint64, slotSize, p0, p1, p2 uint32, abort uint64) {
		g := Geometry{Capacity: capacity, SlotSize: slotSize, Params: [3]uint32{p0, p1, p2}}
		l, err := NewAllGatherLayout(g)
		h, herr := NewHeader(KindAllGather, g, 0, Creator{})
		if err != nil {
			if herr == nil {
				t.Fatalf("NewHeader accepted %+v that NewAllGatherLayout rejects: %v", g, err)
			}
			return
		}
		checkAllGatherLayout(t, g, l)
		a := UnpackAGAbort(abort)
		if a.Validate(&l) == nil && UnpackAGAbort(a.Pack()) != a {
			t.Fatalf("valid abort %+v does not round-trip", a)
		}
		if slotSize != 0 || p1 != 0 || p2 != 0 {
			if herr == nil {
				t.Fatalf("NewHeader accepted unused fields in %+v", g)
			}
			return
		}
		if herr != nil {
			t.Fatalf("NewHeader rejected %+v that NewAllGatherLayout accepts: %v", g, herr)
		}
		if h.FileSize != HeaderSize+l.BodySize || h.FileSize > MaxFileSize {
			t.Fatalf("FileSize %d for body %d", h.FileSize, l.BodySize)
		}
		if l.Words <= 4096 { // keep the field map affordable
			m, err := h.Map()
			if err != nil {
				t.Fatal(err)
			}
			checkRecordFields(t, m.Areas[0])
			if name, _, _, ok := m.Locate(h.FileSize - 1); !ok || name == "" {
				t.Fatalf("last byte not named")
			}
		}
	})
}
