package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Hogs make a busy machine on purpose (--hogs N): N child processes that
// only burn CPU, started before the busy-machine rows and killed after
// them. They are passbench children like the workers: killed when the
// context ends (Ctrl-C, SIGTERM), killed and reaped by stop, and each one
// exits by itself once its parent is gone (watchParent) or its time limit
// passes, so none outlives passbench.

// roleHog is the child role of a hog.
const roleHog = "hog"

// maxHogs bounds --hogs.
const maxHogs = 64

// hogs is a running set of hogs.
type hogs struct{ kids []*child }

// hogStarted, if set (tests), is told the process ids of every set of hogs
// started.
var hogStarted func(pids []int)

// startHogs starts n hogs for at most limit.
func startHogs(ctx context.Context, n int, limit time.Duration) (*hogs, error) {
	h := &hogs{}
	for range n {
		c, err := startChild(ctx, roleHog, struct{}{}, nil, limit)
		if err != nil {
			return nil, errors.Join(err, h.stop())
		}
		h.kids = append(h.kids, c)
	}
	if hogStarted != nil {
		hogStarted(h.pids())
	}
	return h, nil
}

func (h *hogs) pids() []int {
	var p []int
	for _, c := range h.kids {
		p = append(p, c.cmd.Process.Pid)
	}
	return p
}

// stop kills and reaps every hog. A hog that had already exited (it never
// does by itself while passbench runs) is reported.
func (h *hogs) stop() error {
	var errs []error
	for _, c := range h.kids {
		if c.exited() {
			errs = append(errs, fmt.Errorf("hog %d exited early: %v%s", c.cmd.Process.Pid, c.err, c.output()))
			continue
		}
		c.kill()
	}
	h.kids = nil
	return errors.Join(errs...)
}

// hogSink keeps a hog's arithmetic alive.
var hogSink atomic.Uint64

// hogMain is a hog's life: spin until killed. The loop's result is kept
// where the compiler cannot drop it.
func hogMain() error {
	x := uint64(1)
	for {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		hogSink.Store(x)
	}
}
