package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// readyPoll is how often the parent looks whether every worker is ready.
const readyPoll = time.Millisecond

// fleet is the set of workers of one measurement, with the lanes and the
// control file they share. Workers are child processes, or goroutines of
// this process for an in-process transport; the parent treats both alike.
type fleet struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timeout time.Duration
	tr      *transportInfo // nil for pass, whose workers are not lane workers
	ctl     *control
	lanes   []lane
	files   []shmFile // other files of the measurement (heartbeat table, bitmap...)

	// keepLinked leaves the files in /dev/shm after awaitReady, for
	// workers started later (replacements under --chaos): detachAll
	// unlinks them once no more will start.
	keepLinked bool
	detached   bool

	mu       sync.Mutex // guards workers and stopping: --chaos spawns while the parent waits
	workers  []*worker
	stopping bool
	hooks    []func() // run by stop before anything is closed

	failOnce sync.Once
	failed   chan struct{} // closed when a worker fails
	failErr  error
}

// worker is one producer, consumer or echo, or a pass worker or submitter.
type worker struct {
	role  string
	id    int
	index int           // line in the control file
	job   job           // lane workers only
	proc  *child        // nil for a goroutine
	done  chan struct{} // closed when it has finished
	rep   *report
	err   error

	killed atomic.Bool // killed on purpose (--chaos): its end is no failure
}

// shmFile is a file of a measurement other than its lanes and control.
type shmFile interface {
	detach() error // unlink
	close() error  // unlink if still linked, and unmap
}

// errTimedOut is the cause when a measurement runs past its --timeout.
var errTimedOut = errors.New("timed out")

// newFleet prepares a measurement of tr with n workers; it ends by itself
// after timeout. Call stop when done, on every path.
func newFleet(ctx context.Context, tr *transportInfo, n int, timeout time.Duration) (*fleet, error) {
	return newFleetSpares(ctx, tr, n, 0, timeout)
}

// newFleetSpares is newFleet with room in the control file for spares
// workers started after the run began.
func newFleetSpares(ctx context.Context, tr *transportInfo, n, spares int, timeout time.Duration) (*fleet, error) {
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w after %v", errTimedOut, timeout))
	ctx, cancel := context.WithCancelCause(ctx)
	f := &fleet{ctx: ctx, timeout: timeout, tr: tr, failed: make(chan struct{})}
	f.cancel = func(err error) {
		cancel(err)
		cancelTimeout()
	}
	ctl, err := newControl(n, spares)
	if err != nil {
		f.cancel(nil)
		return nil, err
	}
	f.ctl = ctl
	return f, nil
}

// newLane creates a lane that stop will close.
func (f *fleet) newLane(c laneConfig) (lane, error) {
	l, err := f.tr.newLane(c)
	if err != nil {
		return nil, err
	}
	f.lanes = append(f.lanes, l)
	return l, nil
}

// onStop registers fn to run when stop begins: after the context is
// cancelled and before any worker is killed or any file closed. It is for
// the parent's own goroutines (chaos, watchdog) that use the files.
func (f *fleet) onStop(fn func()) { f.hooks = append(f.hooks, fn) }

// addFile registers a file that stop removes and unmaps.
func (f *fleet) addFile(sf shmFile) { f.files = append(f.files, sf) }

// spawn starts the worker j, which sends on tx and receives on rx (either
// may be nil).
func (f *fleet) spawn(j job, tx, rx lane) error {
	j.Workers, j.Control = f.ctl.n, f.ctl.path
	w := &worker{role: j.Role, id: j.ID, index: j.Index, job: j, done: make(chan struct{})}
	if f.tr.InProcess {
		return f.spawnLocal(w, tx, rx)
	}
	var files []*os.File
	for _, e := range []struct {
		l     lane
		write bool
		spec  *endSpec
	}{{tx, true, &w.job.Tx}, {rx, false, &w.job.Rx}} {
		if e.l == nil {
			continue
		}
		spec, file, err := e.l.share(e.write)
		if err != nil {
			return err
		}
		if file != nil {
			spec.FD = 3 + len(files)
			files = append(files, file)
		}
		*e.spec = spec
	}
	return f.start(w, roleWorker, w.job, files)
}

// spawnChild starts a worker process of another kind (a pass worker or
// submitter): childRole says what it runs, payload is its job.
func (f *fleet) spawnChild(role string, id, index int, childRole string, payload any) error {
	w := &worker{role: role, id: id, index: index, done: make(chan struct{})}
	return f.start(w, childRole, payload, nil)
}

// start starts w's process and adds w to the fleet.
func (f *fleet) start(w *worker, childRole string, payload any, files []*os.File) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopping {
		return fmt.Errorf("starting %s %d: %w", w.role, w.id, context.Cause(f.ctx))
	}
	c, err := startChild(f.ctx, childRole, payload, files, f.timeout)
	if err != nil {
		return err
	}
	w.proc = c
	f.workers = append(f.workers, w)
	go func() {
		<-c.done
		w.rep, w.err = w.collect()
		f.finished(w)
	}()
	return nil
}

// list returns the workers started so far.
func (f *fleet) list() []*worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.workers)
}

// collect reads a worker process's report once it has exited.
func (w *worker) collect() (*report, error) {
	if err := w.proc.exitErr(); err != nil {
		return nil, err
	}
	var rep report
	if err := json.Unmarshal(w.proc.stdout.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("bad report: %w", err)
	}
	if err := rep.fromWire(); err != nil {
		return nil, fmt.Errorf("bad report: %w", err)
	}
	return &rep, nil
}

func (f *fleet) spawnLocal(w *worker, tx, rx lane) error {
	var ends [2]endpoint
	for i, l := range []lane{tx, rx} {
		if l != nil {
			e, err := l.open(f.ctx, i == 0)
			if err != nil {
				return err
			}
			ends[i] = e
		}
	}
	f.mu.Lock()
	f.workers = append(f.workers, w)
	f.mu.Unlock()
	go func() {
		w.rep, w.err = runWorker(f.ctx, &w.job, f.ctl, ends[0], ends[1], nil)
		f.finished(w)
	}()
	return nil
}

// finished records a worker's end. A failure fails the whole fleet: it
// cancels the fleet's context, which kills the other worker processes and
// ends the parent's own blocking calls.
func (f *fleet) finished(w *worker) {
	if w.killed.Load() {
		w.rep, w.err = nil, nil
	}
	if w.err != nil {
		w.err = fmt.Errorf("%s %d: %w", w.role, w.id, w.err)
	}
	// A worker that ends after the fleet's context was killed by it: the
	// context's cause is the reason, not this worker's end.
	if w.err != nil && f.ctx.Err() == nil {
		f.failOnce.Do(func() {
			f.failErr = w.err
			close(f.failed)
			f.cancel(w.err)
		})
	}
	close(w.done)
}

// why explains why the fleet gave up: a failed worker, the timeout, or
// the caller's cancellation.
func (f *fleet) why() error {
	select {
	case <-f.failed:
		return f.failErr
	default:
	}
	return context.Cause(f.ctx)
}

// settleErr turns a context error that a blocking call returned at the
// fleet's deadline (the ring's waits return one a moment before the
// context says so) into the fleet's reason; other errors pass unchanged.
func (f *fleet) settleErr(err error) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	select {
	case <-f.ctx.Done():
		return f.why()
	case <-time.After(time.Second):
		return err
	}
}

// awaitReady waits until every worker has opened its ends, then detaches
// the lanes and the control file: from now on nothing is left in /dev/shm
// whatever happens. With keepLinked, they stay until detachAll.
func (f *fleet) awaitReady() error {
	if err := f.awaitLines(f.ctl.allReady); err != nil {
		return err
	}
	if f.keepLinked {
		return nil
	}
	return f.detachAll()
}

// awaitLines waits until ready reports true, or the fleet fails.
func (f *fleet) awaitLines(ready func() bool) error {
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for !ready() {
		select {
		case <-f.failed:
			return f.why()
		case <-f.ctx.Done():
			return f.why()
		case <-t.C:
		}
	}
	return nil
}

// detachAll unlinks every file of the measurement; no worker can open
// them afterwards.
func (f *fleet) detachAll() error {
	if f.detached {
		return nil
	}
	f.detached = true
	var err error
	for _, l := range f.lanes {
		err = errors.Join(err, l.detach())
	}
	for _, sf := range f.files {
		err = errors.Join(err, sf.detach())
	}
	return errors.Join(err, f.ctl.detach())
}

// wait waits for every worker in role, except those killed on purpose,
// and returns their reports.
func (f *fleet) wait(role string) ([]*report, error) {
	var reps []*report
	for _, w := range f.list() {
		if w.role != role {
			continue
		}
		select {
		case <-w.done:
		case <-f.failed:
			return nil, f.why()
		case <-f.ctx.Done():
			return nil, f.why()
		}
		if w.err != nil {
			if f.ctx.Err() != nil {
				return nil, f.why()
			}
			return nil, w.err
		}
		if w.killed.Load() {
			continue
		}
		reps = append(reps, w.rep)
	}
	return reps, nil
}

// stop ends the measurement on every path: it cancels whatever still runs,
// kills and reaps worker processes, lets goroutine producers return before
// closing the lanes (which releases goroutine consumers), and removes the
// files. It returns the first error of the clean-up.
func (f *fleet) stop() error {
	f.cancel(errors.New("measurement over"))
	f.mu.Lock()
	f.stopping = true
	workers := f.workers
	f.mu.Unlock()
	for _, fn := range slices.Backward(f.hooks) {
		fn()
	}
	for _, w := range workers {
		if w.proc != nil {
			w.proc.kill()
		}
	}
	for _, w := range workers {
		if w.role == roleProducer {
			<-w.done
		}
	}
	var err error
	for _, l := range f.lanes {
		err = errors.Join(err, l.close())
	}
	for _, sf := range f.files {
		err = errors.Join(err, sf.close())
	}
	for _, w := range workers {
		<-w.done
	}
	return errors.Join(err, f.ctl.close())
}

// kill kills the worker process with this role and id as if it had died
// (tests); it reports whether there was one to kill.
func (f *fleet) kill(role string, id int) bool {
	for _, w := range f.list() {
		if w.role == role && w.id == id && w.proc != nil {
			w.proc.kill()
			return true
		}
	}
	return false
}

// killOnPurpose SIGKILLs w and reaps it (--chaos): its death does not
// fail the fleet, and wait leaves it out.
func (f *fleet) killOnPurpose(w *worker) {
	w.killed.Store(true)
	w.proc.kill()
}
