package heartbeat

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/shmkit/shmkit/shm"
)

// The invariant: a member holds its slot's entry lock from before its
// claim until after its slot is free, and that lock, not its pid, proves
// it alive: to every other handle, in this process too. A handle answers
// for the members it registered itself, and an undecided verdict is never
// acted on.

// TestOtherHandleSeesMemberAlive: a second handle of the table in the
// same process sees the member's lock (open file description locks
// conflict between descriptions, not processes); the registering handle
// answers for its own member. After Unregister the lock is gone.
func TestOtherHandleSeesMemberAlive(t *testing.T) {
	h := newTable(t, 2)
	other, err := Open(h.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	m, err := h.Register("a")
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := h.Snapshot(m.Slot())
	if !mine.Self || mine.Verdict.Dead || mine.Verdict.Lock != shm.LockHeld || mine.Health(0) != "alive" {
		t.Fatalf("own member: %+v", mine)
	}
	seen, _ := other.Snapshot(m.Slot())
	if seen.Self || seen.Verdict.Dead || seen.Verdict.Unknown || seen.Verdict.Lock != shm.LockHeld || seen.Where() != "pid "+strconv.Itoa(os.Getpid()) {
		t.Fatalf("member seen from another handle: %+v (%s)", seen, seen.Where())
	}
	off, n := h.slotLock(uint64(m.Slot()))
	if err := m.Unregister(); err != nil {
		t.Fatal(err)
	}
	if st, err := other.reg.EntryLock(off, n); st != shm.LockReleased || err != nil {
		t.Fatalf("lock after Unregister: %v %v", st, err)
	}
	if err := m.Unregister(); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("second Unregister: %v", err)
	}
}

// TestClosedHandleMemberUndecided: a handle closed without unregistering
// its member drops the member's lock while its process still runs: the
// verdict is unknown, which no watchdog acts on and no Register reclaims.
func TestClosedHandleMemberUndecided(t *testing.T) {
	h := newTable(t, 1)
	closing, err := Open(h.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := closing.Register("closed"); err != nil {
		t.Fatal(err)
	}
	closing.Close()
	p, _ := h.Snapshot(0)
	if p.Health(0) != "unknown" || !p.Verdict.Unknown || p.Verdict.Dead || p.Verdict.State != shm.ProcAlive {
		t.Fatalf("member of a closed handle, process alive: %+v", p.Verdict)
	}
	rep := NewWatchdog(h, WatchdogConfig{}).Scan(true)
	if rep.Unknown != 1 || rep.Dead != 0 || len(rep.Reclaimed) != 0 || len(rep.Decisions) != 0 {
		t.Fatalf("watchdog acted on an undecided member: %+v", rep)
	}
	var full *FullError
	if _, err := h.Register("x"); !errors.As(err, &full) || full.Unknown != 1 || full.Dead != 0 {
		t.Fatalf("Register: %v", err)
	}
	if p, _ := h.Snapshot(0); p.State != "active" {
		t.Fatalf("slot %+v", p)
	}
}

// TestRegisterGoroutinesOneHandle: goroutines registering and
// unregistering through one handle never share a slot (the handle cannot
// see its own locks, so it keeps them apart itself), and every slot's lock
// is released once its member is gone.
func TestRegisterGoroutinesOneHandle(t *testing.T) {
	h := newTable(t, 2)
	other, err := Open(h.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var mu sync.Mutex
	holder := map[int]int{}
	var wg sync.WaitGroup
	registered := make([]int, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				m, err := h.Register("g")
				if errors.Is(err, ErrTableFull) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				registered[g]++
				mu.Lock()
				if prev, taken := holder[m.Slot()]; taken {
					t.Errorf("goroutines %d and %d both hold slot %d", prev, g, m.Slot())
				}
				holder[m.Slot()] = g
				mu.Unlock()
				if p, _ := other.Snapshot(m.Slot()); p.Verdict.Lock != shm.LockHeld {
					t.Errorf("registered member's lock is %s to another handle", p.Verdict.Lock)
				}
				mu.Lock()
				delete(holder, m.Slot())
				mu.Unlock()
				if err := m.Unregister(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := 0; i < h.Capacity(); i++ {
		off, n := h.slotLock(uint64(i))
		if st, _ := other.reg.EntryLock(off, n); st != shm.LockReleased {
			t.Fatalf("slot %d still locked after every member left", i)
		}
	}
	t.Logf("registrations per goroutine: %v", registered)
}
