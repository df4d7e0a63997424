package transport

import (
	"github.com/shmkit/shmkit/layout"
)

// The ring's use of its participant table (package internal/peers): what a takeover and a
// detach recover.

func (r *Ring) attach() error { return r.tab.Attach(r.reclaimStamp) }

// reclaimStamp recovers every slot still stamped with stamp, whose earlier
// owner is proven dead, without a push (an entry being claimed has no stamp
// to push with). If one cannot be (a lease, or a read that no producer
// waits on), the entry is handed to Repair instead.
func (r *Ring) reclaimStamp(stamp uint16, _ uint32) bool {
	for s := uint64(0); s < r.lay.Capacity; s++ {
		raw := r.slotWord(s).Load()
		sw := layout.UnpackSlot(raw)
		if sw.Owner != stamp || sw.Validate(&r.lay.SlotGeometry) != nil {
			continue
		}
		if r.recoverWithoutPush(s, raw, sw) == recoveredDeferred {
			r.deferred.Add(1)
			return false
		}
	}
	return true
}

// detach hands this participant's leases back to the ring and frees its
// entry. Slots it is writing or reading cannot exist: Close comes after
// every other call has returned.
func (r *Ring) detach() error {
	me := r.tab.Self
	var firstErr error
	deferred := false
	for i := uint64(0); i < r.lay.Capacity; i++ {
		raw := r.slotWord(i).Load()
		sw := layout.UnpackSlot(raw)
		if sw.Owner != me || sw.Validate(&r.lay.SlotGeometry) != nil {
			continue
		}
		what, err := r.recoverSlot(i, raw, sw)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		deferred = deferred || what == recoveredDeferred || err != nil
	}
	if deferred {
		// Leases we could not queue again (no room) stay stamped with
		// our entry, marked dead, so a later Repair requeues them.
		r.deferred.Add(1)
	}
	r.tab.Release(deferred)
	return firstErr
}
