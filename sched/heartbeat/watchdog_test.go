package heartbeat

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// holderSetup: a child registers, claims the only message in the submit
// ring, records the lease, and is SIGKILLed holding it.
func holderSetup(t *testing.T) (testFiles, *Table, int32) {
	t.Helper()
	f := newTestFiles(t)
	r, err := transport.CreateRing(f.ring, transport.RingConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	r.TryPush([]byte("job-7"))
	r.Close()
	h, err := Create(f.hb, Config{Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	c := startChild(t, f, "hold")
	c.WaitLine(t, "holding job-7")
	pid := int32(c.PID())
	c.Kill()
	c.Wait()
	return f, h, pid
}

func openRing(t *testing.T, path string) *transport.Ring {
	t.Helper()
	r, err := transport.OpenRing(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestWatchdogReclaimsDeadHolder(t *testing.T) {
	f, h, pid := holderSetup(t)
	r := openRing(t, f.ring)
	ev := NewExitEvents(8)
	sub, _ := ev.Subscribe()
	wd := NewWatchdog(h, WatchdogConfig{Queues: []Repairable{r}, Events: ev})

	dry := wd.Scan(false)
	if dry.Dead != 1 || len(dry.Reclaimed) != 0 || r.Scan().Problems != 1 {
		t.Fatalf("dry run: dead %d reclaimed %d, ring problems %d", dry.Dead, len(dry.Reclaimed), r.Scan().Problems)
	}
	if len(dry.Decisions) != 1 || dry.Decisions[0].Action != ActionReclaim || dry.Decisions[0].Reclaimed || dry.Decisions[0].Participant.ID.PID != pid {
		t.Fatalf("dry run decisions: %+v", dry.Decisions)
	}
	if e, err := sub.RecvTimeout(time.Second); err != nil || e.Reason != ExitFoundDead || e.PID != pid {
		t.Fatalf("dry run event: %v %v", e, err)
	}
	rep := wd.Scan(true)
	if len(rep.Reclaimed) != 1 || rep.Reclaimed[0].ID.PID != pid || len(rep.Problems) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if len(rep.Reclaimed[0].Leases) != 1 || rep.Reclaimed[0].Leases[0].Ring != r.ID() {
		t.Fatalf("the dead holder's lease was not in the report: %+v", rep.Reclaimed[0].Leases)
	}
	if len(rep.Decisions) != 1 || rep.Decisions[0].Action != ActionReclaim || !rep.Decisions[0].Reclaimed {
		t.Fatalf("decisions: %+v", rep.Decisions)
	}
	// Now final: its work is back in the ring.
	if e, err := sub.RecvTimeout(time.Second); err != nil || e.Reason != ExitReclaimed || e.PID != pid {
		t.Fatalf("reclaim event: %v %v", e, err)
	}
	if e, err := sub.RecvTimeout(20 * time.Millisecond); err == nil {
		t.Fatalf("unexpected third event %v", e)
	}
	if p, _ := h.Snapshot(0); p.State != "free" {
		t.Fatalf("slot not freed: %+v", p)
	}
	buf := make([]byte, 64)
	n, err := r.TryPop(buf)
	if err != nil || string(buf[:n]) != "job-7" {
		t.Fatalf("requeued message: %q %v", buf[:n], err)
	}
	if again := wd.Scan(true); again.Dead != 0 || len(again.Reclaimed) != 0 {
		t.Fatalf("second scan: %+v", again)
	}
}

// TestWatchdogsRaceNoDoubleRequeue: two watchdogs, each with its own ring
// handle, scan at once; the message comes back exactly once and the slot
// is reclaimed once.
func TestWatchdogsRaceNoDoubleRequeue(t *testing.T) {
	for round := 0; round < 5; round++ {
		f, h, _ := holderSetup(t)
		var wds []*Watchdog
		for i := 0; i < 2; i++ {
			wds = append(wds, NewWatchdog(h, WatchdogConfig{Queues: []Repairable{openRing(t, f.ring)}}))
		}
		var wg sync.WaitGroup
		reports := make([]WatchReport, 2)
		for i := range wds {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				for try := 0; try < 50; try++ {
					reports[i] = wds[i].Scan(true)
					if p, _ := h.Snapshot(0); p.State == "free" {
						return
					}
				}
			}(i)
		}
		wg.Wait()
		reclaims := 0
		for _, rep := range reports {
			reclaims += len(rep.Reclaimed)
		}
		if reclaims != 1 {
			t.Fatalf("round %d: %d reclaims, want 1", round, reclaims)
		}
		r := openRing(t, f.ring)
		got := 0
		buf := make([]byte, 64)
		for {
			if _, err := r.TryPop(buf); err != nil {
				break
			}
			got++
		}
		if got != 1 {
			t.Fatalf("round %d: message requeued %d times", round, got)
		}
	}
}

// TestWatchdogKeepsSlotWithoutItsRing: a dead participant holding a lease
// in a ring the watchdog was not given keeps its slot, with a problem
// saying why; the dry run already says it would keep it, naming the ring.
func TestWatchdogKeepsSlotWithoutItsRing(t *testing.T) {
	f, h, _ := holderSetup(t)
	ringID := openRing(t, f.ring).ID()
	wd := NewWatchdog(h, WatchdogConfig{})
	for _, apply := range []bool{false, true} {
		rep := wd.Scan(apply)
		if len(rep.Decisions) != 1 {
			t.Fatalf("apply %v: decisions %+v", apply, rep.Decisions)
		}
		if d := rep.Decisions[0]; d.Action != ActionKeep || d.Why != KeepQueueNotGiven || d.Queue != ringID || d.Reclaimed {
			t.Fatalf("apply %v: decision %+v, want keep: lease in %016x not given", apply, d, ringID)
		}
	}
	rep := wd.Scan(true)
	if len(rep.Reclaimed) != 0 || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "not given") {
		t.Fatalf("report %+v", rep)
	}
	if p, _ := h.Snapshot(0); p.State != "reclaiming" {
		t.Fatalf("slot state %s", p.State)
	}
}

func TestWatchdogReportsStaleNeverReclaims(t *testing.T) {
	h := newTable(t, 2)
	m, _ := h.Register("slow")
	time.Sleep(30 * time.Millisecond)
	rep := NewWatchdog(h, WatchdogConfig{Stale: 10 * time.Millisecond}).Scan(true)
	if rep.Stale != 1 || len(rep.Reclaimed) != 0 || !m.Registered() {
		t.Fatalf("report %+v", rep)
	}
}

func TestWatchdogPublishesUnregistration(t *testing.T) {
	h := newTable(t, 2)
	ev := NewExitEvents(4)
	sub, _ := ev.Subscribe()
	wd := NewWatchdog(h, WatchdogConfig{Events: ev})
	m, _ := h.Register("x")
	id := wd.Scan(true).Participants[m.Slot()].ID
	m.Unregister()
	wd.Scan(true)
	e, err := sub.RecvTimeout(time.Second)
	if err != nil || e.Reason != ExitUnregistered {
		t.Fatalf("%v %v", e, err)
	}
	// The scan that saw the member remembered its start time: the event
	// names the process, not only its pid.
	if id.Start == 0 || e.ID != id {
		t.Fatalf("event's id %v, want %v", e.ID, id)
	}
}

// TestWatchdogRepairsRingWithoutDeadMember: a process that dies holding a
// lease without ever registering in the table is still recovered by a
// scan, through the ring's own participant table.
func TestWatchdogRepairsRingWithoutDeadMember(t *testing.T) {
	f, h, _ := holderSetup(t)
	// Forget the holder in the table: the ring alone knows it.
	h.ctl(0).Store(0)
	r := openRing(t, f.ring)
	rep := NewWatchdog(h, WatchdogConfig{Queues: []Repairable{r}}).Scan(true)
	if rep.Dead != 0 || len(rep.QueueRepairs) != 1 || rep.QueueRepairs[0].Report.Count(check.ActionRequeue) != 1 {
		t.Fatalf("report %+v", rep)
	}
	buf := make([]byte, 64)
	if n, err := r.TryPop(buf); err != nil || string(buf[:n]) != "job-7" {
		t.Fatalf("%q %v", buf[:n], err)
	}
}

// failingQueue stands for a queue whose repair fails (its repair lock is
// busy, say).
type failingQueue struct{ id uint64 }

func (q failingQueue) ID() uint64   { return q.id }
func (q failingQueue) Path() string { return "failing" }
func (q failingQueue) Repair() (check.RepairReport, error) {
	return check.RepairReport{}, transport.ErrRepairBusy
}

// TestWatchdogKeepsSlotWhenRepairFails: the dead holder's queue was given
// but its repair failed this scan, so the slot is kept (reclaiming) and the
// decision names the queue; the dry run, which repairs nothing, would
// reclaim it.
func TestWatchdogKeepsSlotWhenRepairFails(t *testing.T) {
	f, h, _ := holderSetup(t)
	q := failingQueue{id: openRing(t, f.ring).ID()}
	wd := NewWatchdog(h, WatchdogConfig{Queues: []Repairable{q}})
	if dry := wd.Scan(false); len(dry.Decisions) != 1 || dry.Decisions[0].Action != ActionReclaim {
		t.Fatalf("dry run decisions %+v", dry.Decisions)
	}
	rep := wd.Scan(true)
	if len(rep.Decisions) != 1 {
		t.Fatalf("decisions %+v", rep.Decisions)
	}
	if d := rep.Decisions[0]; d.Action != ActionKeep || d.Why != KeepQueueNotRepaired || d.Queue != q.id || d.Reclaimed {
		t.Fatalf("decision %+v", d)
	}
	if len(rep.QueueRepairs) != 1 || rep.QueueRepairs[0].Err == "" || len(rep.Problems) != 2 || len(rep.Reclaimed) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if p, _ := h.Snapshot(0); p.State != "reclaiming" {
		t.Fatalf("slot state %s", p.State)
	}
}
