package heartbeat

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// Close disconnects receivers that are already blocked in Recv, every one
// of them (two goroutines on one subscription here), not only a receive
// that starts after it.
func TestExitEventsCloseWakesBlockedReceivers(t *testing.T) {
	ev := NewExitEvents(4)
	sub, _ := ev.Subscribe()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := sub.Recv()
			errs <- err
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ev.blockedReceivers() < 2 {
		if ctx.Err() != nil {
			t.Fatal("the receivers never blocked")
		}
		runtime.Gosched()
	}
	ev.Close()
	ev.Close() // harmless
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrDisconnected) {
				t.Fatalf("blocked Recv after Close: %v, want ErrDisconnected", err)
			}
		case <-ctx.Done():
			t.Fatal("a Recv blocked before Close is still blocked")
		}
	}
	ev.Publish(ExitEvent{PID: 1, Reason: ExitUnregistered})
	if _, err := sub.Recv(); !errors.Is(err, ErrDisconnected) {
		t.Fatalf("a publish after Close was delivered: %v", err)
	}
}
