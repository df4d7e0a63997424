package heartbeat

import "github.com/shmkit/shmkit/layout"

// Ticket names one registration: a slot and the generation the slot had
// while that member held it. A slot's generation moves on every free, so
// a ticket outlives its registration without ever naming the next one
// (the generation is 24 bits: it would take 16 M registrations of one
// slot, between a ticket's issue and its check, to alias).
//
// Other processes carry tickets to say on whose behalf work is done (the
// Pass scheduler writes its submitter's into every pass) and check them
// with Table.Holds and Table.Gone.
type Ticket struct {
	Slot uint32
	Gen  uint32
}

// Ticket returns the member's registration.
func (m *Member) Ticket() Ticket {
	return Ticket{Slot: uint32(m.slot), Gen: layout.UnpackPeer(m.ctl).Gen}
}

// Holds reports whether registration t is still in place: its slot is
// active at t's generation. It is one load, cheap enough for every pass
// a worker runs, and proves nothing about the holder's life: a member
// that died and was not yet reclaimed still holds its ticket (see Gone).
// False means the registration has ended: the member unregistered, or a
// watchdog reclaimed its slot on proof of death. A slot outside the
// table holds nothing.
func (h *Table) Holds(t Ticket) bool {
	if uint64(t.Slot) >= h.lay.Capacity {
		return false
	}
	c := layout.UnpackPeer(h.ctl(uint64(t.Slot)).Load())
	return c.State == layout.HBActive && c.Gen == t.Gen&0xffffff
}

// Gone reports whether registration t has ended (Holds is false) or its
// holder is proven dead (the entry-lock judge, which holds across pid
// reuse and pid namespaces). A holder the judge cannot decide on is not
// gone. It costs a system call when the registration is still in place:
// call it when Holds is not enough (before dropping work done for t).
func (h *Table) Gone(t Ticket) bool {
	if !h.Holds(t) {
		return true
	}
	p := h.snapshot(uint64(t.Slot), 0)
	if !h.Holds(t) {
		return true // the slot moved on while it was read
	}
	return p.Verdict.Dead
}
