package task

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Joins await a group of tasks at once. Every join first checks the whole
// group: an unknown id fails it with ErrUnknown naming the id, before
// anything starts. An empty group has all its results at once: All and
// AllSettled return an empty (non-nil) slice and no error, whatever ctx;
// Race and Any have no winner to return and fail with ErrEmptyGroup. Then
// every pending task of the group that still has a callable is started, so
// the tasks run concurrently, and the join waits. Tasks already resolved count as
// finished at once, in group order. An id may appear more than once.
//
// ctx bounds only the wait: if it ends first the join returns ctx.Err() and
// the tasks carry on. Race and Any, once they have their answer, cancel the
// group's other pending tasks (the losers): each loser ends Cancelled
// with an error wrapping ErrCancelled that names the winner, its running
// callable's context is cancelled with that error as the cause, and an
// external loser's Completer then fails to Complete with ErrAlreadyResolved
// and ErrCancelled. Losers already resolved are left as they are. All and
// AllSettled cancel nothing.

// All waits for every task and returns their values in group order. It
// fails with the first error to occur, as an *Error naming the task
// (remaining tasks are not cancelled).
func (t *Scheduler[T]) All(ctx context.Context, ids ...ID) ([]T, error) {
	if len(ids) == 0 {
		return []T{}, nil
	}
	g, err := t.startGroup(ctx, ids)
	if err != nil {
		return nil, err
	}
	defer g.close()
	vals := make([]T, len(g.members))
	for range g.members {
		i, err := g.next(ctx)
		if err != nil {
			return nil, err
		}
		tk := g.members[i]
		if tk.out.Err != nil {
			return nil, nameTask(tk.id, tk.out.Err)
		}
		vals[i] = tk.out.Value
	}
	return vals, nil
}

// Race returns the id and outcome of the first task to finish, whether it
// completed, failed or was cancelled, and cancels the losers.
func (t *Scheduler[T]) Race(ctx context.Context, ids ...ID) (ID, T, error) {
	g, err := t.startGroup(ctx, ids)
	if err != nil {
		var zero T
		return 0, zero, err
	}
	defer g.close()
	i, err := g.next(ctx)
	if err != nil {
		var zero T
		return 0, zero, err
	}
	win := g.members[i]
	t.cancelLosers(g.members, win, fmt.Sprintf("cancelled: lost a Race to task %d", win.id))
	return win.id, win.out.Value, win.out.Err
}

// Any returns the id and value of the first task to complete successfully
// and cancels the losers. Failures (and cancellations) are passed over; if
// every task fails, Any returns the id and error of the last to fail.
func (t *Scheduler[T]) Any(ctx context.Context, ids ...ID) (ID, T, error) {
	var zero T
	g, err := t.startGroup(ctx, ids)
	if err != nil {
		return 0, zero, err
	}
	defer g.close()
	var lastID ID
	var lastErr error
	for range g.members {
		i, err := g.next(ctx)
		if err != nil {
			return 0, zero, err
		}
		tk := g.members[i]
		if tk.out.Err != nil {
			lastID, lastErr = tk.id, tk.out.Err
			continue
		}
		t.cancelLosers(g.members, tk, fmt.Sprintf("cancelled: task %d won an Any first", tk.id))
		return tk.id, tk.out.Value, nil
	}
	return lastID, zero, lastErr
}

// AllSettled waits for every task and returns every outcome in group order.
// It fails only for an unknown id, or ctx ending.
func (t *Scheduler[T]) AllSettled(ctx context.Context, ids ...ID) ([]Outcome[T], error) {
	if len(ids) == 0 {
		return []Outcome[T]{}, nil
	}
	g, err := t.startGroup(ctx, ids)
	if err != nil {
		return nil, err
	}
	defer g.close()
	outs := make([]Outcome[T], len(g.members))
	for range g.members {
		i, err := g.next(ctx)
		if err != nil {
			return nil, err
		}
		outs[i] = g.members[i].out
	}
	return outs, nil
}

// taskGroup is a join in progress: finished receives the index of each task as
// it is resolved, in the order the tasks were resolved (already-resolved
// tasks first, in group order). Its buffer holds every index, so the
// senders, which hold Scheduler.mu, never block.
type taskGroup[T any] struct {
	tasks    *Scheduler[T]
	members  []*taskEntry[T]
	finished chan int
}

// taskWatcher asks settleLocked to send idx on ch when the task is resolved.
type taskWatcher struct {
	ch  chan<- int
	idx int
}

func (t *Scheduler[T]) startGroup(ctx context.Context, ids []ID) (*taskGroup[T], error) {
	if len(ids) == 0 {
		return nil, ErrEmptyGroup
	}
	g := &taskGroup[T]{tasks: t, members: make([]*taskEntry[T], len(ids)), finished: make(chan int, len(ids))}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, id := range ids {
		tk, err := t.lookupLocked(id)
		if err != nil {
			return nil, err
		}
		g.members[i] = tk
	}
	for _, tk := range g.members {
		t.startLocked(ctx, tk)
	}
	for i, tk := range g.members {
		if tk.out.Status != Pending {
			g.finished <- i
		} else {
			tk.watchers = append(tk.watchers, taskWatcher{g.finished, i})
		}
	}
	return g, nil
}

// close removes the group's watchers from the tasks still pending.
func (g *taskGroup[T]) close() {
	g.tasks.mu.Lock()
	defer g.tasks.mu.Unlock()
	for _, tk := range g.members {
		tk.watchers = slices.DeleteFunc(tk.watchers, func(w taskWatcher) bool { return w.ch == g.finished })
	}
}

// next returns the index of the next task to finish, or ctx.Err(). It
// prefers a finished task when ctx has ended too.
func (g *taskGroup[T]) next(ctx context.Context) (int, error) {
	select {
	case i := <-g.finished:
		return i, nil
	default:
	}
	select {
	case i := <-g.finished:
		return i, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (t *Scheduler[T]) cancelLosers(tasks []*taskEntry[T], win *taskEntry[T], msg string) {
	var zero T
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tk := range tasks {
		if tk != win {
			_ = t.settleLocked(tk, Cancelled, zero, taskErr(tk.id, msg, ErrCancelled))
		}
	}
}

// nameTask wraps err in an *Error for id unless it names id already.
func nameTask(id ID, err error) error {
	if te, ok := errors.AsType[*Error](err); ok && te.ID == id {
		return err
	}
	return &Error{ID: id, Err: err}
}
