package heartbeat

import (
	"errors"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

func newTable(t testing.TB, capacity int) *Table {
	t.Helper()
	f := newTestFiles(t)
	h, err := Create(f.hb, Config{Capacity: capacity, Leases: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestHeartbeatRegisterBeatUnregister(t *testing.T) {
	h := newTable(t, 2)
	m, err := h.Register("worker-a-long-label-cut")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := h.Snapshot(m.Slot())
	if p.State != "active" || p.ID != shm.Self() || p.Label != "worker-a-long-la" || p.Health(time.Second) != "alive" {
		t.Fatalf("snapshot %+v", p)
	}
	time.Sleep(20 * time.Millisecond)
	if p, _ := h.Snapshot(m.Slot()); p.Health(10*time.Millisecond) != "stale" {
		t.Fatalf("not stale after 20 ms without a beat: %v", p.BeatAge)
	}
	m.Beat()
	if p, _ := h.Snapshot(m.Slot()); p.Health(10*time.Millisecond) != "alive" {
		t.Fatalf("stale right after a beat: %v", p.BeatAge)
	}
	if _, err := h.Register("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Register("c"); !errors.Is(err, ErrTableFull) {
		t.Fatalf("third registration in a table of 2: %v", err)
	}
	if err := m.Unregister(); err != nil {
		t.Fatal(err)
	}
	p, _ = h.Snapshot(m.Slot())
	if p.State != "free" || p.LastExit.Reason != layout.ExitUnregistered || p.LastExit.PID != uint32(shm.Self().PID) {
		t.Fatalf("after unregister %+v", p)
	}
	if err := m.Unregister(); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("double unregister: %v", err)
	}
	if tot := h.Totals(); tot.Registered != 2 || tot.Unregistered != 1 {
		t.Fatalf("totals %+v", tot)
	}
}

func TestHeartbeatLeaseRecords(t *testing.T) {
	h := newTable(t, 1)
	m, _ := h.Register("w")
	var refs []LeaseRef
	for i := 0; i < 4; i++ {
		ref, err := m.RecordLease(0xabc, uint64(i), 7, i+1)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	if _, err := m.RecordLease(1, 1, 1, 1); !errors.Is(err, ErrLeaseTableFull) {
		t.Fatalf("fifth lease in 4 records: %v", err)
	}
	p, _ := h.Snapshot(0)
	if len(p.Leases) != 4 || p.Leases[0].Ring != 0xabc || p.Leases[0].Lap != 7 || p.Unstable {
		t.Fatalf("leases %+v", p.Leases)
	}
	m.ClearLease(refs[1])
	if p, _ := h.Snapshot(0); len(p.Leases) != 3 {
		t.Fatalf("after clear: %+v", p.Leases)
	}
	if _, err := m.RecordLease(2, 2, 2, 2); err != nil {
		t.Fatalf("record after clear: %v", err)
	}
}

// TestHeartbeatDeadAndRecycledPID: a registrant whose process is gone is
// dead; a slot whose pid now belongs to another process is dead too.
func TestHeartbeatDeadAndRecycledPID(t *testing.T) {
	f := newTestFiles(t)
	h, err := Create(f.hb, Config{Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c := startChild(t, f, "register")
	c.WaitLine(t, "slot")
	if ps := h.Snapshots(); ps[0].Health(0) != "alive" {
		t.Fatalf("live registrant: %+v", ps[0])
	}
	c.Kill()
	c.Wait()
	p, _ := h.Snapshot(0)
	if p.Health(0) != "dead" || p.Verdict.State != shm.ProcGone {
		t.Fatalf("killed registrant: %+v", p)
	}
	// A slot naming a live process's pid with another start time is a
	// recycled pid: the registrant is dead.
	other := startChild(t, f, "register")
	other.WaitLine(t, "slot")
	id, st, err := shm.LookupProcess(int32(other.PID()))
	if err != nil || st != shm.ProcAlive {
		t.Fatal(err)
	}
	base := h.lay.SlotOff(0)
	h.ctl(0).Store(layout.PeerCtl{State: layout.HBActive, PID: uint32(id.PID)}.Pack())
	h.area.U64(base + layout.HBSlotStart).Store(id.Start - 1)
	p, _ = h.Snapshot(0)
	if p.Health(0) != "dead" || p.Verdict.State != shm.ProcReused {
		t.Fatalf("recycled pid not reported dead: %+v", p.Verdict)
	}
}
