package task

// Seed test scenarios (Rust task_scheduler.rs, mod tests) and the Go tests
// that reproduce them:
//
//	test_register_and_take_callable    -> TestTaskRegisterAndTakeCallable
//	test_resolve_task_synchronous      -> TestTaskResolveCachesResult
//	test_cancel_task                   -> TestTaskCancel
//	test_resolve_all_group             -> TestTaskJoinAllSeed (task_join_test.go)
//	test_resolve_race_group            -> TestTaskJoinRaceSeed (task_join_test.go)
//	test_register_external_and_resolve -> TestTaskExternalCompleteAndTryResolve (task_external_test.go)
//	test_external_task_error           -> TestTaskExternalFail (task_external_test.go)
//	test_external_task_cancelled       -> TestTaskExternalCompleterDropped (task_external_test.go)
//	test_take_external_receiver        -> TestTaskTakeReceiver (task_external_test.go)

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// taskWaitLong bounds waits for things that must happen; only a broken
// scheduler gets near it.
const taskWaitLong = 10 * time.Second

// taskValue returns a callable that returns v and counts its runs.
func taskValue[T any](v T, runs *atomic.Int32) Callable[T] {
	return func(context.Context) (T, error) {
		if runs != nil {
			runs.Add(1)
		}
		return v, nil
	}
}

// taskBlocker makes a callable (fn) that closes started, then returns v
// once release is closed, or, if its context is cancelled first, records
// the cause and closes cancelled.
type taskBlocker struct {
	started, release, cancelled chan struct{}
	cause                       error
}

func newTaskBlocker() *taskBlocker {
	return &taskBlocker{started: make(chan struct{}), release: make(chan struct{}), cancelled: make(chan struct{})}
}

func (b *taskBlocker) fn(v int) Callable[int] {
	return func(ctx context.Context) (int, error) {
		close(b.started)
		select {
		case <-b.release:
			return v, nil
		case <-ctx.Done():
			b.cause = context.Cause(ctx)
			close(b.cancelled)
			return 0, ctx.Err()
		}
	}
}

func recvTask(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(taskWaitLong):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func mustTaskStatus[T any](t *testing.T, ts *Scheduler[T], id ID, want Status) Outcome[T] {
	t.Helper()
	o, err := ts.Status(id)
	if err != nil {
		t.Fatalf("Status(%d): %v", id, err)
	}
	if o.Status != want {
		t.Fatalf("task %d status = %v (err %v), want %v", id, o.Status, o.Err, want)
	}
	return o
}

func TestTaskRegisterAndTakeCallable(t *testing.T) {
	var ts Scheduler[float64]
	if err := ts.Register(1, taskValue(42.0, nil)); err != nil {
		t.Fatal(err)
	}
	mustTaskStatus(t, &ts, 1, Pending)

	fn, err := ts.TakeCallable(1)
	if err != nil || fn == nil {
		t.Fatalf("TakeCallable = %v, %v", fn, err)
	}
	if _, err := ts.TakeCallable(1); !errors.Is(err, ErrCallableTaken) {
		t.Fatalf("second TakeCallable: %v, want ErrCallableTaken", err)
	}

	// The taker runs the callable and completes the task; Resolve waits
	// for that and never runs anything itself.
	res := make(chan error, 1)
	go func() {
		v, err := ts.Resolve(t.Context(), 1)
		if err == nil && v != 42 {
			err = errors.New("wrong value")
		}
		res <- err
	}()
	v, err := fn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Complete(1, v); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("Resolve after Complete: %v", err)
	}
	if _, err := ts.TakeCallable(1); !errors.Is(err, ErrAlreadyResolved) {
		t.Fatalf("TakeCallable of a resolved task: %v, want ErrAlreadyResolved", err)
	}
}

func TestTaskResolveCachesResult(t *testing.T) {
	var ts Scheduler[float64]
	var runs atomic.Int32
	if err := ts.Register(1, taskValue(99.0, &runs)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		v, err := ts.Resolve(t.Context(), 1)
		if err != nil || v != 99 {
			t.Fatalf("Resolve #%d = %v, %v; want 99", i, v, err)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("callable ran %d times, want 1", n)
	}
	o := mustTaskStatus(t, &ts, 1, Completed)
	if o.Value != 99 || o.Err != nil || o.ID != 1 {
		t.Fatalf("outcome = %+v", o)
	}

	// A failure is cached too.
	boom := errors.New("boom")
	runs.Store(0)
	_ = ts.Register(2, func(context.Context) (float64, error) { runs.Add(1); return 0, boom })
	for range 2 {
		if _, err := ts.Resolve(t.Context(), 2); err != boom {
			t.Fatalf("Resolve of failing task: %v, want the callable's error as is", err)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("failing callable ran %d times, want 1", n)
	}
	mustTaskStatus(t, &ts, 2, Failed)
}

func TestTaskCancel(t *testing.T) {
	var ts Scheduler[float64]
	var runs atomic.Int32
	_ = ts.Register(1, taskValue(0.0, &runs))
	if ts.IsResolved(1) {
		t.Fatal("pending task reported resolved")
	}
	if err := ts.Cancel(1); err != nil {
		t.Fatal(err)
	}
	if !ts.IsResolved(1) {
		t.Fatal("cancelled task not reported resolved")
	}
	if _, err := ts.Resolve(t.Context(), 1); !errors.Is(err, ErrCancelled) {
		t.Fatalf("Resolve of a cancelled task: %v, want ErrCancelled", err)
	}
	if runs.Load() != 0 {
		t.Fatal("cancelled task's callable ran")
	}
	o := mustTaskStatus(t, &ts, 1, Cancelled)
	if !errors.Is(o.Err, ErrCancelled) {
		t.Fatalf("outcome error %v does not wrap ErrCancelled", o.Err)
	}

	// Only a pending task can be cancelled or completed.
	err := ts.Cancel(1)
	if !errors.Is(err, ErrAlreadyResolved) || !errors.Is(err, ErrCancelled) {
		t.Fatalf("second Cancel: %v", err)
	}
	err = ts.Complete(1, 5)
	if !errors.Is(err, ErrAlreadyResolved) || !errors.Is(err, ErrCancelled) {
		t.Fatalf("Complete after Cancel: %v", err)
	}
	_ = ts.Register(2, taskValue(2.0, nil))
	if _, err := ts.Resolve(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	err = ts.Cancel(2)
	if !errors.Is(err, ErrAlreadyResolved) || errors.Is(err, ErrCancelled) {
		t.Fatalf("Cancel of a completed task: %v", err)
	}
	mustTaskStatus(t, &ts, 2, Completed)
	if !strings.Contains(err.Error(), "task 2") || !strings.Contains(err.Error(), "completed") {
		t.Fatalf("error %q should name the task and its status", err)
	}
}

func TestTaskCancelRunning(t *testing.T) {
	var ts Scheduler[int]
	b := newTaskBlocker()
	_ = ts.Register(1, b.fn(1))
	res := make(chan error, 1)
	go func() { _, err := ts.Resolve(t.Context(), 1); res <- err }()
	recvTask(t, b.started, "callable start")
	if err := ts.Cancel(1); err != nil {
		t.Fatal(err)
	}
	recvTask(t, b.cancelled, "callable context cancellation")
	if !errors.Is(b.cause, ErrCancelled) {
		t.Fatalf("callable's context cause = %v, want ErrCancelled", b.cause)
	}
	if err := <-res; !errors.Is(err, ErrCancelled) {
		t.Fatalf("Resolve: %v, want ErrCancelled", err)
	}
	mustTaskStatus(t, &ts, 1, Cancelled) // the callable's late return changes nothing
}

func TestTaskCompleteWhileRunning(t *testing.T) {
	var ts Scheduler[int]
	b := newTaskBlocker()
	_ = ts.Register(1, b.fn(1))
	res := make(chan int, 1)
	go func() { v, _ := ts.Resolve(t.Context(), 1); res <- v }()
	recvTask(t, b.started, "callable start")
	if err := ts.Complete(1, 7); err != nil {
		t.Fatal(err)
	}
	recvTask(t, b.cancelled, "callable context cancellation")
	if !errors.Is(b.cause, ErrAlreadyResolved) {
		t.Fatalf("cause = %v, want ErrAlreadyResolved", b.cause)
	}
	if v := <-res; v != 7 {
		t.Fatalf("Resolve = %d, want the completed 7", v)
	}
	if o := mustTaskStatus(t, &ts, 1, Completed); o.Value != 7 {
		t.Fatalf("value = %d", o.Value)
	}
}

func TestTaskStatusString(t *testing.T) {
	for _, tc := range []struct {
		s    Status
		want string
	}{
		{Pending, "pending"},
		{Completed, "completed"},
		{Failed, "failed"},
		{Cancelled, "cancelled"},
		{Status(9), "Status(9)"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%d.String() = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestTaskUnknownID(t *testing.T) {
	var ts Scheduler[int]
	_ = ts.Register(1, taskValue(1, nil))
	ctx := t.Context()
	const id = 4242
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Resolve", func() error { _, err := ts.Resolve(ctx, id); return err }},
		{"TryResolve", func() error { _, err := ts.TryResolve(id); return err }},
		{"TakeCallable", func() error { _, err := ts.TakeCallable(id); return err }},
		{"Complete", func() error { return ts.Complete(id, 1) }},
		{"Fail", func() error { return ts.Fail(id, errors.New("x")) }},
		{"Cancel", func() error { return ts.Cancel(id) }},
		{"Status", func() error { _, err := ts.Status(id); return err }},
		{"Done", func() error { _, err := ts.Done(id); return err }},
		{"Forget", func() error { return ts.Forget(id) }},
		{"TakeReceiver", func() error { _, err := ts.TakeReceiver(id); return err }},
		{"All", func() error { _, err := ts.All(ctx, 1, id); return err }},
		{"Race", func() error { _, _, err := ts.Race(ctx, 1, id); return err }},
		{"Any", func() error { _, _, err := ts.Any(ctx, 1, id); return err }},
		{"AllSettled", func() error { _, err := ts.AllSettled(ctx, 1, id); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, ErrUnknown) {
				t.Fatalf("err = %v, want ErrUnknown", err)
			}
			var te *Error
			if !errors.As(err, &te) || te.ID != id || !strings.Contains(err.Error(), "4242") {
				t.Fatalf("error %q does not name task %d", err, id)
			}
		})
	}
	if ts.IsResolved(id) || ts.HasExternal(id) {
		t.Fatal("unknown id reported resolved or external")
	}
	// The joins checked the group before starting anything.
	mustTaskStatus(t, &ts, 1, Pending)
}

func TestTaskRegisterErrors(t *testing.T) {
	var ts Scheduler[int]
	if err := ts.Register(1, taskValue(1, nil)); err != nil {
		t.Fatal(err)
	}
	if err := ts.Register(1, taskValue(2, nil)); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("duplicate Register: %v", err)
	}
	if _, err := ts.RegisterExternal(1); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("duplicate RegisterExternal: %v", err)
	}
	if err := ts.Register(2, nil); err == nil {
		t.Fatal("Register with a nil callable succeeded")
	}
	if _, err := ts.Status(2); !errors.Is(err, ErrUnknown) {
		t.Fatal("nil callable was registered")
	}
}

func TestTaskFailTryResolveAndForget(t *testing.T) {
	var ts Scheduler[string]
	_ = ts.Register(1, taskValue("never", nil))
	if _, err := ts.TryResolve(1); !errors.Is(err, ErrPending) {
		t.Fatalf("TryResolve of a pending task: %v, want ErrPending", err)
	}
	if err := ts.Forget(1); !errors.Is(err, ErrPending) {
		t.Fatalf("Forget of a pending task: %v, want ErrPending", err)
	}
	boom := errors.New("boom")
	if err := ts.Fail(1, boom); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.TryResolve(1); err != boom {
		t.Fatalf("TryResolve = %v, want boom", err)
	}
	if err := ts.Fail(1, boom); !errors.Is(err, ErrAlreadyResolved) {
		t.Fatalf("second Fail: %v", err)
	}
	if err := ts.Forget(1); err != nil {
		t.Fatal(err)
	}
	if err := ts.Register(1, taskValue("again", nil)); err != nil {
		t.Fatalf("Register of a forgotten id: %v", err)
	}
	if v, err := ts.Resolve(t.Context(), 1); v != "again" || err != nil {
		t.Fatalf("Resolve = %q, %v", v, err)
	}

	// Fail with a nil error still fails the task with a non-nil error.
	_ = ts.Register(2, taskValue("x", nil))
	_ = ts.Fail(2, nil)
	if o := mustTaskStatus(t, &ts, 2, Failed); o.Err == nil {
		t.Fatal("Fail(nil) left a nil error")
	}
}

func TestTaskResolveSingleflight(t *testing.T) {
	var ts Scheduler[int]
	var runs atomic.Int32
	gate := make(chan struct{})
	_ = ts.Register(1, func(context.Context) (int, error) {
		runs.Add(1)
		<-gate
		return 5, nil
	})
	const n = 200
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for range n {
		wg.Go(func() {
			if v, err := ts.Resolve(t.Context(), 1); v != 5 || err != nil {
				wrong.Add(1)
			}
		})
	}
	time.Sleep(10 * time.Millisecond) // let most resolvers reach the wait
	close(gate)
	wg.Wait()
	if r := runs.Load(); r != 1 {
		t.Fatalf("callable ran %d times under %d concurrent resolvers, want 1", r, n)
	}
	if w := wrong.Load(); w != 0 {
		t.Fatalf("%d resolvers got a wrong result", w)
	}
}

type taskCtxKey struct{}

func TestTaskResolveContextBoundsOnlyTheWait(t *testing.T) {
	var ts Scheduler[string]
	release := make(chan struct{})
	seen := make(chan any, 1)
	_ = ts.Register(1, func(ctx context.Context) (string, error) {
		seen <- ctx.Value(taskCtxKey{})
		select {
		case <-release:
			return "done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	ctx, cancel := context.WithTimeout(context.WithValue(t.Context(), taskCtxKey{}, "v"), 20*time.Millisecond)
	defer cancel()
	if _, err := ts.Resolve(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Resolve past its deadline: %v", err)
	}
	if got := <-seen; got != "v" {
		t.Fatalf("callable saw context taskValue %v, want the resolver's", got)
	}
	mustTaskStatus(t, &ts, 1, Pending) // the task carries on
	close(release)
	if v, err := ts.Resolve(t.Context(), 1); v != "done" || err != nil {
		t.Fatalf("Resolve = %q, %v", v, err)
	}
	// A resolved task's outcome wins over an ended context.
	if v, err := ts.Resolve(ctx, 1); v != "done" || err != nil {
		t.Fatalf("Resolve with an ended context of a resolved task = %q, %v", v, err)
	}
}

func TestTaskCallableGoexit(t *testing.T) {
	var ts Scheduler[int]
	_ = ts.Register(1, func(context.Context) (int, error) {
		runtime.Goexit()
		return 0, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), taskWaitLong)
	defer cancel()
	if _, err := ts.Resolve(ctx, 1); !errors.Is(err, ErrCallableAborted) {
		t.Fatalf("Resolve of a callable that exited: %v, want ErrCallableAborted", err)
	}
}

func TestTaskDone(t *testing.T) {
	var ts Scheduler[int]
	_ = ts.Register(1, taskValue(1, nil))
	done, err := ts.Done(1)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("Done closed before the task was awaited")
	default:
	}
	if _, err := ts.Resolve(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	recvTask(t, done, "Done")
}
