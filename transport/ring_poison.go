package transport

import (
	"github.com/shmkit/shmkit/layout"
)

// ClaimPoisoned leases a poisoned message (one set aside after
// DeliveryLimit deliveries), or returns ErrEmpty if there is none: the
// slot goes from poisoned to leased by this participant, so whoever takes
// it can act on it (answer its sender, log it) and then Ack it, and a
// process that dies holding it leaves an ordinary orphaned lease, which a
// repair requeues; the message, still at its delivery limit, is poisoned
// again by the next take. TakePoisoned, which copies and frees in one
// step, loses the message if its caller dies before acting on it.
func (r *Ring) ClaimPoisoned() (Lease, error) {
	if r.tab.Self == 0 {
		return Lease{}, ErrNotAttached
	}
	for i := uint64(0); i < r.lay.Capacity; i++ {
		w := r.slotWord(i)
		for {
			raw := w.Load()
			sw := layout.UnpackSlot(raw)
			if sw.State != layout.SlotPoisoned {
				break
			}
			if err := sw.Validate(&r.lay.SlotGeometry); err != nil {
				return Lease{}, r.corrupt(i, raw, err)
			}
			leased := sw
			leased.State, leased.Owner = layout.SlotLeased, r.tab.Self
			if w.CompareAndSwap(raw, leased.Pack()) {
				r.claimed.Add(1)
				return Lease{slot: i, lap: sw.Lap, data: r.payload(i, sw.Length), Deliveries: int(sw.Deliveries)}, nil
			}
		}
	}
	return Lease{}, ErrEmpty
}

// DeliveryLimit is how many deliveries a message gets before it is set
// aside as poison.
func (r *Ring) DeliveryLimit() int { return int(r.lay.DeliveryLimit) }

// Poisoned is how many messages this ring has set aside as poison in its
// life (one load of a rarely written word): a caller that answers poison
// (ClaimPoisoned) looks when it moves.
func (r *Ring) Poisoned() uint64 { return r.poisoned.Load() }
