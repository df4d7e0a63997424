package pass

import (
	"context"
	"sync"
	"time"
)

// passCtx is the context a closure runs with: cancelled when its submitter
// cancels the pass or leaves, or when Stop gives up (abandon). It is made
// per pass, one small allocation with no registration in a parent (a
// context.WithCancel child of the pool's context would insert itself in
// the parent's child set and take its lock on every pass, from every
// worker); Stop reaches it through the worker's run instead. Values and
// the deadline are the pool context's (none).
type passCtx struct {
	mu   sync.Mutex
	done chan struct{} // made on the first Done, or closed-on-make by cancel
	err  error
}

// closedChan is the Done channel of every pass context cancelled before
// anyone asked for Done.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *passCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *passCtx) Value(any) any               { return nil }

func (c *passCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *passCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// cancel ends the context with cause (nil: context.Canceled). Err then
// returns an error that is context.Canceled and wraps cause, so that
// context.Cause (which, for a context of its own type, returns Err) says
// why too. Later calls do nothing.
func (c *passCtx) cancel(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = context.Canceled
	if cause != nil {
		c.err = &cancelled{cause: cause}
	}
	if c.done == nil {
		c.done = closedChan
	} else {
		close(c.done)
	}
}

// cancelled is a pass context's error when it was cancelled with a cause.
type cancelled struct{ cause error }

func (e *cancelled) Error() string        { return "context canceled: " + e.cause.Error() }
func (e *cancelled) Unwrap() []error      { return []error{context.Canceled, e.cause} }
func (e *cancelled) Is(target error) bool { return target == context.Canceled }
