package heartbeat

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
)

// A subscriber whose queue holds 2 falls behind 10 exits of real
// processes (registered, killed, reclaimed by a watchdog with Events): its
// receive says it lagged, by all 10, and every one of them is in the
// outcome store, under the process's pid and start time, taken once.
func TestLaggedSubscriberRecoversEveryExitFromTheStore(t *testing.T) {
	f := newTestFiles(t)
	h, err := Create(f.hb, Config{Capacity: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ev := NewExitEvents(2)
	sub, _ := ev.Subscribe()
	wd := NewWatchdog(h, WatchdogConfig{Events: ev})

	const n = 10
	children := make([]*proctest.Child, n)
	for i := range children {
		children[i] = startChild(t, f, "register")
	}
	bySlot := map[int]*proctest.Child{}
	for _, c := range children {
		var slot int
		fmt.Sscanf(c.WaitLine(t, "slot "), "slot %d", &slot)
		bySlot[slot] = c
	}
	ids := map[shm.ProcessID]bool{}
	for _, p := range wd.Scan(true).Participants {
		if c := bySlot[p.Slot]; c != nil {
			if int(p.ID.PID) != c.PID() || p.ID.Start == 0 {
				t.Fatalf("slot %d: %v, want pid %d with its start time", p.Slot, p.ID, c.PID())
			}
			ids[p.ID] = true
		}
	}
	if len(ids) != n {
		t.Fatalf("the scan saw %d of the %d children", len(ids), n)
	}

	// Two batches of deaths, the subscriber receiving nothing: the first
	// fills its queue and overflows, the second only overflows.
	published := 0
	for _, batch := range [][]*proctest.Child{children[:n/2], children[n/2:]} {
		for _, c := range batch {
			c.Kill()
			<-c.Done()
		}
		want := published + len(batch)
		deadline := time.Now().Add(30 * time.Second)
		for published < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d exits published, want %d", published, want)
			}
			for _, e := range wd.Scan(true).Events {
				if e.Reason != ExitReclaimed {
					t.Fatalf("event %+v, want a reclaim", e)
				}
				published++
			}
		}
	}

	_, err = sub.Recv()
	var lag *LaggedError
	if !errors.As(err, &lag) || !errors.Is(err, ErrLagged) || lag.Missed != n || lag.Dropped != 0 {
		t.Fatalf("receive: %v, want a lag of %d exits", err, n)
	}
	if e, err := sub.RecvTimeout(0); !errors.Is(err, ErrRecvTimeout) {
		t.Fatalf("after the lag: %v %v, want nothing queued", e, err)
	}
	if got := ev.Outcomes(); len(got) != n {
		t.Fatalf("%d outcomes pending, want %d: %v", len(got), n, got)
	}
	for id := range ids {
		e, ok := ev.TakeOutcome(id)
		if !ok || e.ID != id || e.PID != id.PID || e.Reason != ExitReclaimed {
			t.Fatalf("outcome of %v: %+v %v", id, e, ok)
		}
		if e, ok := ev.TakeOutcome(id); ok {
			t.Fatalf("outcome of %v taken twice: %+v", id, e)
		}
	}
	if got := ev.Outcomes(); len(got) != 0 || ev.OutcomesDropped() != 0 {
		t.Fatalf("after recovery: pending %v, dropped %d", got, ev.OutcomesDropped())
	}
}

// The store keeps at most its bound, dropping the oldest and counting
// them; dropping one the subscriber was to receive makes it lag. A bound
// below the queue's capacity is raised to it.
func TestOutcomeStoreIsBoundedAndCountsDrops(t *testing.T) {
	ev := NewExitEvents(2, WithOutcomeBound(4))
	sub, _ := ev.Subscribe()
	for pid := int32(1); pid <= 10; pid++ {
		ev.Publish(ExitEvent{PID: pid, ID: shm.ProcessID{PID: pid, Start: 100}, Reason: ExitReclaimed})
	}
	_, err := sub.Recv()
	var lag *LaggedError
	if !errors.As(err, &lag) || lag.Missed != 10 || lag.Dropped != 6 {
		t.Fatalf("receive: %v, want a lag of 10 with 6 dropped", err)
	}
	got := ev.TakeOutcomes()
	if len(got) != 4 || ev.OutcomesDropped() != 6 {
		t.Fatalf("kept %v, dropped %d: want the 4 newest, 6 dropped", got, ev.OutcomesDropped())
	}
	for i, e := range got {
		if e.PID != int32(7+i) {
			t.Fatalf("kept %v, want pids 7..10 in order", got)
		}
	}

	small := NewExitEvents(4, WithOutcomeBound(1))
	for pid := int32(1); pid <= 4; pid++ {
		small.Publish(ExitEvent{PID: pid})
	}
	if got := small.Outcomes(); len(got) != 4 || small.OutcomesDropped() != 0 {
		t.Fatalf("a bound below the queue's capacity: kept %v, dropped %d", got, small.OutcomesDropped())
	}
}

// TakeOutcome matches a start-less outcome (a member no scan saw) by pid;
// a process's final exit replaces its pending found-dead outcome; Close
// leaves the store takeable.
func TestTakeOutcomeMatching(t *testing.T) {
	ev := NewExitEvents(8)
	full := shm.ProcessID{PID: 7, Start: 42}
	ev.Publish(ExitEvent{PID: 7, ID: full, Reason: ExitFoundDead})
	ev.Publish(ExitEvent{PID: 8, Reason: ExitUnregistered}) // ID left to Publish: pid only
	ev.Publish(ExitEvent{PID: 7, ID: full, Reason: ExitReclaimed})
	if got := ev.Outcomes(); len(got) != 2 || got[0].PID != 8 || got[1].Reason != ExitReclaimed {
		t.Fatalf("pending %v, want pid 8's, then pid 7's reclaim in place of its found-dead", got)
	}
	ev.Close()
	ev.Publish(ExitEvent{PID: 9})
	if e, ok := ev.TakeOutcome(shm.ProcessID{PID: 7, Start: 41}); ok {
		t.Fatalf("another start time matched: %v", e)
	}
	if e, ok := ev.TakeOutcome(full); !ok || e.Reason != ExitReclaimed {
		t.Fatalf("pid 7: %v %v", e, ok)
	}
	if e, ok := ev.TakeOutcome(shm.ProcessID{PID: 8, Start: 99}); !ok || e.PID != 8 || e.ID.Start != 0 {
		t.Fatalf("start-less pid 8: %v %v", e, ok)
	}
	if got := ev.Outcomes(); len(got) != 0 {
		t.Fatalf("published after Close: %v", got)
	}
}

// Publishers, a receiving subscriber that drains the store when it lags,
// and a taker by id, all at once (run with -race): every exit reaches
// exactly one of them, and none is lost.
func TestOutcomeStoreConcurrentPublishAndTake(t *testing.T) {
	const publishers, each = 4, 500
	ev := NewExitEvents(8, WithOutcomeBound(publishers*each))
	sub, _ := ev.Subscribe()
	var mu sync.Mutex
	seen := map[shm.ProcessID]int{}
	note := func(es ...ExitEvent) {
		mu.Lock()
		for _, e := range es {
			seen[e.ID]++
		}
		mu.Unlock()
	}
	id := func(p, i int) shm.ProcessID {
		return shm.ProcessID{PID: int32(p*each + i + 1), Start: uint64(1000 + i)}
	}

	received := make(chan int)
	go func() {
		lags := 0
		for {
			e, err := sub.Recv()
			switch {
			case err == nil:
				note(e)
			case errors.Is(err, ErrLagged):
				lags++
				note(ev.TakeOutcomes()...)
			case errors.Is(err, ErrDisconnected):
				received <- lags
				return
			default:
				t.Errorf("receive: %v", err)
			}
		}
	}()
	stopTaking := make(chan struct{})
	taken := make(chan struct{})
	go func() {
		defer close(taken)
		for {
			for i := range each {
				select {
				case <-stopTaking:
					return
				default:
				}
				if e, ok := ev.TakeOutcome(id(0, i)); ok {
					note(e)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ev.Publish(ExitEvent{PID: id(p, i).PID, ID: id(p, i), Reason: ExitReclaimed})
			}
		}()
	}
	wg.Wait()
	close(stopTaking)
	<-taken
	ev.Close()
	lags := <-received
	note(ev.TakeOutcomes()...)

	if ev.OutcomesDropped() != 0 {
		t.Fatalf("dropped %d within the bound", ev.OutcomesDropped())
	}
	for p := range publishers {
		for i := range each {
			if n := seen[id(p, i)]; n != 1 {
				t.Fatalf("%v reached the caller %d times, want once", id(p, i), n)
			}
		}
	}
	if len(seen) != publishers*each {
		t.Fatalf("%d exits seen, want %d", len(seen), publishers*each)
	}
	t.Logf("lags: %d", lags)
}
