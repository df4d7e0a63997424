package heartbeat

import (
	"errors"
	"testing"
)

// Found by a review: RecordLease after Unregister (or racing it: RecordLease drops
// m.mu before writing the record) writes into a slot that is no longer
// the member's, here already another member's, and reports success.
func TestUnregisteredMemberWritesNothing(t *testing.T) {
	f := newTestFiles(t)
	h, err := Create(f.hb, Config{Capacity: 1, Leases: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	m1, err := h.Register("first")
	if err != nil {
		t.Fatal(err)
	}
	if err := m1.Unregister(); err != nil {
		t.Fatal(err)
	}
	m2, err := h.Register("second")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m1.RecordLease(0x77, 1, 0, 1)
	p, _ := h.Snapshot(m2.Slot())
	t.Logf("RecordLease by the unregistered member: err=%v; slot %d (%s) now lists leases %+v", err, m2.Slot(), p.Label, p.Leases)
	if err == nil || !errors.Is(err, ErrNotRegistered) || len(p.Leases) != 0 {
		t.Fatalf("an unregistered member recorded a lease into member %q's slot (err %v)", p.Label, err)
	}
}
