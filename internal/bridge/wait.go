package bridge

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// drainContext is a context that ends drain after ctx ends: what a stop
// grants the engine to finish what it holds.
func drainContext(ctx context.Context, drain time.Duration) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-ctx.Done():
		case <-dctx.Done():
			return
		}
		t := time.NewTimer(drain)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-dctx.Done():
		}
	}()
	return dctx, cancel
}

// retryWait waits before a retry: for the connection when it is down (a
// condition), else a backoff that grows with attempt (an error from a
// live server, such as a stream refusing a message, is retried slowly).
func (c *Conn) retryWait(ctx context.Context, attempt int) error {
	if !c.IsConnected() {
		return c.WaitConnected(ctx)
	}
	d := time.Duration(10<<min(attempt, 7)) * time.Millisecond // 10 ms .. 1.28 s
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errorLog writes an error line once until the next success, so that an
// outage is one line, not one per message.
type errorLog struct {
	w      io.Writer
	mu     sync.Mutex
	logged bool
}

func (e *errorLog) note(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.logged {
		e.logged = true
		fmt.Fprintf(e.w, format+"\n", args...)
	}
}

func (e *errorLog) ok() {
	e.mu.Lock()
	e.logged = false
	e.mu.Unlock()
}
