package heartbeat

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/shm"
)

// From a review: every published exit reaches the caller exactly once, through
// Recv, TakeOutcome or TakeOutcomes, or is counted as dropped, under
// concurrent publishing, receiving and taking.
func TestOutcomesExactlyOnceUnderConcurrency(t *testing.T) {
	const n = 20000
	ev := NewExitEvents(8, WithOutcomeBound(64))
	sub, err := ev.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int32]int{}
	note := func(e ExitEvent) {
		mu.Lock()
		seen[e.PID]++
		mu.Unlock()
	}
	var pubDone atomic.Bool
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := 1; i <= n; i++ {
			ev.Publish(ExitEvent{PID: int32(i), ID: shm.ProcessID{PID: int32(i), Start: uint64(i)}, Reason: ExitUnregistered})
		}
		pubDone.Store(true)
	}()
	go func() { // receiver
		defer wg.Done()
		for {
			e, err := sub.RecvTimeout(time.Millisecond)
			switch {
			case err == nil:
				note(e)
			case errors.Is(err, ErrLagged):
				for _, e := range ev.TakeOutcomes() {
					note(e)
				}
			case errors.Is(err, ErrRecvTimeout):
				if pubDone.Load() {
					return
				}
			default:
				t.Error(err)
				return
			}
		}
	}()
	go func() { // taker by id
		defer wg.Done()
		for i := 1; i <= n && !pubDone.Load(); i += 3 {
			if e, ok := ev.TakeOutcome(shm.ProcessID{PID: int32(i), Start: uint64(i)}); ok {
				note(e)
			}
		}
	}()
	wg.Wait()
	for _, e := range ev.TakeOutcomes() {
		note(e)
	}
	dup := 0
	for _, c := range seen {
		if c > 1 {
			dup++
		}
	}
	if dup > 0 || uint64(len(seen))+ev.OutcomesDropped() != n {
		t.Fatalf("%d delivered, %d dropped, %d duplicated; want %d total exactly once", len(seen), ev.OutcomesDropped(), dup, n)
	}
}

// TakeOutcome for a process (pid, start) falls back to an outcome known
// only by its pid (a member that came and went between two scans, whose
// start time no scan read): documented as best effort, not proof. The
// outcome it returns says so by its zero start time, so a caller can tell.
func TestTakeOutcomeFallsBackToAPidOnlyOutcomeThatSaysSo(t *testing.T) {
	ev := NewExitEvents(4)
	ev.Publish(ExitEvent{PID: 100, ID: shm.ProcessID{PID: 100}, Reason: ExitUnregistered, Detail: "registered and left between two scans"})
	e, ok := ev.TakeOutcome(shm.ProcessID{PID: 100, Start: 999})
	if !ok || e.ID.PID != 100 || e.ID.Start != 0 {
		t.Fatalf("fallback: %v %+v", ok, e)
	}
	if _, ok := ev.TakeOutcome(shm.ProcessID{PID: 100, Start: 999}); ok {
		t.Fatal("the same outcome taken twice")
	}
}
