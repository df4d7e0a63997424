package heartbeat

import (
	"testing"

	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// Crash points of the heartbeat table and the watchdog: a real process
// dies at each, and a watchdog scan recovers.

// TestHeartbeatRegisterCrash: a process killed while registering leaves a
// claiming slot whose entry lock died with it; a watchdog proves it dead
// and frees it, and so does the next Register on the full table.
func TestHeartbeatRegisterCrash(t *testing.T) {
	for _, by := range []string{"watchdog", "register"} {
		t.Run(by, func(t *testing.T) {
			f := newTestFiles(t)
			h, err := Create(f.hb, Config{Capacity: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			runToCrash(t, f, "register", crashHbRegisterAfterClaim)
			if p, _ := h.Snapshot(0); p.State != "claiming" || p.Health(0) != "dead" || p.Verdict.Lock != shm.LockReleased {
				t.Fatalf("slot %+v", p)
			}
			if by == "watchdog" {
				if rep := NewWatchdog(h, WatchdogConfig{}).Scan(true); len(rep.Reclaimed) != 1 {
					t.Fatalf("report %+v", rep)
				}
			}
			m, err := h.Register("x")
			if err != nil {
				t.Fatal(err)
			}
			if tot := h.Totals(); tot.Reclaimed != 1 || m.Slot() != 0 {
				t.Fatalf("totals %+v, slot %d", tot, m.Slot())
			}
		})
	}
}

// TestWatchdogCrashBeforeFree: a watchdog dies after requeueing a dead
// holder's lease but before freeing its slot. The next scan finishes the
// job, and the message is in the ring exactly once.
func TestWatchdogCrashBeforeFree(t *testing.T) {
	f, h, _ := holderSetup(t)
	runToCrash(t, f, "watchdog", crashHbReclaimBeforeFree)
	if p, _ := h.Snapshot(0); p.State != "reclaiming" {
		t.Fatalf("slot %+v", p)
	}
	r := openRing(t, f.ring)
	rep := NewWatchdog(h, WatchdogConfig{Queues: []Repairable{r}}).Scan(true)
	if len(rep.Reclaimed) != 1 || len(rep.Problems) != 0 {
		t.Fatalf("report %+v", rep)
	}
	buf := make([]byte, 64)
	if n, err := r.TryPop(buf); err != nil || string(buf[:n]) != "job-7" {
		t.Fatalf("%q %v", buf[:n], err)
	}
	if _, err := r.TryPop(buf); err != transport.ErrEmpty {
		t.Fatalf("message requeued twice: %v", err)
	}
}
