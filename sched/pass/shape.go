package pass

import (
	"errors"
	"fmt"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// ErrUnsupportedFamily marks a transport family the Pass scheduler cannot
// ride: its wire format is push/pop, so the hash map (key/value) is not a
// transport for it.
var ErrUnsupportedFamily = errors.New("pass: transport family cannot carry passes")

// StartByWorkloadShape is Start with each side's transport family chosen by
// transport.Pick from a workload shape (for example a streaming submit
// side feeding a work-stealing result side). It returns the families
// picked, so a caller can confirm the routing. A shape that picks a family
// that is not a queue (key-value: the hash map), on either side, fails
// with ErrUnsupportedFamily before any file is created. cfg.SubmitPath and
// cfg.ResultPath name the files; cfg.Ring gives their geometry.
//
// A deque side has one owner: the process that creates the file, or the
// first to open it when it has no live owner; other processes' handles
// steal from it and cannot push (see transport.Deque).
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
			return nil, submitFamily, resultFamily, fmt.Errorf("%w: %s side: %v picks the %v", ErrUnsupportedFamily, side.name, side.s, side.f)
		}
	}
	submit, _, err := transport.OpenQueue(submitFamily, cfg.SubmitPath, cfg.Ring)
	if err != nil {
		return nil, submitFamily, resultFamily, err
	}
	result, _, err := transport.OpenQueue(resultFamily, cfg.ResultPath, cfg.Ring)
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
