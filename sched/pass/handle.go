package pass

import (
	"context"
	"time"

	"github.com/shmkit/shmkit/sched/task"
)

// Handle is a submitted pass: awaited with Wait, or with its client's
// joins. Its ID is the pass's token, unique on the submit queue.
type Handle struct {
	c    *Client
	call *call
}

// ID is the handle's task id (the pass's token).
func (h *Handle) ID() task.ID { return task.ID(h.call.token) }

// Wait waits for the pass's result: its bytes, or an error that wraps
// ErrFailed (a closure error, an unknown closure, ...) or task.ErrCancelled
// (cancelled by Cancel, a lost Race or Any, or Close). ctx bounds only the
// wait: if it ends first Wait returns ctx's error and the pass carries on
// (Cancel stops it). Once Wait has returned the result the handle keeps
// it, and its task is forgotten when no join holds it.
func (h *Handle) Wait(ctx context.Context) ([]byte, error) {
	c, cl := h.c, h.call
	c.mu.Lock()
	if cl.forgotten {
		out := cl.out
		c.mu.Unlock()
		return out.Value, out.Err
	}
	c.mu.Unlock()
	v, err := c.tasks.Resolve(ctx, task.ID(cl.token))
	c.mu.Lock()
	if cl.forgotten {
		// Another Wait of this handle had the result and forgot the task
		// while this one looked it up.
		out := cl.out
		c.mu.Unlock()
		return out.Value, out.Err
	}
	if err != nil && ctx.Err() != nil && !c.tasks.IsResolved(task.ID(cl.token)) {
		c.mu.Unlock()
		return nil, err
	}
	cl.handle = false
	c.forgetIfDone(cl)
	c.mu.Unlock()
	return v, err
}

// Done returns a channel closed when the pass has settled.
func (h *Handle) Done() <-chan struct{} { return h.call.comp.Done() }

// Cancel cancels the pass if its result has not come: Wait then fails with
// task.ErrCancelled, and the worker running it (in whatever process) has
// its closure's context cancelled; a worker that claims it later skips it.
// The result that still comes is dropped and counted (ClientStats.Late).
// A settled pass is left as it is.
func (h *Handle) Cancel() { h.c.cancel(h.call, nil) }

func newTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }
