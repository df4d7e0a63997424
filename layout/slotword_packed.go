package layout

// Slot words as packed uint64 values, for the per-message paths of the
// ring and the deque: the same bits as SlotWord.Pack and UnpackSlot (no
// other format), built and tested as one word that stays in a register.
// SlotWord has five fields, and the Go compiler keeps a struct of more
// than four fields in memory: a word decoded into one, or one built to be
// packed, goes to the stack field by field and is loaded back whole, a
// store-forwarding stall on every call (docs/bench.md, "The per-message
// path"). Validation stays SlotWord.Validate's; these only move bits.

// Masks of a packed slot word's fields, in place.
const (
	SlotStateField    uint64 = 1<<slotStateBits - 1
	SlotDeliveryField uint64 = (1<<slotDelivBits - 1) << slotDelivShift
	SlotOwnerField    uint64 = (1<<slotOwnerBits - 1) << slotOwnerShift
	SlotLengthField   uint64 = (1<<slotLenBits - 1) << slotLenShift
	SlotLapField      uint64 = SlotLapMask << slotLapShift

	// SlotDeliveryOne added to a packed word counts one more delivery
	// (the caller has checked that the count stays under the field's
	// limit, RingMaxDeliveryLimit).
	SlotDeliveryOne uint64 = 1 << slotDelivShift
)

// SlotFreeAt returns the packed FREE word at the lap of position pos in
// a ring or deque of 1<<capShift slots: Pack of SlotWord{Lap:
// l.LapOf(pos)}, and so the lap field to OR other fields into.
func SlotFreeAt(pos uint64, capShift uint) uint64 {
	// Shifting left by slotLapShift drops the lap's bits above
	// SlotLapBits, as LapOf's mask does; capShift < 64 in any geometry
	// (the mask only spares the compiler's check for larger shifts).
	return pos >> (capShift & 63) << slotLapShift
}

// SlotOwnerBits returns the owner field holding owner (truncated as Pack
// truncates it).
func SlotOwnerBits(owner uint16) uint64 {
	return uint64(owner) << slotOwnerShift & SlotOwnerField
}

// SlotLengthBits returns the length field holding n (truncated as Pack
// truncates it).
func SlotLengthBits(n uint32) uint64 { return uint64(n) << slotLenShift & SlotLengthField }

// SlotDeliveryBits returns the deliveries field holding d (truncated as
// Pack truncates it).
func SlotDeliveryBits(d uint8) uint64 { return uint64(d) << slotDelivShift & SlotDeliveryField }

// SlotStateOf returns the state field of packed word v.
func SlotStateOf(v uint64) SlotState { return SlotState(v & SlotStateField) }

// SlotOwnerOf returns the owner field of packed word v.
func SlotOwnerOf(v uint64) uint16 { return uint16(v >> slotOwnerShift & (1<<slotOwnerBits - 1)) }

// SlotLengthOf returns the length field of packed word v.
func SlotLengthOf(v uint64) uint32 { return uint32(v >> slotLenShift & (1<<slotLenBits - 1)) }

// SlotDeliveriesOf returns the deliveries field of packed word v.
func SlotDeliveriesOf(v uint64) uint8 { return uint8(v >> slotDelivShift & (1<<slotDelivBits - 1)) }

// SlotLapOf returns the lap field of packed word v.
func SlotLapOf(v uint64) uint32 { return uint32(v >> slotLapShift) }

// SlotFreeNextLap returns the packed FREE word of the lap after packed
// word v's (modulo 2^SlotLapBits): what a consumer done with a slot
// stores so that the next lap's producer may take it.
func SlotFreeNextLap(v uint64) uint64 { return (v>>slotLapShift + 1) << slotLapShift }
