package task

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
)

// ID names a task in a Scheduler. The caller chooses ids; an id is used by
// at most one task at a time (see Scheduler.Forget).
type ID uint64

// Errors of the task scheduler. Errors about one task are *Error values
// that name the task and wrap one or more of these, so callers test with
// errors.Is and users read the id.
var (
	ErrUnknown          = errors.New("task: unknown task")
	ErrDuplicateID      = errors.New("task: task id already registered")
	ErrEmptyGroup       = errors.New("task: empty task group")
	ErrAlreadyResolved  = errors.New("task: task already resolved")
	ErrCancelled        = errors.New("task: task cancelled")
	ErrCompleterDropped = errors.New("task: completer released without a result")
	ErrCallableTaken    = errors.New("task: task callable already taken")
	ErrPending          = errors.New("task: task still pending")
	ErrNotExternal      = errors.New("task: not an external task")
	ErrReceiverTaken    = errors.New("task: external receiver already taken")
	ErrCallableAborted  = errors.New("task: task callable panicked or exited without returning")
)

// Error ties an error to the task it concerns. Err is either the error
// a callable or completer failed the task with, or a scheduler reason that
// wraps the sentinels above; Unwrap exposes it for errors.Is and errors.As.
type Error struct {
	ID  ID
	Err error
}

func (e *Error) Error() string { return "task " + e.ID.String() + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func (id ID) String() string { return strconv.FormatUint(uint64(id), 10) }

// taskReason is a scheduler-made cause: a message for people and the sentinels
// it stands for, for errors.Is.
type taskReason struct {
	msg string
	is  []error
}

func (r *taskReason) Error() string   { return r.msg }
func (r *taskReason) Unwrap() []error { return r.is }

func taskErr(id ID, msg string, is ...error) error {
	return &Error{ID: id, Err: &taskReason{msg: msg, is: is}}
}

// wrapSentinel ties sentinel to task id, without repeating the "task: ".
func wrapSentinel(id ID, sentinel error) error {
	return taskErr(id, strings.TrimPrefix(sentinel.Error(), "task: "), sentinel)
}

// Status is where a task stands. A task starts Pending and moves exactly
// once to one of the other three, which are final.
type Status uint8

const (
	Pending   Status = iota // registered, no outcome yet (its callable may be running)
	Completed               // finished with a value
	Failed                  // finished with an error
	Cancelled               // cancelled before it finished, or its completer was released
)

func (s Status) String() string {
	switch s {
	case Pending:
		return "pending"
	case Completed:
		return "completed"
	case Failed:
		return "failed"
	case Cancelled:
		return "cancelled"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Outcome is a task's status with its value (Completed) or its error
// (Failed, Cancelled; a cancelled task's Err wraps ErrCancelled).
type Outcome[T any] struct {
	ID     ID
	Status Status
	Value  T
	Err    error
}

// Callable computes a task's result. Its context is cancelled when the task
// is cancelled (by Cancel, or as a loser of Race or Any; context.Cause then
// says why) or resolved by other means while it runs, and once it returns.
// The context carries the values of the context of the call that started
// it, but not that call's cancellation or deadline: a caller that stops
// waiting does not stop the task. A callable that panics crashes the
// program, as any goroutine would; one that calls runtime.Goexit fails its
// task with ErrCallableAborted.
type Callable[T any] func(ctx context.Context) (T, error)

// Scheduler is a task scheduler generic over the result type T. The zero value
// is ready to use; a Scheduler must not be copied after first use. All methods
// are safe for concurrent use.
//
// A Scheduler never forgets a task by itself: outcomes stay cached until Forget.
type Scheduler[T any] struct {
	mu sync.Mutex
	m  map[ID]*taskEntry[T]
}

// taskEntry is one registered task. Every field is guarded by Scheduler.mu, except
// that out is never written again once done is closed and may then be read
// without the lock.
type taskEntry[T any] struct {
	id            ID
	fn            Callable[T]             // nil once taken, started, or resolved
	cancel        context.CancelCauseFunc // non-nil while a started callable runs
	external      bool                    // registered by RegisterExternal
	receiverTaken bool
	watchers      []taskWatcher // joins waiting for this task
	out           Outcome[T]
	done          chan struct{} // closed when out becomes final
}

func (t *Scheduler[T]) lookupLocked(id ID) (*taskEntry[T], error) {
	if tk := t.m[id]; tk != nil {
		return tk, nil
	}
	return nil, wrapSentinel(id, ErrUnknown)
}

func (t *Scheduler[T]) addLocked(id ID, fn Callable[T], external bool) (*taskEntry[T], error) {
	if _, ok := t.m[id]; ok {
		return nil, wrapSentinel(id, ErrDuplicateID)
	}
	if t.m == nil {
		t.m = make(map[ID]*taskEntry[T])
	}
	tk := &taskEntry[T]{id: id, fn: fn, external: external, done: make(chan struct{})}
	tk.out = Outcome[T]{ID: id, Status: Pending}
	t.m[id] = tk
	return tk, nil
}

// Register adds a pending task that runs fn when it is first awaited. It
// fails with ErrDuplicateID if id is registered already (Forget it first).
func (t *Scheduler[T]) Register(id ID, fn Callable[T]) error {
	if fn == nil {
		return taskErr(id, "nil callable")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := t.addLocked(id, fn, false)
	return err
}

// Restore adds a task that is already resolved with outcome o (o.ID is
// its id): for a caller that forgot a task and keeps its outcome, to make
// it joinable again. It fails with ErrDuplicateID if the id is registered,
// and for an outcome that is not resolved (ErrPending).
func (t *Scheduler[T]) Restore(o Outcome[T]) error {
	if o.Status == Pending {
		return wrapSentinel(o.ID, ErrPending)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, err := t.addLocked(o.ID, nil, true)
	if err != nil {
		return err
	}
	tk.out = o
	close(tk.done)
	return nil
}

// TakeCallable removes a pending task's callable and returns it, so that the
// caller runs it itself; the task stays pending until the caller (or anyone)
// calls Complete, Fail or Cancel, and Resolve waits for that. A callable is
// handed out once: later calls, and calls after an await started it, fail
// with ErrCallableTaken, as do calls for an external task.
func (t *Scheduler[T]) TakeCallable(id ID) (Callable[T], error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, err := t.lookupLocked(id)
	switch {
	case err != nil:
		return nil, err
	case tk.out.Status != Pending:
		return nil, taskResolvedErr(tk)
	case tk.external:
		return nil, taskErr(id, "external task has no callable", ErrCallableTaken, ErrNotExternal)
	case tk.fn == nil:
		return nil, wrapSentinel(id, ErrCallableTaken)
	}
	fn := tk.fn
	tk.fn = nil
	return fn, nil
}

// Complete resolves a pending task with v. A callable that has not started
// never runs; one that is running has its context cancelled and its result
// discarded. Completing a task that is already resolved fails with
// ErrAlreadyResolved (and ErrCancelled too if it was cancelled).
func (t *Scheduler[T]) Complete(id ID, v T) error {
	return t.settleID(id, Completed, v, nil)
}

// Fail resolves a pending task with err, like Complete.
func (t *Scheduler[T]) Fail(id ID, err error) error {
	var zero T
	return t.settleID(id, Failed, zero, taskFailure(id, err))
}

// Cancel cancels a pending task: its status becomes Cancelled, its
// callable is released or, if running, has its context cancelled, and
// every await of it fails with ErrCancelled. Only a pending task can be
// cancelled; for a resolved task Cancel fails with ErrAlreadyResolved and
// changes nothing.
func (t *Scheduler[T]) Cancel(id ID) error {
	var zero T
	return t.settleID(id, Cancelled, zero, taskErr(id, "cancelled", ErrCancelled))
}

// CancelWith is Cancel with a cause: the task's error wraps ErrCancelled
// and cause, so that an awaiter can tell why (errors.Is).
func (t *Scheduler[T]) CancelWith(id ID, cause error) error {
	var zero T
	if cause == nil {
		return t.Cancel(id)
	}
	return t.settleID(id, Cancelled, zero, taskErr(id, "cancelled: "+cause.Error(), ErrCancelled, cause))
}

func taskFailure(id ID, err error) error {
	if err == nil {
		return taskErr(id, "failed with a nil error")
	}
	return err
}

func (t *Scheduler[T]) settleID(id ID, st Status, v T, err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, lerr := t.lookupLocked(id)
	if lerr != nil {
		return lerr
	}
	return t.settleLocked(tk, st, v, err)
}

func (t *Scheduler[T]) settle(tk *taskEntry[T], st Status, v T, err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.settleLocked(tk, st, v, err)
}

// settleLocked gives a pending task its final outcome, wakes its waiters
// and stops its callable; for a resolved task it returns the error saying so.
func (t *Scheduler[T]) settleLocked(tk *taskEntry[T], st Status, v T, err error) error {
	if tk.out.Status != Pending {
		return taskResolvedErr(tk)
	}
	tk.out.Status, tk.out.Value, tk.out.Err = st, v, err
	tk.fn = nil
	if tk.cancel != nil {
		cause := err
		if st != Cancelled {
			cause = taskErr(tk.id, "resolved", ErrAlreadyResolved)
		}
		tk.cancel(cause)
		tk.cancel = nil
	}
	for _, w := range tk.watchers {
		w.ch <- w.idx
	}
	tk.watchers = nil
	close(tk.done)
	return nil
}

// taskResolvedErr is the error for acting on a resolved task: it wraps
// ErrAlreadyResolved and, for a cancelled task, the reason it was cancelled.
func taskResolvedErr[T any](tk *taskEntry[T]) error {
	if tk.out.Status == Cancelled {
		var r *taskReason
		if errors.As(tk.out.Err, &r) {
			return taskErr(tk.id, "already resolved: "+r.msg, ErrAlreadyResolved, r)
		}
		return taskErr(tk.id, "already resolved: cancelled", ErrAlreadyResolved, ErrCancelled)
	}
	return taskErr(tk.id, "already resolved: "+tk.out.Status.String(), ErrAlreadyResolved)
}

// Status returns a task's outcome so far; its Status is Pending until
// the task is resolved.
func (t *Scheduler[T]) Status(id ID) (Outcome[T], error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, err := t.lookupLocked(id)
	if err != nil {
		return Outcome[T]{ID: id}, err
	}
	return tk.out, nil
}

// IsResolved reports whether a task has a final outcome (completed, failed
// or cancelled). It is false for an unknown id.
func (t *Scheduler[T]) IsResolved(id ID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk := t.m[id]
	return tk != nil && tk.out.Status != Pending
}

// Done returns a channel that is closed when the task is resolved.
func (t *Scheduler[T]) Done(id ID) (<-chan struct{}, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, err := t.lookupLocked(id)
	if err != nil {
		return nil, err
	}
	return tk.done, nil
}

// Forget removes a resolved task and its cached outcome, freeing its id for
// a new task. A pending task cannot be forgotten (ErrPending): cancel or
// resolve it first. Handles already given out (Completer, Receiver, Done
// channels) keep working on the forgotten task.
func (t *Scheduler[T]) Forget(id ID) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, err := t.lookupLocked(id)
	if err != nil {
		return err
	}
	if tk.out.Status == Pending {
		return wrapSentinel(id, ErrPending)
	}
	delete(t.m, id)
	return nil
}

// Resolve awaits a task. A resolved task's cached value or error is returned
// again without running anything; a pending task with a callable that has
// not started is started now (on its own goroutine, with a context carrying
// ctx's values); then Resolve waits for the outcome. However many goroutines
// resolve one task at once, its callable runs once and they all get its
// result. A cancelled task's error wraps ErrCancelled.
//
// ctx bounds only the wait: if it ends first, Resolve returns ctx.Err() and
// the task carries on (use Cancel to stop it).
func (t *Scheduler[T]) Resolve(ctx context.Context, id ID) (T, error) {
	t.mu.Lock()
	tk, err := t.lookupLocked(id)
	if err == nil {
		t.startLocked(ctx, tk)
	}
	t.mu.Unlock()
	if err != nil {
		var zero T
		return zero, err
	}
	return tk.wait(ctx)
}

// TryResolve returns a task's value or error if it is resolved, without
// running or waiting for anything; for a pending task it fails with
// ErrPending.
func (t *Scheduler[T]) TryResolve(id ID) (T, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var zero T
	tk, err := t.lookupLocked(id)
	if err != nil {
		return zero, err
	}
	if tk.out.Status == Pending {
		return zero, wrapSentinel(id, ErrPending)
	}
	return tk.out.Value, tk.out.Err
}

// startLocked starts a pending task's callable unless it has none left
// (started already, taken, or external).
func (t *Scheduler[T]) startLocked(ctx context.Context, tk *taskEntry[T]) {
	if tk.out.Status != Pending || tk.fn == nil {
		return
	}
	fn := tk.fn
	tk.fn = nil
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	tk.cancel = cancel
	go t.run(rctx, tk, fn)
}

func (t *Scheduler[T]) run(ctx context.Context, tk *taskEntry[T], fn Callable[T]) {
	returned := false
	defer func() {
		if !returned {
			// A panic goes on to crash the program as usual; this only keeps
			// waiters (and runtime.Goexit) from hanging on the task.
			var zero T
			_ = t.settle(tk, Failed, zero, wrapSentinel(tk.id, ErrCallableAborted))
		}
	}()
	v, err := fn(ctx)
	returned = true
	if err != nil {
		var zero T
		_ = t.settle(tk, Failed, zero, err)
		return
	}
	_ = t.settle(tk, Completed, v, nil)
}

// wait blocks until the task is resolved or ctx ends, preferring the
// outcome when both are ready.
func (tk *taskEntry[T]) wait(ctx context.Context) (T, error) {
	select {
	case <-tk.done:
		return tk.out.Value, tk.out.Err
	default:
	}
	select {
	case <-tk.done:
		return tk.out.Value, tk.out.Err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
