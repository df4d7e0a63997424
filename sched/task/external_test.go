package task

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestTaskExternalCompleteAndTryResolve(t *testing.T) {
	var ts Scheduler[float64]
	c, err := ts.RegisterExternal(100)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if !ts.HasExternal(100) {
		t.Fatal("HasExternal false after RegisterExternal")
	}
	mustTaskStatus(t, &ts, 100, Pending)
	if _, err := ts.TryResolve(100); !errors.Is(err, ErrPending) {
		t.Fatalf("TryResolve before completion: %v, want ErrPending", err)
	}

	// The "background task" delivers the value from another goroutine.
	sent := make(chan error)
	go func() { sent <- c.Complete(42) }()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}

	v, err := ts.TryResolve(100)
	if err != nil || v != 42 {
		t.Fatalf("TryResolve = %v, %v; want 42", v, err)
	}
	if ts.HasExternal(100) {
		t.Fatal("HasExternal still true after resolution")
	}
	// Resolved once, the outcome stays cached for every kind of await.
	if v, err := ts.Resolve(t.Context(), 100); v != 42 || err != nil {
		t.Fatalf("Resolve = %v, %v", v, err)
	}
	if c.ID() != 100 {
		t.Fatalf("Completer.ID = %d", c.ID())
	}
}

func TestTaskExternalFail(t *testing.T) {
	var ts Scheduler[float64]
	c, _ := ts.RegisterExternal(200)
	refused := errors.New("connection refused")
	go func() { _ = c.Fail(refused) }()
	ctx, cancel := context.WithTimeout(t.Context(), taskWaitLong)
	defer cancel()
	if _, err := ts.Resolve(ctx, 200); err != refused {
		t.Fatalf("Resolve = %v, want the delivered error", err)
	}
	if _, err := ts.TryResolve(200); err != refused {
		t.Fatalf("TryResolve = %v, want the delivered error", err)
	}
	mustTaskStatus(t, &ts, 200, Failed)
}

func TestTaskExternalCompleterDropped(t *testing.T) {
	var ts Scheduler[float64]
	c, _ := ts.RegisterExternal(300)
	c.Release() // the sender goes away without a result
	_, err := ts.TryResolve(300)
	if !errors.Is(err, ErrCancelled) || !errors.Is(err, ErrCompleterDropped) {
		t.Fatalf("TryResolve after Release: %v, want ErrCancelled and ErrCompleterDropped", err)
	}
	if !strings.Contains(err.Error(), "completer released") {
		t.Fatalf("error %q does not say the completer was released", err)
	}
	mustTaskStatus(t, &ts, 300, Cancelled)

	err = c.Complete(1)
	if !errors.Is(err, ErrAlreadyResolved) || !errors.Is(err, ErrCompleterDropped) {
		t.Fatalf("Complete after Release: %v", err)
	}
	c.Release() // idempotent
	mustTaskStatus(t, &ts, 300, Cancelled)
}

// registerTaskAndLose registers an external task and drops its completer on
// the floor without releasing it.
//
//go:noinline
func registerTaskAndLose(ts *Scheduler[int], id ID) <-chan struct{} {
	c, err := ts.RegisterExternal(id)
	if err != nil {
		panic(err)
	}
	return c.Done()
}

func TestTaskExternalCompleterGarbageCollected(t *testing.T) {
	var ts Scheduler[int]
	done := registerTaskAndLose(&ts, 1)
	deadline := time.Now().Add(taskWaitLong)
	for !ts.IsResolved(1) {
		if time.Now().After(deadline) {
			t.Fatal("an unreachable completer did not cancel its task")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	<-done
	o := mustTaskStatus(t, &ts, 1, Cancelled)
	if !errors.Is(o.Err, ErrCompleterDropped) {
		t.Fatalf("outcome error %v, want ErrCompleterDropped", o.Err)
	}

	// A completer that delivered is not affected by its collection.
	c, _ := ts.RegisterExternal(2)
	_ = c.Complete(5)
	c = nil
	runtime.GC()
	runtime.GC()
	if o := mustTaskStatus(t, &ts, 2, Completed); o.Value != 5 {
		t.Fatalf("value = %d", o.Value)
	}
}

func TestTaskTakeReceiver(t *testing.T) {
	var ts Scheduler[float64]
	c, _ := ts.RegisterExternal(400)
	defer c.Release()
	if !ts.HasExternal(400) {
		t.Fatal("HasExternal false")
	}
	rx, err := ts.TakeReceiver(400)
	if err != nil || rx == nil {
		t.Fatalf("TakeReceiver = %v, %v", rx, err)
	}
	if ts.HasExternal(400) {
		t.Fatal("HasExternal true after the receiver was taken")
	}
	if _, err := ts.TakeReceiver(400); !errors.Is(err, ErrReceiverTaken) {
		t.Fatalf("second TakeReceiver: %v, want ErrReceiverTaken", err)
	}
	_ = ts.Register(401, taskValue(1.0, nil))
	if _, err := ts.TakeReceiver(401); !errors.Is(err, ErrNotExternal) {
		t.Fatalf("TakeReceiver of a callable task: %v, want ErrNotExternal", err)
	}

	// A blocking wait with a context: it ends with the context, and the
	// task is unaffected.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := rx.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline: %v", err)
	}
	mustTaskStatus(t, &ts, 400, Pending)

	go func() {
		time.Sleep(5 * time.Millisecond)
		_ = c.Complete(4.5)
	}()
	ctx2, cancel2 := context.WithTimeout(t.Context(), taskWaitLong)
	defer cancel2()
	if v, err := rx.Wait(ctx2); v != 4.5 || err != nil {
		t.Fatalf("Wait = %v, %v", v, err)
	}
	recvTask(t, rx.Done(), "receiver Done")
	if rx.ID() != 400 {
		t.Fatalf("Receiver.ID = %d", rx.ID())
	}
}

func TestTaskExternalNoCallable(t *testing.T) {
	var ts Scheduler[int]
	c, _ := ts.RegisterExternal(1)
	defer c.Release()
	_, err := ts.TakeCallable(1)
	if !errors.Is(err, ErrCallableTaken) || !errors.Is(err, ErrNotExternal) {
		t.Fatalf("TakeCallable of an external task: %v", err)
	}
}

// TestTaskCompleterOneShot checks that the first delivery decides and every
// later one reports why it failed.
func TestTaskCompleterOneShot(t *testing.T) {
	boom := errors.New("boom")
	type op func(ts *Scheduler[int], c *Completer[int]) error
	complete := func(ts *Scheduler[int], c *Completer[int]) error { return c.Complete(1) }
	fail := func(ts *Scheduler[int], c *Completer[int]) error { return c.Fail(boom) }
	release := func(ts *Scheduler[int], c *Completer[int]) error { c.Release(); return nil }
	cancel := func(ts *Scheduler[int], c *Completer[int]) error { return ts.Cancel(c.ID()) }
	tsComplete := func(ts *Scheduler[int], c *Completer[int]) error { return ts.Complete(c.ID(), 2) }

	for _, tc := range []struct {
		name        string
		first, then op
		status      Status
		thenErrIs   []error // nil: the second op must succeed (Release)
	}{
		{"Complete/Complete", complete, complete, Completed, []error{ErrAlreadyResolved}},
		{"Complete/Fail", complete, fail, Completed, []error{ErrAlreadyResolved}},
		{"Complete/Release", complete, release, Completed, nil},
		{"Fail/Complete", fail, complete, Failed, []error{ErrAlreadyResolved}},
		{"Release/Complete", release, complete, Cancelled, []error{ErrAlreadyResolved, ErrCancelled, ErrCompleterDropped}},
		{"Release/Fail", release, fail, Cancelled, []error{ErrAlreadyResolved, ErrCompleterDropped}},
		{"Cancel/Complete", cancel, complete, Cancelled, []error{ErrAlreadyResolved, ErrCancelled}},
		{"Cancel/Release", cancel, release, Cancelled, nil},
		{"TasksComplete/Complete", tsComplete, complete, Completed, []error{ErrAlreadyResolved}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ts Scheduler[int]
			c, _ := ts.RegisterExternal(7)
			if err := tc.first(&ts, c); err != nil {
				t.Fatalf("first op: %v", err)
			}
			before := mustTaskStatus(t, &ts, 7, tc.status)
			err := tc.then(&ts, c)
			for _, want := range tc.thenErrIs {
				if !errors.Is(err, want) {
					t.Errorf("second op: %v, want it to wrap %v", err, want)
				}
			}
			if tc.thenErrIs == nil && err != nil {
				t.Errorf("second op: %v", err)
			}
			if after := mustTaskStatus(t, &ts, 7, tc.status); after != before {
				t.Errorf("outcome changed from %+v to %+v", before, after)
			}
			recvTask(t, c.Done(), "completer Done")
		})
	}
}

func TestTaskExternalResolveWaits(t *testing.T) {
	var ts Scheduler[string]
	c, _ := ts.RegisterExternal(1)
	go func() {
		time.Sleep(5 * time.Millisecond)
		_ = c.Complete("late")
	}()
	ctx, cancel := context.WithTimeout(t.Context(), taskWaitLong)
	defer cancel()
	if v, err := ts.Resolve(ctx, 1); v != "late" || err != nil {
		t.Fatalf("Resolve = %q, %v", v, err)
	}
}
