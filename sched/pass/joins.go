package pass

import (
	"context"
	"fmt"

	"github.com/shmkit/shmkit/sched/task"
)

// The joins are the task scheduler's (task.Scheduler.All, Race, Any,
// AllSettled: same results, same errors, same order rules) over handles of
// this client. Race and Any cancel their losers as the task scheduler
// does, and the cancellation reaches the losers' workers (see
// Handle.Cancel). A join holds its handles' tasks until it returns; a
// handle whose task was already forgotten (its result taken) joins with
// its kept outcome.

// All waits for every pass and returns their results in order; it fails
// with the first error to occur, as a *task.Error naming the pass.
func (c *Client) All(ctx context.Context, hs ...*Handle) ([][]byte, error) {
	ids, err := c.join(hs)
	if err != nil {
		return nil, err
	}
	defer c.leave(hs)
	return c.tasks.All(ctx, ids...)
}

// AllSettled waits for every pass and returns every outcome in order.
func (c *Client) AllSettled(ctx context.Context, hs ...*Handle) ([]task.Outcome[[]byte], error) {
	ids, err := c.join(hs)
	if err != nil {
		return nil, err
	}
	defer c.leave(hs)
	return c.tasks.AllSettled(ctx, ids...)
}

// Race returns the first pass to settle (completed, failed or cancelled)
// and its result, and cancels the others.
func (c *Client) Race(ctx context.Context, hs ...*Handle) (*Handle, []byte, error) {
	ids, err := c.join(hs)
	if err != nil {
		return nil, nil, err
	}
	defer c.leave(hs)
	id, v, err := c.tasks.Race(ctx, ids...)
	return c.cancelLosers(hs, id), v, err
}

// Any returns the first pass to complete successfully and its result, and
// cancels the others; if every pass fails it returns the last to fail and
// its error.
func (c *Client) Any(ctx context.Context, hs ...*Handle) (*Handle, []byte, error) {
	ids, err := c.join(hs)
	if err != nil {
		return nil, nil, err
	}
	defer c.leave(hs)
	id, v, err := c.tasks.Any(ctx, ids...)
	return c.cancelLosers(hs, id), v, err
}

// join takes a share of every handle's task for a join, restoring the
// tasks already forgotten, and returns their ids.
func (c *Client) join(hs []*Handle) ([]task.ID, error) {
	for _, h := range hs {
		if h == nil || h.c != c {
			return nil, fmt.Errorf("%w: every handle of a join must come from this client's Submit", ErrForeignHandle)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]task.ID, len(hs))
	for i, h := range hs {
		cl := h.call
		if cl.forgotten {
			if err := c.tasks.Restore(cl.out); err != nil {
				for _, g := range hs[:i] {
					g.call.joins--
					c.forgetIfDone(g.call)
				}
				return nil, err
			}
			cl.forgotten = false
		}
		cl.joins++
		ids[i] = h.ID()
	}
	return ids, nil
}

// leave gives back a join's shares.
func (c *Client) leave(hs []*Handle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		h.call.joins--
		c.forgetIfDone(h.call)
	}
}

// cancelLosers tells the workers of a decided Race or Any's losers (the
// task scheduler has settled them as cancelled) and returns the winner's
// handle; with no winner (ctx ended, or an empty group) it cancels nothing.
func (c *Client) cancelLosers(hs []*Handle, win task.ID) *Handle {
	var winner *Handle
	for _, h := range hs {
		if h.ID() == win {
			winner = h
		}
	}
	if winner == nil {
		return nil
	}
	for _, h := range hs {
		if h.call != winner.call {
			c.cancel(h.call, nil)
		}
	}
	return winner
}
