package heartbeat

import (
	"errors"
	"testing"
	"time"

	"github.com/shmkit/shmkit/shm"
)

func TestExitEventsOverflowGivesOneLagged(t *testing.T) {
	ev := NewExitEvents(2)
	sub, err := ev.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Subscribe(); !errors.Is(err, ErrAlreadySubscribed) {
		t.Fatalf("second subscription: %v", err)
	}
	for pid := int32(1); pid <= 5; pid++ {
		ev.Publish(ExitEvent{PID: pid, Reason: ExitUnregistered})
	}
	_, err = sub.Recv()
	var lag *LaggedError
	if !errors.Is(err, ErrLagged) || !errors.As(err, &lag) || lag.Missed != 5 || lag.Dropped != 0 {
		t.Fatalf("want a lag of 5, got %v", err)
	}
	if e, err := sub.RecvTimeout(0); !errors.Is(err, ErrRecvTimeout) {
		t.Fatalf("lag must reset the queued batch, got %v %v", e, err)
	}
	// The batch is still in the store.
	if got := ev.TakeOutcomes(); len(got) != 5 || got[0].PID != 1 || got[4].PID != 5 {
		t.Fatalf("outcomes after the lag: %v", got)
	}
	ev.Publish(ExitEvent{PID: 6, Reason: ExitReclaimed})
	if e, err := sub.Recv(); err != nil || e.PID != 6 || e.Reason != ExitReclaimed {
		t.Fatalf("after recovery: %v %v", e, err)
	}
	if got := ev.Outcomes(); len(got) != 0 {
		t.Fatalf("a received event stayed in the store: %v", got)
	}
}

func TestExitEventsBlockingRecvAndDisconnect(t *testing.T) {
	ev := NewExitEvents(4)
	sub, _ := ev.Subscribe()
	go func() {
		time.Sleep(10 * time.Millisecond)
		ev.Publish(ExitEvent{PID: 9, Reason: ExitReclaimed})
		time.Sleep(10 * time.Millisecond)
		ev.Close()
	}()
	if e, err := sub.Recv(); err != nil || e.PID != 9 {
		t.Fatalf("%v %v", e, err)
	}
	if _, err := sub.Recv(); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := sub.RecvTimeout(time.Second); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("after close: %v", err)
	}
}

func TestExitEventsTimeout(t *testing.T) {
	ev := NewExitEvents(1)
	sub, _ := ev.Subscribe()
	start := time.Now()
	if _, err := sub.RecvTimeout(20 * time.Millisecond); !errors.Is(err, ErrRecvTimeout) {
		t.Fatal(err)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("returned before the timeout")
	}
}

// Exits published before a subscription are not received, but their
// outcomes are stored.
func TestExitEventsBeforeSubscriptionAreStoredNotReceived(t *testing.T) {
	ev := NewExitEvents(1)
	ev.Publish(ExitEvent{PID: 1})
	sub, _ := ev.Subscribe()
	if _, err := sub.RecvTimeout(0); !errors.Is(err, ErrRecvTimeout) {
		t.Fatal(err)
	}
	if e, ok := ev.TakeOutcome(shm.ProcessID{PID: 1}); !ok || e.PID != 1 {
		t.Fatalf("outcome %v %v", e, ok)
	}
}
