package layout

import (
	"math"
	"testing"
)

func TestCancelBoardOwnerWordRoundTrip(t *testing.T) {
	for _, o := range []CBOwner{{0, 0}, {65535, 0xffffff}, {3, 17}, {math.MaxUint32 - 1, 1}} {
		got, ok := UnpackCBOwner(o.Pack())
		if !ok || got != o {
			t.Fatalf("%+v -> %+v %v", o, got, ok)
		}
	}
	if _, ok := UnpackCBOwner(0); ok {
		t.Fatal("a free entry decoded as owned")
	}
}

// FuzzCancelBoardLayout: NewCancelBoardLayout never panics; what it
// accepts fits (entries end within BodySize, a cache-line multiple, within
// MaxFileSize), the header agrees, every byte of the file is named; owner
// words decode without panicking and re-encode when owned.
func FuzzCancelBoardLayout(f *testing.F) {
	f.Add(uint64(256), uint32(0), uint32(0), uint64(0))
	f.Add(uint64(CBMaxEntries), uint32(0), uint32(0), uint64(math.MaxUint64))
	f.Add(uint64(0), uint32(64), uint32(1), uint64(1))
	f.Add(uint64(1<<63), uint32(0), uint32(0), uint64(1<<32))
	f.Fuzz(func(t *testing.T, capacity uint64, slotSize, p0 uint32, owner uint64) {
		if o, ok := UnpackCBOwner(owner); ok {
			if back, _ := UnpackCBOwner(o.Pack()); back != o {
				t.Fatalf("owner %#x decodes to %+v, which re-encodes to %+v", owner, o, back)
			}
		}
		g := Geometry{Capacity: capacity, SlotSize: slotSize, Params: [3]uint32{p0}}
		l, err := NewCancelBoardLayout(g)
		h, herr := NewHeader(KindCancelBoard, g, 0, Creator{})
		if err != nil {
			if herr == nil {
				t.Fatalf("NewHeader accepted %+v that NewCancelBoardLayout rejects: %v", g, err)
			}
			return
		}
		if l.EntryOff(l.Entries-1)+CBEntrySize > l.BodySize || l.BodySize%CacheLine != 0 {
			t.Fatalf("entries overrun the body: %+v", l)
		}
		if slotSize != 0 || p0 != 0 {
			if herr == nil {
				t.Fatalf("NewHeader accepted unused fields in %+v", g)
			}
			return
		}
		if herr != nil {
			t.Fatalf("NewHeader rejected %+v that NewCancelBoardLayout accepts: %v", g, herr)
		}
		if h.FileSize != HeaderSize+l.BodySize || h.FileSize > MaxFileSize {
			t.Fatalf("FileSize %d for body %d", h.FileSize, l.BodySize)
		}
		m, err := h.Map()
		if err != nil {
			t.Fatal(err)
		}
		if name, _, _, ok := m.Locate(h.FileSize - 1); !ok || name == "" {
			t.Fatal("last byte not named")
		}
	})
}
