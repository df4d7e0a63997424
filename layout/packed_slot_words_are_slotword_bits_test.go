package layout

import (
	"math/rand/v2"
	"testing"
)

// The packed slot word helpers (slotword_packed.go) are the same bits as
// SlotWord.Pack and UnpackSlot: no second format. Each helper is checked
// against them on every word it is given.
func checkPackedAgainstSlotWord(t *testing.T, v uint64, pos uint64, capShift uint) {
	t.Helper()
	sw := UnpackSlot(v)
	if got := SlotStateOf(v); got != sw.State {
		t.Fatalf("%#x: SlotStateOf %d, UnpackSlot %d", v, got, sw.State)
	}
	if got := SlotOwnerOf(v); got != sw.Owner {
		t.Fatalf("%#x: SlotOwnerOf %d, UnpackSlot %d", v, got, sw.Owner)
	}
	if got := SlotLengthOf(v); got != sw.Length {
		t.Fatalf("%#x: SlotLengthOf %d, UnpackSlot %d", v, got, sw.Length)
	}
	if got := SlotDeliveriesOf(v); got != sw.Deliveries {
		t.Fatalf("%#x: SlotDeliveriesOf %d, UnpackSlot %d", v, got, sw.Deliveries)
	}
	if got := SlotLapOf(v); got != sw.Lap {
		t.Fatalf("%#x: SlotLapOf %d, UnpackSlot %d", v, got, sw.Lap)
	}
	if got, want := SlotFreeNextLap(v), (SlotWord{Lap: (sw.Lap + 1) & SlotLapMask}).Pack(); got != want {
		t.Fatalf("%#x: SlotFreeNextLap %#x, Pack %#x", v, got, want)
	}
	// Fields composed one by one are Pack of the same fields.
	composed := uint64(sw.State) | SlotDeliveryBits(sw.Deliveries) | SlotOwnerBits(sw.Owner) | SlotLengthBits(sw.Length) | uint64(sw.Lap)<<slotLapShift
	if composed != v || sw.Pack() != v {
		t.Fatalf("%#x: composed %#x, Pack %#x", v, composed, sw.Pack())
	}
	fields := SlotStateField | SlotDeliveryField | SlotOwnerField | SlotLengthField | SlotLapField
	if fields != ^uint64(0) || SlotStateField&SlotDeliveryField|SlotDeliveryField&SlotOwnerField|SlotOwnerField&SlotLengthField|SlotLengthField&SlotLapField != 0 {
		t.Fatalf("field masks overlap or leave bits out: %#x", fields)
	}
	// Oversized field values are truncated as Pack truncates them.
	wide := SlotWord{Deliveries: uint8(v), Owner: uint16(v >> 8), Length: uint32(v >> 16)}
	if got := SlotDeliveryBits(wide.Deliveries) | SlotOwnerBits(wide.Owner) | SlotLengthBits(wide.Length); got != wide.Pack() {
		t.Fatalf("%+v: truncated fields %#x, Pack %#x", wide, got, wide.Pack())
	}
	g := SlotGeometry{CapShift: capShift}
	if got, want := SlotFreeAt(pos, capShift), (SlotWord{Lap: g.LapOf(pos)}).Pack(); got != want {
		t.Fatalf("SlotFreeAt(%d, %d) = %#x, Pack of LapOf %#x", pos, capShift, got, want)
	}
	if SlotDeliveryOne != SlotDeliveryBits(1) {
		t.Fatalf("SlotDeliveryOne %#x", SlotDeliveryOne)
	}
}

func TestPackedSlotWordsAreSlotWordBits(t *testing.T) {
	edges := []uint64{0, 1, ^uint64(0), 1 << 63, SlotLapField, SlotLapField | SlotLengthField, 0x5555555555555555, 0xaaaaaaaaaaaaaaaa}
	for _, v := range edges {
		for _, shift := range []uint{1, 10, 24, 63} {
			checkPackedAgainstSlotWord(t, v, v, shift)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		checkPackedAgainstSlotWord(t, rng.Uint64(), rng.Uint64(), uint(rng.IntN(64)))
	}
}

func FuzzPackedSlotWordsAreSlotWordBits(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint(10))
	f.Add(^uint64(0), ^uint64(0), uint(24))
	f.Fuzz(func(t *testing.T, v, pos uint64, capShift uint) {
		checkPackedAgainstSlotWord(t, v, pos, capShift%64)
	})
}
