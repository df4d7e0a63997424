package transport

import (
	"errors"
	"testing"

	"github.com/shmkit/shmkit/layout"
)

// ClaimPoisoned turns a poisoned message into a lease of the caller's: Ack
// frees it; a lease released (or left by a dead holder and requeued) goes
// back into the ring still at its delivery limit, so the next take poisons
// it again. Nothing is lost or delivered past the limit.
func TestClaimedPoisonIsAnOrdinaryLease(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 4, DeliveryLimit: 1})
	if _, err := r.ClaimPoisoned(); !errors.Is(err, ErrEmpty) {
		t.Fatalf("no poison: %v", err)
	}
	if err := r.TryPush([]byte("pill")); err != nil {
		t.Fatal(err)
	}
	l, err := r.TryClaim()
	if err != nil || l.Deliveries != 1 {
		t.Fatalf("claim: %+v %v", l, err)
	}
	if err := r.Release(l); err != nil {
		t.Fatal(err)
	}
	before := r.Poisoned()
	if _, err := r.TryClaim(); !errors.Is(err, ErrEmpty) {
		t.Fatalf("a message at its limit was delivered again: %v", err)
	}
	if r.Poisoned() != before+1 {
		t.Fatalf("poisoned %d, want %d", r.Poisoned(), before+1)
	}
	p, err := r.ClaimPoisoned()
	if err != nil || string(p.Data()) != "pill" || p.Deliveries != 1 {
		t.Fatalf("ClaimPoisoned: %+v %v", p, err)
	}
	if sw := layout.UnpackSlot(r.slotWord(p.Slot()).Load()); sw.State != layout.SlotLeased || sw.Owner != r.tab.Self {
		t.Fatalf("the claimed poison's slot is %v", sw)
	}
	// Released, it is poisoned again by the next take.
	if err := r.Release(p); err != nil {
		t.Fatal(err)
	}
	if _, err := r.TryClaim(); !errors.Is(err, ErrEmpty) || r.Poisoned() != before+2 {
		t.Fatalf("after release: %v, poisoned %d", err, r.Poisoned())
	}
	p, err = r.ClaimPoisoned()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Ack(p); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ClaimPoisoned(); !errors.Is(err, ErrEmpty) {
		t.Fatalf("after ack: %v", err)
	}
	if rep := r.Scan(); rep.Problems != 0 || rep.Fault != nil {
		t.Fatalf("scan: %+v", rep)
	}
}
