package pass

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// ErrUnsupportedFamily marks a transport family the Pass scheduler cannot
// ride: its wire format is push/pop, so the hash map (key/value) is not a
// transport for it. The error is an *UnsupportedFamilyError, which names
// the side and the family refused.
var ErrUnsupportedFamily = errors.New("pass: transport family cannot carry passes")

// UnsupportedFamilyError is StartByWorkloadShape's refusal of a side whose
// shape picks a family that is not a queue. errors.Is(err,
// ErrUnsupportedFamily) and errors.Is(err, heartbeat.ErrInvalidConfig)
// hold for it.
type UnsupportedFamilyError struct {
	Side   string           // "submit" or "result"
	Shape  transport.Shape  // the shape given for that side
	Family transport.Family // the family it picks (transport.FamilyHashMap)
}

func (e *UnsupportedFamilyError) Error() string {
	return fmt.Sprintf("%v: %s side: %v picks the %v, which is not a queue", ErrUnsupportedFamily, e.Side, e.Shape, e.Family)
}

// Unwrap returns ErrUnsupportedFamily and heartbeat.ErrInvalidConfig.
func (e *UnsupportedFamilyError) Unwrap() []error {
	return []error{ErrUnsupportedFamily, heartbeat.ErrInvalidConfig}
}

// ErrResultDequeOwner marks a result deque the scheduler refuses: only a
// deque's owner can push, so the results of passes can be pushed only by
// workers of the process that owns the result deque. A process with
// workers whose result deque another process owns, or a process without
// workers that would own it, is refused at start (the error names the
// file and which of the two it is); it also wraps
// heartbeat.ErrInvalidConfig. Without this, a worker that is not the
// owner gets transport.ErrNotOwner for every result, releases the pass
// and runs it again until the pass is poisoned, and the submitter gets
// neither a result nor an error.
var ErrResultDequeOwner = errors.New("pass: only the result deque's owner can push results")

// ErrSubmitDequeOwner: a submit side that is a deque pushes only from its
// owner, so a process without workers (a submitter) must own it; one that
// finds it owned by another live process (a worker process that created
// it first, or another submitter) is refused at start.
var ErrSubmitDequeOwner = errors.New("pass: only the submit deque's owner can submit")

// owned is a queue with a single owner that alone may push (the deque).
type owned interface{ IsOwner() bool }

// checkResultSide refuses a result queue this process's workers could not
// push to, or one it would own while running no workers.
func checkResultSide(cfg Config, result transport.Queue) error {
	d, ok := result.(owned)
	switch {
	case !ok:
		return nil
	case cfg.Workers > 0 && !d.IsOwner():
		return fmt.Errorf("%w: %w: %s: another process owns it, so the %d workers here could not push results (run the workers in the owning process)",
			heartbeat.ErrInvalidConfig, ErrResultDequeOwner, result.Path(), cfg.Workers)
	case cfg.Workers == 0 && d.IsOwner():
		return fmt.Errorf("%w: %w: %s: this process owns it but runs no workers, so no worker anywhere could push results (start the worker process first)",
			heartbeat.ErrInvalidConfig, ErrResultDequeOwner, result.Path())
	}
	return nil
}

// StartByWorkloadShape is Start with each side's transport family chosen by
// transport.Pick from a workload shape (for example a streaming submit
// side feeding a work-stealing result side). It returns the families
// picked, so a caller can confirm the routing. A shape that picks a family
// that is not a queue (key-value: the hash map), on either side, fails
// with an *UnsupportedFamilyError (ErrUnsupportedFamily) naming the family
// before any file is created. cfg.SubmitPath and cfg.ResultPath name the
// files; cfg.Ring gives their geometry.
//
// A deque side has one owner: the process that creates the file, or the
// first to open it when it has no live owner; other processes' handles
// steal from it and cannot push (see transport.Deque). A deque result side
// therefore needs every worker in its owner's process: a process with
// workers creates or adopts it and is refused (ErrResultDequeOwner) if
// another process owns it; a process without workers (a submitter) only
// opens an existing one as a thief, to collect, and is refused if none
// exists yet. Neither refusal creates the result file; the submit file
// is opened first, as usual, and may stay behind. A deque submit side is
// pushed only by its owner: a process without workers creates or adopts
// it, and is refused (ErrSubmitDequeOwner) when another live process owns
// it; so start the submitter before worker processes (which steal from it
// and may own it only if they came first).
func StartByWorkloadShape(cfg Config, submitShape, resultShape transport.Shape) (*Scheduler, transport.Family, transport.Family, error) {
	cfg.defaults()
	submitFamily, _, err := transport.Pick(submitShape)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: submit side: %v", heartbeat.ErrInvalidConfig, err)
	}
	resultFamily, _, err := transport.Pick(resultShape)
	if err != nil {
		return nil, submitFamily, 0, fmt.Errorf("%w: result side: %v", heartbeat.ErrInvalidConfig, err)
	}
	for _, side := range []struct {
		name string
		f    transport.Family
		s    transport.Shape
	}{{"submit", submitFamily, submitShape}, {"result", resultFamily, resultShape}} {
		if !side.f.IsQueue() {
			return nil, submitFamily, resultFamily, &UnsupportedFamilyError{Side: side.name, Shape: side.s, Family: side.f}
		}
	}
	submit, _, err := transport.OpenQueue(submitFamily, cfg.SubmitPath, cfg.Ring)
	if err != nil {
		return nil, submitFamily, resultFamily, err
	}
	if d, ok := submit.(owned); ok && cfg.Workers == 0 && !d.IsOwner() {
		submit.Close()
		return nil, submitFamily, resultFamily, fmt.Errorf("%w: %w: %s: another live process owns it, so Submit here could never push (one submitting process per submit deque: start the submitter before the worker processes, which then only steal)",
			heartbeat.ErrInvalidConfig, ErrSubmitDequeOwner, cfg.SubmitPath)
	}
	result, err := openResult(cfg, resultFamily)
	if err != nil {
		submit.Close()
		return nil, submitFamily, resultFamily, err
	}
	s, err := StartWithQueues(cfg, submit, result)
	if err != nil {
		submit.Close()
		result.Close()
		return nil, submitFamily, resultFamily, err
	}
	return s, submitFamily, resultFamily, nil
}

// openResult opens the result side. A process without workers never
// creates or adopts a result deque: it would become the only process
// allowed to push results, and it runs no workers.
func openResult(cfg Config, f transport.Family) (transport.Queue, error) {
	if f == transport.FamilyDeque && cfg.Workers == 0 {
		d, err := transport.OpenDeque(cfg.ResultPath)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w: %s does not exist, and a process without workers does not create it, since only its creator's workers could push results (start the worker process first)",
				heartbeat.ErrInvalidConfig, ErrResultDequeOwner, cfg.ResultPath)
		}
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	result, _, err := transport.OpenQueue(f, cfg.ResultPath, cfg.Ring)
	if err != nil {
		return nil, err
	}
	if err := checkResultSide(cfg, result); err != nil {
		result.Close()
		return nil, err
	}
	return result, nil
}
