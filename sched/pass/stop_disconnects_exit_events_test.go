package pass

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shmkit/shmkit/sched/heartbeat"
)

// A pool's Stop closes its exit events: a subscriber blocked in Recv gets
// what was published, then heartbeat.ErrDisconnected, instead of hanging
// (the seed disconnects when its scheduler is dropped).
func TestStopDisconnectsExitEventSubscriber(t *testing.T) {
	f := newSchedFiles(t)
	cfg := f.pool(1)
	cfg.Events = heartbeat.NewExitEvents(8)
	sub, err := cfg.Events.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	type received struct {
		events []heartbeat.ExitEvent
		err    error
	}
	done := make(chan received, 1)
	go func() {
		var got received
		for {
			e, err := sub.Recv()
			if err != nil {
				got.err = err
				done <- got
				return
			}
			got.events = append(got.events, e)
		}
	}()

	// A member that registers and leaves between two scans is announced
	// (the watchdog sees its slot's generation move on).
	p.ScanNow()
	visitor, err := p.Heartbeat().Register("visitor")
	if err != nil {
		t.Fatal(err)
	}
	slot := visitor.Slot()
	if err := visitor.Unregister(); err != nil {
		t.Fatal(err)
	}
	if rep := p.ScanNow(); len(rep.Events) != 1 {
		t.Fatalf("scan events %v, want the visitor's", rep.Events)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	select {
	case got := <-done:
		if !errors.Is(got.err, heartbeat.ErrDisconnected) {
			t.Fatalf("Recv after Stop: %v, want ErrDisconnected", got.err)
		}
		if len(got.events) != 1 || got.events[0].Reason != heartbeat.ExitUnregistered || got.events[0].Slot != slot {
			t.Fatalf("events %v, want the visitor's unregistration from slot %d", got.events, slot)
		}
	case <-time.After(time.Minute):
		t.Fatal("Recv still blocked after Stop")
	}
}
