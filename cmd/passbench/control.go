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
//	body+4    stop word (u32): pass workers stop serving once it is 1
//	body+8    start (u64): shm.MonoNow() when the parent said go
//	body+16   deadline (u64): when producers stop in a timed run, else 0
//	body+24   gate (u32): gated producers send only sequence numbers below
//	          it, while it is not 0 (a counted --chaos run); a futex word
//	body+64·(1+i)  worker i, on its own cache line:
//	          +0  state (u32): workerStarting, then workerReady
//	          +4  waiter (u32): a pass submitter sleeps on the done word
//	          +8  progress (u64): messages a consumer has received so far
//	              (a leased consumer: after each message); for a pass
//	              submitter, its passes the parent has collected
//	          +16 duplicates (u64): leased consumer: copies of messages
//	              already marked received
//	          +24 corrupt (u64): leased consumer: messages failing a check
//	          +32 last (u64): leased consumer: shm.MonoNow() of its last
//	              data message
//	          +40 done (u32): pass submitter: low 32 bits of progress, a
//	              futex word
//
// What a leased consumer counts lives here, not in its report, so that it
// survives the consumer being killed.
const (
	ctlGo       = 0
	ctlStop     = 4
	ctlStart    = 8
	ctlDeadline = 16
	ctlGate     = 24
	ctlLine     = layout.CacheLine
)

// Offsets in a worker's line.
const (
	lineState    = 0
	lineWaiter   = 4
	lineProgress = 8
	lineDup      = 16
	lineCorrupt  = 24
	lineLast     = 32
	lineDone     = 40
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
	n       int // lines in the file
	need    int // lines [0, need) must be ready before the run starts; the rest are spares for replacements
	goWord  *atomic.Uint32
	stop    *atomic.Uint32
	start   *atomic.Uint64
	dead    *atomic.Uint64
	gate    *atomic.Uint32
}

// newControl creates the control file for n workers; spares more lines
// wait for workers started later (replacements of killed ones).
func newControl(n, spares int) (*control, error) {
	name, err := shmName("ctl")
	if err != nil {
		return nil, err
	}
	r, err := shm.Create(name, shm.Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: uint64(ctlLine * (1 + n + spares))}})
	if err != nil {
		return nil, err
	}
	c, err := viewControl(r, n+spares)
	if err != nil {
		return nil, err
	}
	c.need = n
	return c, nil
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
	c := &control{reg: r, path: r.Path(), n: n, need: n}
	var err error
	if c.goWord, err = r.Uint32(layout.HeaderSize + ctlGo); err == nil {
		if c.stop, err = r.Uint32(layout.HeaderSize + ctlStop); err == nil {
			if c.start, err = r.Uint64(layout.HeaderSize + ctlStart); err == nil {
				if c.dead, err = r.Uint64(layout.HeaderSize + ctlDeadline); err == nil {
					c.gate, err = r.Uint32(layout.HeaderSize + ctlGate)
				}
			}
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
	l := c.line(i)
	return l.state, l.progress
}

// ctlLineWords are the words of one worker's line.
type ctlLineWords struct {
	state, waiter, done          *atomic.Uint32
	progress, dup, corrupt, last *atomic.Uint64
}

// line returns worker i's words; i must be below n (viewControl checked
// that the file holds n lines).
func (c *control) line(i int) ctlLineWords {
	off := uint64(layout.HeaderSize + ctlLine*(1+i))
	u32 := func(o uint64) *atomic.Uint32 { w, _ := c.reg.Uint32(off + o); return w }
	u64 := func(o uint64) *atomic.Uint64 { w, _ := c.reg.Uint64(off + o); return w }
	return ctlLineWords{
		state: u32(lineState), waiter: u32(lineWaiter), done: u32(lineDone),
		progress: u64(lineProgress), dup: u64(lineDup), corrupt: u64(lineCorrupt), last: u64(lineLast),
	}
}

// isReady reports whether worker i has marked itself ready.
func (c *control) isReady(i int) bool { return c.line(i).state.Load() == workerReady }

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

// allReady reports whether every worker started with the run has marked
// itself ready.
func (c *control) allReady() bool {
	for i := range c.need {
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

// setGate lets gated producers send sequence numbers below g (0: all),
// and wakes those waiting.
func (c *control) setGate(g uint32) {
	c.gate.Store(g)
	shm.FutexWake(c.gate, -1)
}

// stopServing tells pass workers to stop.
func (c *control) stopServing() {
	c.stop.Store(1)
	shm.FutexWake(c.stop, -1)
}

// awaitStop waits until the parent says stop.
func (c *control) awaitStop(ctx context.Context) error {
	for c.stop.Load() == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := shm.FutexWait(c.stop, 0, pollInterval); err != nil && !errors.Is(err, shm.ErrTimeout) {
			return err
		}
	}
	return nil
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
