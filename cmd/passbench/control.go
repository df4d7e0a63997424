package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// The control file is a KindRegion shared by the parent and every worker
// of one measurement, separate from the transport being measured:
//
//	body+0    go word (u32): 0 until the parent starts the run, then 1
//	body+8    start (u64): shm.MonoNow() when the parent said go
//	body+16   deadline (u64): when producers stop in a timed run, else 0
//	body+64·(1+i)  worker i, on its own cache line:
//	          +0 state (u32): workerStarting, then workerReady
//	          +8 progress (u64): messages a consumer has received so far
const (
	ctlGo       = 0
	ctlStart    = 8
	ctlDeadline = 16
	ctlLine     = layout.CacheLine
)

const (
	workerStarting uint32 = iota
	workerReady
)

// control is one process's view of the control file.
type control struct {
	reg     *shm.Region
	path    string
	removed bool
	n       int
	goWord  *atomic.Uint32
	start   *atomic.Uint64
	dead    *atomic.Uint64
}

// newControl creates the control file for n workers.
func newControl(n int) (*control, error) {
	name, err := shmName("ctl")
	if err != nil {
		return nil, err
	}
	r, err := shm.Create(name, shm.Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: uint64(ctlLine * (1 + n))}})
	if err != nil {
		return nil, err
	}
	return viewControl(r, n)
}

// openControl opens it in a worker process.
func openControl(path string, n int) (*control, error) {
	r, err := shm.Open(path, layout.KindRegion)
	if err != nil {
		return nil, err
	}
	c, err := viewControl(r, n)
	if err != nil {
		return nil, err
	}
	c.removed = true // not ours to remove
	return c, nil
}

func viewControl(r *shm.Region, n int) (*control, error) {
	c := &control{reg: r, path: r.Path(), n: n}
	var err error
	if c.goWord, err = r.Uint32(layout.HeaderSize + ctlGo); err == nil {
		if c.start, err = r.Uint64(layout.HeaderSize + ctlStart); err == nil {
			c.dead, err = r.Uint64(layout.HeaderSize + ctlDeadline)
		}
	}
	if err == nil && uint64(len(r.Body())) < uint64(ctlLine*(1+n)) {
		err = fmt.Errorf("control file %s too small for %d workers", c.path, n)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return c, nil
}

// worker returns worker i's state and progress words.
func (c *control) worker(i int) (state *atomic.Uint32, progress *atomic.Uint64) {
	off := uint64(layout.HeaderSize + ctlLine*(1+i))
	state, _ = c.reg.Uint32(off) // in range: checked by viewControl
	progress, _ = c.reg.Uint64(off + 8)
	return state, progress
}

// markReady tells the parent that worker i has opened everything.
func (c *control) markReady(i int) {
	s, _ := c.worker(i)
	s.Store(workerReady)
}

// awaitGo waits for the parent's go and returns the start and deadline.
func (c *control) awaitGo(ctx context.Context) (start, deadline int64, err error) {
	for c.goWord.Load() == 0 {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		if err := shm.FutexWait(c.goWord, 0, pollInterval); err != nil && !errors.Is(err, shm.ErrTimeout) {
			return 0, 0, err
		}
	}
	return int64(c.start.Load()), int64(c.dead.Load()), nil
}

// allReady reports whether every worker has marked itself ready.
func (c *control) allReady() bool {
	for i := range c.n {
		if s, _ := c.worker(i); s.Load() != workerReady {
			return false
		}
	}
	return true
}

// begin starts the run: producers of a timed run stop after d.
func (c *control) begin(d time.Duration) {
	now := shm.MonoNow()
	c.start.Store(uint64(now))
	if d > 0 {
		c.dead.Store(uint64(now + int64(d)))
	}
	c.goWord.Store(1)
	shm.FutexWake(c.goWord, -1)
}

// progress is the number of messages all workers have reported.
func (c *control) progress() int64 {
	var sum int64
	for i := range c.n {
		_, p := c.worker(i)
		sum += int64(p.Load())
	}
	return sum
}

// detach unlinks the file once every worker has it mapped.
func (c *control) detach() error {
	if c.removed {
		return nil
	}
	c.removed = true
	return shm.Remove(c.path)
}

func (c *control) close() error {
	err := c.detach()
	if cerr := c.reg.Close(); err == nil {
		err = cerr
	}
	return err
}
