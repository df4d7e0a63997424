package task

import (
	"context"
	"runtime"
	"sync"
)

// Completer delivers the outcome of an external task (see
// Scheduler.RegisterExternal). Complete, Fail and Release are one-shot and safe
// from any goroutine: the first of them to reach a pending task decides its
// outcome, and Complete and Fail report an error (wrapping
// ErrAlreadyResolved, and ErrCancelled if the task was cancelled) when the
// task was resolved before, by this completer or otherwise.
//
// A completer that is released, or becomes unreachable, without delivering
// anything cancels its task with an error wrapping ErrCancelled and
// ErrCompleterDropped. Release it explicitly (defer c.Release() is the
// usual idiom): the garbage-collector clean-up is a safety net and runs at
// no particular time.
type Completer[T any] struct {
	tasks   *Scheduler[T]
	tk      *taskEntry[T]
	cleanup runtime.Cleanup
	disarm  sync.Once
}

// RegisterExternal adds a pending external task, one that has no callable
// and is resolved through the returned Completer (or by Complete, Fail or
// Cancel on the Scheduler). Resolve waits for it; TryResolve polls it; a
// Receiver (TakeReceiver) waits for it without the Scheduler. It fails with
// ErrDuplicateID if id is registered already.
func (t *Scheduler[T]) RegisterExternal(id ID) (*Completer[T], error) {
	t.mu.Lock()
	tk, err := t.addLocked(id, nil, true)
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c := &Completer[T]{tasks: t, tk: tk}
	c.cleanup = runtime.AddCleanup(c, dropTaskCompleter[T], taskCompleterRef[T]{t, tk})
	return c, nil
}

type taskCompleterRef[T any] struct {
	tasks *Scheduler[T]
	tk    *taskEntry[T]
}

func dropTaskCompleter[T any](r taskCompleterRef[T]) { r.tasks.drop(r.tk) }

func (t *Scheduler[T]) drop(tk *taskEntry[T]) {
	var zero T
	_ = t.settle(tk, Cancelled, zero,
		taskErr(tk.id, "cancelled: completer released without a result", ErrCancelled, ErrCompleterDropped))
}

// ID returns the id of the completer's task.
func (c *Completer[T]) ID() ID { return c.tk.id }

// Done returns a channel closed when the task is resolved by any means, so
// that the code holding the completer can stop working on a task that was
// cancelled meanwhile.
func (c *Completer[T]) Done() <-chan struct{} { return c.tk.done }

// Complete resolves the task with v.
func (c *Completer[T]) Complete(v T) error {
	c.stopCleanup()
	return c.tasks.settle(c.tk, Completed, v, nil)
}

// Fail resolves the task with err.
func (c *Completer[T]) Fail(err error) error {
	c.stopCleanup()
	var zero T
	return c.tasks.settle(c.tk, Failed, zero, taskFailure(c.tk.id, err))
}

// Release drops the completer: if the task is still pending it is cancelled
// with an error wrapping ErrCancelled and ErrCompleterDropped; otherwise
// Release does nothing. Complete and Fail after Release fail.
func (c *Completer[T]) Release() {
	c.stopCleanup()
	c.tasks.drop(c.tk)
}

// stopCleanup runs before the task is settled, while c is still reachable,
// so that the clean-up can never cancel a task that c is completing.
func (c *Completer[T]) stopCleanup() { c.disarm.Do(c.cleanup.Stop) }

// Receiver waits for the outcome of an external task without going through
// the Scheduler; see Scheduler.TakeReceiver.
type Receiver[T any] struct{ tk *taskEntry[T] }

// HasExternal reports whether id is a pending external task whose receiver
// has not been taken: one whose outcome the scheduler is still waiting for
// from a completer.
func (t *Scheduler[T]) HasExternal(id ID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk := t.m[id]
	return tk != nil && tk.external && !tk.receiverTaken && tk.out.Status == Pending
}

// TakeReceiver hands out the receiver of an external task, once: a second
// call fails with ErrReceiverTaken, and a task registered with a callable
// fails with ErrNotExternal. Taking the receiver changes nothing else: the
// outcome is still cached in the Scheduler for Resolve and TryResolve.
func (t *Scheduler[T]) TakeReceiver(id ID) (*Receiver[T], error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, err := t.lookupLocked(id)
	switch {
	case err != nil:
		return nil, err
	case !tk.external:
		return nil, wrapSentinel(id, ErrNotExternal)
	case tk.receiverTaken:
		return nil, wrapSentinel(id, ErrReceiverTaken)
	}
	tk.receiverTaken = true
	return &Receiver[T]{tk: tk}, nil
}

// ID returns the id of the receiver's task.
func (r *Receiver[T]) ID() ID { return r.tk.id }

// Done returns a channel closed when the task is resolved.
func (r *Receiver[T]) Done() <-chan struct{} { return r.tk.done }

// Wait blocks until the task is resolved and returns its value or error, or
// returns ctx.Err() if ctx ends first (the task itself is not affected).
func (r *Receiver[T]) Wait(ctx context.Context) (T, error) { return r.tk.wait(ctx) }
