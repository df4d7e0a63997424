package transport

import (
	"os"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
)

// Issue 15, item 1: a ring (or deque) with two participant entries, one
// live participant that never repairs (this test process, the producer or
// the deque's owner) and a consumer that claims a message and is SIGKILLed
// holding it. Every later attach used to fail with "participant table full:
// all 2 entries belong to live processes", the repair tool included, and a
// failed attacher wrote its own pid into the dead entry, so the repair plan
// blamed the lease on it. Now an attach that finds no free entry recovers
// the dead ones itself (as the table's repairer entry), a repair tool needs
// no entry, every message is delivered, and the lease is blamed on the
// process that died holding it, by its pid.

// TestAttachRecoversADeadRingConsumersEntry runs the scenario on a ring,
// once with an attach first (which recovers the lease itself) and once
// with the repair tool first (OpenRingForRepair + Repair, which reports
// it).
func TestAttachRecoversADeadRingConsumersEntry(t *testing.T) {
	for _, first := range []string{"attach", "repair-tool"} {
		t.Run(first, func(t *testing.T) {
			r := newRing(t, RingConfig{Capacity: 16, Participants: 2})
			promised := seq(1, 5)
			for _, id := range promised {
				if err := r.TryPush(encodeMsg(id)); err != nil {
					t.Fatal(err)
				}
			}
			c := runTableChildToCrash(t, r.Path(), "ring-lease", leaseHeldPoint, 1)
			dead := c.PID()
			leased := only(t, c.Log(), "got")
			if got := only(t, c.Log(), "pid"); int(got) != dead {
				t.Fatalf("child says it is pid %d, exec says %d", got, dead)
			}

			tool, err := OpenRingForRepair(r.Path())
			if err != nil {
				t.Fatal(err)
			}
			defer tool.Close()
			requireLeaseBlamedOn(t, tool.Check(), dead)

			switch first {
			case "attach":
				o, err := OpenRing(r.Path())
				if err != nil {
					t.Fatalf("attach with one live participant and one dead one in a table of 2: %v", err)
				}
				if o.Participant() != 1 {
					t.Fatalf("attached as participant %d, want the dead consumer's entry 1 (freed)", o.Participant())
				}
				if n := countProblem(r.Scan(), SlotOrphanedLease); n != 0 || r.Counters().Requeued != 1 {
					t.Fatalf("the attach did not requeue the dead consumer's lease: %d orphaned, counters %+v", n, r.Counters())
				}
				if ps := o.Peers(); ps[len(ps)-1].State != "free" {
					t.Fatalf("the repairer entry is %s after the attach's repair", ps[len(ps)-1].State)
				}
				o.Close()
				if rep, err := tool.Repair(); err != nil || rep.Changed() {
					t.Fatalf("repair after the attach recovered everything: %+v %v", rep, err)
				}
			case "repair-tool":
				rep, err := tool.Repair()
				if err != nil {
					t.Fatalf("entry-less repair: %v", err)
				}
				requireRecoveryBlamedOn(t, rep, dead, check.ActionRequeue)
				if again, err := tool.Repair(); err != nil || again.Changed() {
					t.Fatalf("second repair: %+v %v", again, err)
				}
				o, err := OpenRing(r.Path())
				if err != nil {
					t.Fatalf("attach after the repair: %v", err)
				}
				o.Close()
			}
			if s := tool.Check(); !s.Clean() {
				t.Fatalf("check after the recovery: %+v", s.Findings)
			}
			// A consumer drains every message (it takes the entry the
			// dead one had).
			drained := runChild(t, r.Path(), "claim")
			checkDelivery(t, promised, drained["acked"], map[uint64]bool{leased: true})
			if len(drained["acked"]) != len(promised) {
				t.Fatalf("drained %v, want each of %v once", drained["acked"], promised)
			}
		})
	}
}

// TestAttachRecoversADeadDequeThiefsEntry is the scenario on a deque: the
// owner (this process) alive, a thief dead holding a lease.
func TestAttachRecoversADeadDequeThiefsEntry(t *testing.T) {
	for _, first := range []string{"attach", "repair-tool"} {
		t.Run(first, func(t *testing.T) {
			d := newDeque(t, DequeConfig{Capacity: 16, Participants: 2})
			promised := seq(1, 5)
			for _, id := range promised {
				if err := d.TryPush(encodeMsg(id)); err != nil {
					t.Fatal(err)
				}
			}
			c := runTableChildToCrash(t, d.Path(), "deque-lease", leaseHeldPoint, 1)
			dead := c.PID()
			leased := only(t, c.Log(), "got")

			tool, err := OpenDequeForRepair(d.Path())
			if err != nil {
				t.Fatal(err)
			}
			defer tool.Close()
			requireLeaseBlamedOn(t, tool.Check(), dead)

			switch first {
			case "attach":
				o, err := OpenDeque(d.Path())
				if err != nil {
					t.Fatalf("attach with the owner alive and a dead thief in a table of 2: %v", err)
				}
				if o.Participant() != 1 || d.Counters().Returned != 1 {
					t.Fatalf("attached as %d, counters %+v: the attach did not hand the lease back", o.Participant(), d.Counters())
				}
				o.Close()
				if rep, err := tool.Repair(); err != nil || rep.Changed() {
					t.Fatalf("repair after the attach recovered everything: %+v %v", rep, err)
				}
			case "repair-tool":
				rep, err := tool.Repair()
				if err != nil {
					t.Fatalf("entry-less repair: %v", err)
				}
				requireRecoveryBlamedOn(t, rep, dead, check.ActionReturn)
				if again, err := tool.Repair(); err != nil || again.Changed() {
					t.Fatalf("second repair: %+v %v", again, err)
				}
			}
			if !d.IsOwner() || !tool.Scan().OwnerAlive {
				t.Fatal("the live owner lost its role")
			}
			if s := tool.Check(); !s.Clean() {
				t.Fatalf("check after the recovery: %+v", s.Findings)
			}
			drained := runDequeChild(t, d.Path(), "claim", "", 0)
			checkDelivery(t, promised, drained["acked"], map[uint64]bool{leased: true})
			if len(drained["acked"]) != len(promised) {
				t.Fatalf("drained %v, want each of %v once", drained["acked"], promised)
			}
		})
	}
}

// requireLeaseBlamedOn fails unless Check reports exactly one orphaned
// lease, held by pid (proven dead), and the dead participant's entry under
// the same pid; no finding names this process.
func requireLeaseBlamedOn(t *testing.T, rep check.Report, pid int) {
	t.Helper()
	leases := 0
	for _, f := range rep.Findings {
		if int(f.OwnerID.PID) == os.Getpid() {
			t.Errorf("check blames this (live) process: %+v", f)
		}
		switch f.Problem {
		case check.ProblemOrphanedLease:
			leases++
			if int(f.OwnerID.PID) != pid || !f.Dead {
				t.Errorf("orphaned lease blamed on pid %d (dead %v), want the dead consumer %d: %s", f.OwnerID.PID, f.Dead, pid, f.Detail)
			}
		case check.ProblemDeadParticipant:
			if int(f.OwnerID.PID) != pid {
				t.Errorf("dead entry recorded as pid %d, want %d: %s", f.OwnerID.PID, pid, f.Detail)
			}
		}
	}
	if leases != 1 {
		t.Fatalf("check found %d orphaned leases, want 1: %+v", leases, rep.Findings)
	}
}

// requireRecoveryBlamedOn fails unless the repair recovered one message
// (action a) from pid, proved pid dead and freed its entry, all under pid.
func requireRecoveryBlamedOn(t *testing.T, rep check.RepairReport, pid int, a check.Action) {
	t.Helper()
	if rep.Count(a) != 1 || rep.Count(check.ActionFreeEntry) != 1 || len(rep.DeadPeers) != 1 {
		t.Fatalf("repair report: want one %s, one freed entry and one dead peer: %+v", a, rep)
	}
	if got := int(rep.DeadPeers[0].ID.PID); got != pid {
		t.Errorf("repair proved pid %d dead, want the dead consumer %d", got, pid)
	}
	for _, f := range rep.Done {
		if (f.Action == a || f.Action == check.ActionFreeEntry) && int(f.OwnerID.PID) != pid {
			t.Errorf("repair blames pid %d for %s, want %d: %s", f.OwnerID.PID, f.Action, pid, f.Detail)
		}
	}
}

// TestAttachWaitsForAnEntryBeingClaimed: an attach that finds no free
// entry while another process is claiming one (its entry lock taken, its
// word still free: the claimer may be descheduled right there) looks
// again instead of failing, and gets the entry if that claim fails.
//
// Was a bug (found by TestCrashLoopingRingConsumersNeverLockTheTable with
// two children attaching at once): Attach counted the entries after its
// look found none free, and with no dead one among them failed at once
// with "participant table full: 4 entries: 1 of live processes" (the
// other entries free by then: another attach's recovery had freed them),
// or, with a dead one, ran a repair that found nothing left to free and
// failed with "a repair could not recover what the dead ones hold".
func TestAttachWaitsForAnEntryBeingClaimed(t *testing.T) {
	r := newRing(t, RingConfig{Capacity: 8, Participants: 3})
	self := shm.Self()
	// Entry 2: a live holder (its lock held by another open file
	// description, its word active). Entry 1: free, its lock taken by a
	// claimer that has not moved its word yet.
	holdEntryLock(t, r.Path(), layout.RingOffParticipants, 2)
	e := r.tab.Entry(2)
	e.Start.Store(self.Start)
	e.Boot.Store(shm.BootTag())
	e.PidNS.Store(shm.PidNamespace())
	e.Ctl.Store(layout.PeerCtl{State: layout.PeerActive, Gen: 1, PID: uint32(self.PID)}.Pack())
	claimer := holdEntryLock(t, r.Path(), layout.RingOffParticipants, 1)
	type result struct {
		r   *Ring
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, err := OpenRing(r.Path())
		done <- result{o, err}
	}()
	time.Sleep(20 * time.Millisecond) // let the attach find entry 1 locked (if it is late, nothing is tested, nothing fails)
	claimer.Close()                   // the claim failed: entry 1 is free and unlocked
	got := <-done
	if got.err != nil {
		t.Fatalf("attach while an entry was being claimed (then given up): %v", got.err)
	}
	defer got.r.Close()
	if got.r.Participant() != 1 {
		t.Fatalf("attached as %d, want the entry the claimer gave up (1)", got.r.Participant())
	}
	e.Ctl.Store(layout.PeerCtl{State: layout.PeerFree, Gen: 2}.Pack())
}
