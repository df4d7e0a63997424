package heartbeat

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"

	"github.com/shmkit/shmkit/transport"
)

// The invariant: no crash loop can lock a heartbeat table. A Register on a
// full table recovers the slots of members proven dead itself (a watchdog
// scan over the queues it is given), so one live member and any number of
// members that register and die, one after the other, never fill it; and
// nothing a dead member leased is lost.

// Each crash loop runs proctest.SoakLoops children (scripts/soak.sh runs
// 1000).
func crashLoopCount(t *testing.T) int { return proctest.SoakLoops(t) }

// TestRegisterRecoversDeadSlotsWithoutLeases: one live member and a crash
// loop of members that hold no lease, on a 4-slot table. Each registers
// (the table is full of dead members from the fourth child on) and is
// SIGKILLed before Register returns; every Register succeeds, needing no
// queue, and the live member is never touched.
func TestRegisterRecoversDeadSlotsWithoutLeases(t *testing.T) {
	crashLoop(t, false)
}

// TestRegisterRecoversDeadSlotsWithLeases: the same with members that each
// claim a message from a real ring, register giving the ring to Register,
// record the lease and are SIGKILLed. Every Register succeeds, requeueing
// dead members' leases through the ring's repair, and every message comes
// back: the live member (the test) receives each exactly once.
func TestRegisterRecoversDeadSlotsWithLeases(t *testing.T) {
	crashLoop(t, true)
}

func crashLoop(t *testing.T, leases bool) {
	n := crashLoopCount(t)
	f := newTestFiles(t)
	h, err := Create(f.hb, Config{Capacity: 4, Leases: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	live, err := h.Register("live")
	if err != nil {
		t.Fatal(err)
	}
	var r *transport.Ring
	point := crashHbRegisterAfterActivate
	env := f.env()
	if leases {
		point = crashHbLeaseAfterRecord
		env = append(env, "HB_LEASE=1")
		if r, err = transport.CreateRing(f.ring, transport.RingConfig{Capacity: 16}); err != nil {
			t.Fatal(err)
		}
		defer r.Close()
	}
	delivered := map[string]int{}
	drain := func() {
		buf := make([]byte, 64)
		for {
			k, err := r.TryPop(buf)
			if err != nil {
				return
			}
			delivered[string(buf[:k])]++
		}
	}
	// Two children at a time: registrants recover the table concurrently
	// (a scan may find a slot changed, a queue's repair busy, or the slot
	// it freed taken by the other).
	const batch = 2
	start := time.Now()
	gate := f.hb + "-go"
	t.Cleanup(func() { os.Remove(gate) })
	for k := 0; k < n; k += batch {
		childEnv := append(env, proctest.Arm(point, 1)...)
		if leases {
			// Each message is claimed by one child only: the batch claims
			// the messages just pushed (the only ready ones) and registers
			// (a Register's recovery requeues dead members' leases) once
			// all have.
			childEnv = append(childEnv, "HB_GO="+gate)
			for j := k; j < min(k+batch, n); j++ {
				if err := r.TryPush([]byte("job-" + strconv.Itoa(j))); err != nil {
					t.Fatalf("child %d: push: %v", j, err)
				}
			}
		}
		var cs []*proctest.Child
		for j := k; j < min(k+batch, n); j++ {
			cs = append(cs, hbHelper.Start(t, "crashloop", childEnv...))
		}
		if leases {
			for _, c := range cs {
				c.WaitLine(t, "claimed")
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range cs {
			c.WaitKilled(t, point)
		}
		if leases {
			os.Remove(gate)
			drain()
		}
		if !live.Registered() {
			t.Fatalf("children %d..%d: the live member lost its slot", k, k+batch-1)
		}
	}
	took := time.Since(start)
	t.Logf("%d crash-looping children in %v (%v per child)", n, took.Round(time.Millisecond), (took / time.Duration(n)).Round(100*time.Microsecond))

	// The last dead members are still in the table (the table was full
	// only now and then): a watchdog with the ring finishes them.
	var queues []Repairable
	if leases {
		queues = append(queues, r)
	}
	rep := NewWatchdog(h, WatchdogConfig{Queues: queues}).Scan(true)
	if len(rep.Problems) != 0 || rep.Dead != len(rep.Reclaimed) {
		t.Fatalf("final scan: %+v", rep)
	}
	tot := h.Totals()
	if tot.Registered != uint64(n)+1 || tot.Reclaimed != uint64(n) || tot.Unregistered != 0 {
		t.Fatalf("totals %+v after %d children", tot, n)
	}
	for _, p := range h.Snapshots() {
		if p.Slot == live.Slot() {
			if p.Health(0) != "alive" || !p.Self {
				t.Fatalf("live member: %+v", p)
			}
		} else if p.State != "free" {
			t.Fatalf("slot %d after the final scan: %+v", p.Slot, p)
		}
	}
	if !leases {
		return
	}
	drain()
	lost, dup := 0, 0
	for k := 0; k < n; k++ {
		switch c := delivered["job-"+strconv.Itoa(k)]; {
		case c == 0:
			lost++
		case c > 1:
			dup++
		}
	}
	if lost != 0 || dup != 0 || len(delivered) != n {
		t.Fatalf("of %d messages leased by dead members: %d lost, %d delivered twice, %d distinct delivered", n, lost, dup, len(delivered))
	}
	if sc := r.Scan(); sc.Problems != 0 {
		t.Fatalf("ring after the loop: %+v", sc)
	}
	t.Logf("all %d messages leased by dead members came back, each delivered once", n)
}
