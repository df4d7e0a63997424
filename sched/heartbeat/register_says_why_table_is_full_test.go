package heartbeat

import (
	"errors"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// The invariant: a Register that cannot take a slot changes nothing it
// does not own and says why, counting the live, the undecided and the
// dead it had to keep; given the queue it lacked, it recovers the slot.

// TestRegisterFullSaysWhy: a 4-slot table holds a live member, an
// undecided one (a live pid whose lock nobody holds, as a binary taking no
// lock would leave) and two dead members whose leases are in a ring not
// given to Register. Register fails with a FullError that counts them and
// names the ring; given the ring, it requeues a dead member's lease,
// takes its slot, and never touches the undecided one.
func TestRegisterFullSaysWhy(t *testing.T) {
	f := newTestFiles(t)
	r, err := transport.CreateRing(f.ring, transport.RingConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, m := range []string{"job-1", "job-2"} {
		if err := r.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := Create(f.hb, Config{Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	live, err := h.Register("live")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		c := startChild(t, f, "hold")
		c.WaitLine(t, "holding")
		c.Kill()
		c.Wait()
	}
	// The undecided member: this process's identity, with no lock.
	undecided := uint64(3)
	self := shm.Self()
	base := h.lay.SlotOff(undecided)
	h.area.U64(base + layout.HBSlotStart).Store(self.Start)
	h.area.U64(base + layout.HBSlotBoot).Store(shm.BootTag())
	h.area.U64(base + layout.HBSlotPidNS).Store(shm.PidNamespace())
	h.ctl(undecided).Store(layout.PeerCtl{State: layout.HBActive, PID: uint32(self.PID)}.Pack())
	if p, _ := h.Snapshot(int(undecided)); p.Health(0) != "unknown" || !p.Verdict.Unknown || p.Verdict.Dead {
		t.Fatalf("a live pid without its lock: %+v", p.Verdict)
	}

	_, err = h.Register("newcomer")
	var full *FullError
	if !errors.As(err, &full) || !errors.Is(err, ErrTableFull) {
		t.Fatalf("Register on the full table: %v", err)
	}
	if full.Live != 1 || full.Unknown != 1 || full.Dead != 2 || len(full.Kept) != 2 || full.Kept[0].Why != KeepQueueNotGiven || full.Kept[0].Queue != r.ID() {
		t.Fatalf("full error %+v", full)
	}
	for _, want := range []string{"1 live", "1 unknown", "2 dead but kept", "2 with a lease in queue", "not given to Register"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	t.Log(err)

	m, err := h.Register("newcomer", r)
	if err != nil {
		t.Fatal(err)
	}
	if m.Slot() == int(undecided) || m.Slot() == live.Slot() || !live.Registered() {
		t.Fatalf("newcomer took slot %d", m.Slot())
	}
	if p, _ := h.Snapshot(int(undecided)); p.Health(0) != "unknown" {
		t.Fatalf("the undecided member was touched: %+v", p)
	}
	// Both dead members were reclaimed, their messages requeued once.
	if tot := h.Totals(); tot.Reclaimed != 2 {
		t.Fatalf("totals %+v", tot)
	}
	got := map[string]int{}
	buf := make([]byte, 64)
	for {
		n, err := r.TryPop(buf)
		if err != nil {
			break
		}
		got[string(buf[:n])]++
	}
	if len(got) != 2 || got["job-1"] != 1 || got["job-2"] != 1 {
		t.Fatalf("requeued %v", got)
	}
}

// TestRegisterCrashAfterRecover: a registrant that dies right after its
// recovery scan freed a dead member's slot (and requeued its lease) leaves
// nothing of its own behind: the slot is free, the message is in the ring
// once, and the next Register takes the slot.
func TestRegisterCrashAfterRecover(t *testing.T) {
	f, h, _ := holderSetup(t) // a dead member holding "job-7" in slot 0
	live := make([]*Member, 0, 3)
	for i := 0; i < 3; i++ {
		m, err := h.Register("live")
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, m)
	}
	hbHelper.RunToCrash(t, "register", crashHbRegisterAfterRecover, 1, append(f.env(), "HB_QUEUE=1")...)
	if p, _ := h.Snapshot(0); p.State != "free" || p.LastExit.Reason != layout.ExitReclaimed {
		t.Fatalf("slot 0 after the registrant's death: %+v", p)
	}
	r := openRing(t, f.ring)
	buf := make([]byte, 64)
	if n, err := r.TryPop(buf); err != nil || string(buf[:n]) != "job-7" {
		t.Fatalf("%q %v", buf[:n], err)
	}
	if _, err := r.TryPop(buf); err != transport.ErrEmpty {
		t.Fatalf("message requeued twice: %v", err)
	}
	if m, err := h.Register("next"); err != nil || m.Slot() != 0 {
		t.Fatalf("next Register: %v", err)
	}
	for _, m := range live {
		if !m.Registered() {
			t.Fatalf("live member in slot %d lost it", m.Slot())
		}
	}
}
