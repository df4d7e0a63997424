package fair

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// AsyncOutput is an Output whose completion any goroutine reports with
// Finish. It is the shape of every asynchronous backend: one that encodes
// each transition as bytes, passes them to worker processes, and finishes
// the output when the worker's result arrives.
//
// A backend that writes results into the transition's branch must do so
// before calling Finish: the scheduler reads the branch only after
// Complete has observed the finish.
type AsyncOutput struct {
	backend  string
	retained int
	state    atomic.Uint32 // 0 running, 1 finishing, 2 finished
	result   []byte
	err      error
	done     chan struct{}
}

// NewAsyncOutput returns a running output of the named backend that holds
// retained backend resources until it is released.
func NewAsyncOutput(backend string, retained int) *AsyncOutput {
	return &AsyncOutput{backend: backend, retained: retained, done: make(chan struct{})}
}

// Finish records the transition's outcome: its result bytes, or the error
// it failed with. Only the first call counts; it reports whether this one
// did.
func (o *AsyncOutput) Finish(result []byte, err error) bool {
	if !o.state.CompareAndSwap(0, 1) {
		return false
	}
	o.result, o.err = result, err
	o.state.Store(2)
	close(o.done)
	return true
}

// Complete reports true once the transition finished without error, and
// the error it failed with, if it did.
func (o *AsyncOutput) Complete() (bool, error) {
	if o.state.Load() != 2 {
		return false, nil
	}
	if o.err != nil {
		return false, o.err
	}
	return true, nil
}

// Done is closed when the output is finished.
func (o *AsyncOutput) Done() <-chan struct{} { return o.done }

// Result returns what Finish recorded (nil, nil before).
func (o *AsyncOutput) Result() ([]byte, error) {
	if o.state.Load() != 2 {
		return nil, nil
	}
	return o.result, o.err
}

// Backend names the backend.
func (o *AsyncOutput) Backend() string { return o.backend }

// Preemptible is false: a running transition cannot be interrupted.
func (o *AsyncOutput) Preemptible() bool { return false }

// RetainedResources is the count given to NewAsyncOutput.
func (o *AsyncOutput) RetainedResources() int { return o.retained }

// GoBackend is a Backend that runs each transition on a goroutine,
// at most workers at a time, and finishes its AsyncOutput with what run
// returns. It is the reference asynchronous backend (tests, single-process
// programs); a backend that submits to worker processes has the same
// shape, with run's call replaced by passing bytes and awaiting the result.
type GoBackend[W, B any] struct {
	name string
	run  func(id WorkID, work W, branch *B) ([]byte, error)
	sem  chan struct{}
	wg   sync.WaitGroup
}

// NewGoBackend returns a backend named name that runs at most workers
// transitions at once (workers < 1: one).
func NewGoBackend[W, B any](name string, workers int, run func(id WorkID, work W, branch *B) ([]byte, error)) *GoBackend[W, B] {
	return &GoBackend[W, B]{name: name, run: run, sem: make(chan struct{}, max(workers, 1))}
}

var errNoRun = errors.New("fair: GoBackend has no run function")

// Submit starts the transition and returns its output at once. run may
// use branch until it returns; a panic in run fails the transition.
func (g *GoBackend[W, B]) Submit(id WorkID, work W, branch *B) (*AsyncOutput, error) {
	if g.run == nil {
		return nil, errNoRun
	}
	out := NewAsyncOutput(g.name, 1)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.sem <- struct{}{}
		defer func() { <-g.sem }()
		result, err := g.call(id, work, branch)
		out.Finish(result, err)
	}()
	return out, nil
}

func (g *GoBackend[W, B]) call(id WorkID, work W, branch *B) (result []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fair: work %v panicked: %v", id, r)
		}
	}()
	return g.run(id, work, branch)
}

// Wait waits until every transition submitted so far has finished.
func (g *GoBackend[W, B]) Wait() { g.wg.Wait() }
