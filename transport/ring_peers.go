package transport

import (
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport/check"
)

// The ring's use of its participant table (package internal/peers): what a takeover and a
// detach recover.

// attach takes a free participant entry. When none is free and some
// belong to dead processes, it repairs the ring as the repairer (the
// handle has no entry yet), which requeues what they held and frees their
// entries, parking on the repairer entry the leases it cannot requeue
// for want of room (so that their entries can be freed too), and tries
// again.
func (r *Ring) attach() error {
	return r.tab.Attach(func() (check.RepairReport, error) { return r.repairAs(true) })
}

// detach hands this participant's leases back to the ring, rolls back
// the loans it still holds (TryLoan, Loan: each a slot it is writing,
// released as Abort does, counted abandoned) and frees its entry. Slots
// it is reading cannot exist: Close comes after every other call has
// returned.
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
	// Leases we could not queue again (no room) stay stamped with our
	// entry, marked dead, so a later Repair requeues them. The hint that
	// makes consumers run that repair is raised only once the entry is
	// dead: a repair clears it when it starts, and one that ran between
	// the two would find our entry alive and skip its leases.
	r.tab.Release(deferred)
	if h := r.detachHook; h != nil {
		h()
	}
	if deferred {
		r.deferred.Add(1)
	}
	return firstErr
}
