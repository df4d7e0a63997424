package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
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
	tr      *transportInfo
	ctl     *control
	lanes   []lane
	workers []*worker

	failOnce sync.Once
	failed   chan struct{} // closed when a worker fails
	failErr  error
}

// worker is one producer, consumer or echo.
type worker struct {
	job  job
	proc *child        // nil for a goroutine
	done chan struct{} // closed when it has finished
	rep  *report
	err  error
}

// errTimedOut is the cause when a measurement runs past its --timeout.
var errTimedOut = errors.New("timed out")

// newFleet prepares a measurement of tr with n workers; it ends by itself
// after timeout. Call stop when done, on every path.
func newFleet(ctx context.Context, tr *transportInfo, n int, timeout time.Duration) (*fleet, error) {
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w after %v", errTimedOut, timeout))
	ctx, cancel := context.WithCancelCause(ctx)
	f := &fleet{ctx: ctx, timeout: timeout, tr: tr, failed: make(chan struct{})}
	f.cancel = func(err error) {
		cancel(err)
		cancelTimeout()
	}
	ctl, err := newControl(n)
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

// spawn starts the worker j, which sends on tx and receives on rx (either
// may be nil).
func (f *fleet) spawn(j job, tx, rx lane) error {
	j.Workers, j.Control = f.ctl.n, f.ctl.path
	w := &worker{job: j, done: make(chan struct{})}
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
	c, err := startChild(f.ctx, roleWorker, w.job, files, f.timeout)
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
	f.workers = append(f.workers, w)
	go func() {
		w.rep, w.err = runWorker(f.ctx, &w.job, f.ctl, ends[0], ends[1])
		f.finished(w)
	}()
	return nil
}

// finished records a worker's end. A failure fails the whole fleet: it
// cancels the fleet's context, which kills the other worker processes and
// ends the parent's own blocking calls.
func (f *fleet) finished(w *worker) {
	if w.err != nil {
		w.err = fmt.Errorf("%s %d: %w", w.job.Role, w.job.ID, w.err)
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

// awaitReady waits until every worker has opened its ends, then detaches
// the lanes and the control file: from now on nothing is left in /dev/shm
// whatever happens.
func (f *fleet) awaitReady() error {
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for !f.ctl.allReady() {
		select {
		case <-f.failed:
			return f.why()
		case <-f.ctx.Done():
			return f.why()
		case <-t.C:
		}
	}
	for _, l := range f.lanes {
		if err := l.detach(); err != nil {
			return err
		}
	}
	return f.ctl.detach()
}

// wait waits for every worker in role and returns their reports.
func (f *fleet) wait(role string) ([]*report, error) {
	var reps []*report
	for _, w := range f.workers {
		if w.job.Role != role {
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
			return nil, w.err
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
	for _, w := range f.workers {
		if w.proc != nil {
			w.proc.kill()
		}
	}
	for _, w := range f.workers {
		if w.job.Role == roleProducer {
			<-w.done
		}
	}
	var err error
	for _, l := range f.lanes {
		err = errors.Join(err, l.close())
	}
	for _, w := range f.workers {
		<-w.done
	}
	return errors.Join(err, f.ctl.close())
}

// kill kills the worker process with this role and id (for --chaos, and
// tests); it reports whether there was one to kill.
func (f *fleet) kill(role string, id int) bool {
	for _, w := range f.workers {
		if w.job.Role == role && w.job.ID == id && w.proc != nil {
			w.proc.kill()
			return true
		}
	}
	return false
}
