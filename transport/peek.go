package transport

import (
	"sync/atomic"

	"github.com/shmkit/shmkit/layout"
)

// Peeked is one message as Peek saw it, left where it is.
type Peeked struct {
	Position   uint64           // its queue position
	Slot       uint64           // its slot
	State      layout.SlotState // SlotReady, SlotWriting (still being written: no Data), or SlotReturned (deques)
	Deliveries int              // deliveries so far (a take makes it one more)
	ID         uint64           // its message id (Ring.MessageIDs); 0 without ids, or for a writing slot
	Data       []byte           // a copy of the payload; nil for a writing slot
}

// Peek returns up to max of the ring's queued messages, oldest first (the
// order consumers take them in), without taking any: it reads the mapping
// and writes nothing, so it works on a read-only handle
// (OpenRingReadOnly), never attaches and never blocks a producer or a
// consumer. A message taken while Peek copies it is left out (its word
// changed under the copy), so every Data is a payload exactly as
// published. What it shows may be gone by the time the caller looks. It
// runs under the file's fault guard: a file truncated under it gives an
// error wrapping shm.ErrFault.
func (r *Ring) Peek(max int) ([]Peeked, error) {
	return guarded(r.reg, "peek", func() ([]Peeked, error) {
		h := r.head.Load()
		t := r.tail.Load() // after the head: never before it
		return peekRange(&r.lay.SlotGeometry, r.slotWord, r.payload, r.leaseID, h, t, max, nil)
	})
}

// Peek returns up to max of the deque's messages in the order thieves and
// claims take them, without taking any: [top, bottom) from the top, then
// the returned messages (taken once the rest is empty; their position is
// the one they had). Like Ring.Peek it writes nothing, works on a
// read-only handle and leaves out a message taken while it copied it. The
// owner pops from the bottom: its next pop is the last of the first part.
func (d *Deque) Peek(max int) ([]Peeked, error) {
	return guarded(d.reg, "peek", func() ([]Peeked, error) {
		t := d.top.Load()
		b := d.bottom.Load()
		out, err := peekRange(&d.lay.SlotGeometry, d.slotWord, d.payload, d.slotID, t, b, max, nil)
		if err != nil || len(out) >= max {
			return out, err
		}
		for i := uint64(0); i < d.lay.Capacity && len(out) < max; i++ {
			w := d.slotWord(i)
			raw := w.Load()
			sw := layout.UnpackSlot(raw)
			if sw.State != layout.SlotReturned || sw.Validate(&d.lay.SlotGeometry) != nil {
				continue // a corrupt word is Check's to report
			}
			if data, id, ok := copyStable(w, raw, d.payload(i, sw.Length), d.slotID, i); ok {
				out = append(out, Peeked{Position: slotPosition(&d.lay.SlotGeometry, i, sw.Lap, t), Slot: i,
					State: layout.SlotReturned, Deliveries: int(sw.Deliveries), ID: id, Data: data})
			}
		}
		return out, nil
	})
}

// peekRange reads positions [lo, hi) (at most a capacity of them) and
// returns up to max of the messages queued there, appended to out. word
// payload and id are the file's slot accessors (all mask the position).
func peekRange(l *layout.SlotGeometry, word func(uint64) *atomic.Uint64, payload func(uint64, uint32) []byte, id func(uint64) uint64, lo, hi uint64, max int, out []Peeked) ([]Peeked, error) {
	if out == nil {
		out = []Peeked{}
	}
	if hi < lo {
		return out, nil // indices out of order: Check's to report
	}
	if hi-lo > l.Capacity {
		hi = lo + l.Capacity
	}
	for p := lo; p < hi && len(out) < max; p++ {
		w := word(p)
		raw := w.Load()
		sw := layout.UnpackSlot(raw)
		if layout.LapDiff(sw.Lap, l.LapOf(p)) != 0 {
			continue // taken and freed, burned, or not this lap's: not queued
		}
		switch sw.State {
		case layout.SlotWriting:
			out = append(out, Peeked{Position: p, Slot: p & (l.Capacity - 1), State: layout.SlotWriting, Deliveries: int(sw.Deliveries)})
		case layout.SlotReady:
			if sw.Validate(l) != nil {
				continue
			}
			if data, mid, ok := copyStable(w, raw, payload(p, sw.Length), id, p); ok {
				out = append(out, Peeked{Position: p, Slot: p & (l.Capacity - 1), State: layout.SlotReady, Deliveries: int(sw.Deliveries), ID: mid, Data: data})
			}
		}
	}
	return out, nil
}

// copyStable copies src, the payload of the slot whose word w was raw,
// and the message id of position p (id reads it), and reports whether
// the word was still raw after both. A payload and an id are written only
// while their slot is WRITING at a new lap, so an unchanged word (it
// carries the lap) means the copy is the message as published.
func copyStable(w *atomic.Uint64, raw uint64, src []byte, id func(uint64) uint64, p uint64) ([]byte, uint64, bool) {
	data := append([]byte{}, src...)
	mid := id(p)
	return data, mid, w.Load() == raw
}

// PeekSlot copies the payload of a ring's slot i if its word is still raw
// (as a Scan reported it) and holds a whole message (ready, being read,
// leased, poisoned); ok is false otherwise. It writes nothing (inspect
// --slots shows it as a preview). It runs under the file's fault guard.
func (r *Ring) PeekSlot(i, raw uint64) (data []byte, ok bool, err error) {
	data, _, ok, err = r.PeekSlotID(i, raw)
	return data, ok, err
}

// PeekSlotID is PeekSlot returning the message's id too (0 in a file
// without message ids).
func (r *Ring) PeekSlotID(i, raw uint64) (data []byte, id uint64, ok bool, err error) {
	return peekSlot(r.reg.Guard, &r.lay.SlotGeometry, r.slotWord(i), raw, func(n uint32) []byte { return r.payload(i, n) }, r.leaseID, i)
}

// PeekSlot is Ring.PeekSlot for a deque's slot i (a returned message too).
func (d *Deque) PeekSlot(i, raw uint64) (data []byte, ok bool, err error) {
	data, _, ok, err = d.PeekSlotID(i, raw)
	return data, ok, err
}

// PeekSlotID is Ring.PeekSlotID for a deque's slot i.
func (d *Deque) PeekSlotID(i, raw uint64) (data []byte, id uint64, ok bool, err error) {
	return peekSlot(d.reg.Guard, &d.lay.SlotGeometry, d.slotWord(i), raw, func(n uint32) []byte { return d.payload(i, n) }, d.slotID, i)
}

func peekSlot(guard func(string, func() error) error, l *layout.SlotGeometry, w *atomic.Uint64, raw uint64, payload func(uint32) []byte, idOf func(uint64) uint64, i uint64) (data []byte, id uint64, ok bool, err error) {
	sw := layout.UnpackSlot(raw)
	switch sw.State {
	case layout.SlotReady, layout.SlotReading, layout.SlotLeased, layout.SlotPoisoned, layout.SlotReturned:
	default:
		return nil, 0, false, nil
	}
	if sw.Validate(l) != nil {
		return nil, 0, false, nil
	}
	err = guard("peek", func() error {
		if w.Load() == raw {
			data, id, ok = copyStable(w, raw, payload(sw.Length), idOf, i)
		}
		return nil
	})
	if err != nil || !ok {
		return nil, 0, false, err
	}
	return data, id, true, nil
}
