package pass

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/shmkit/shmkit/sched/task"
	"github.com/shmkit/shmkit/transport"
)

// Tasks makes every submitted pass a task: an external task completed
// when the result with its token arrives (a pass error becomes the task's
// error). Awaiting work that runs in other processes is then ordinary task
// code: All, Race, Any and AllSettled over task ids.
//
// Tasks collects from the scheduler's result ring; run one per result
// ring (results it does not know are counted as foreign and dropped).
type Tasks struct {
	Tasks *task.Scheduler[[]byte]

	sub     *Submitter
	col     *Collector
	mu      sync.Mutex
	waiting map[uint64]*task.Completer[[]byte]
	foreign atomic.Uint64
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewTasks starts collecting results for passes submitted through it.
func NewTasks(s *Scheduler) *Tasks {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Tasks{Tasks: &task.Scheduler[[]byte]{}, sub: s.Submitter(), col: s.Collector(),
		waiting: map[uint64]*task.Completer[[]byte]{}, cancel: cancel, done: make(chan struct{})}
	go p.collect(ctx)
	return p
}

// Submit submits a pass and returns the id of the task that its result
// completes. The task is registered before the pass is pushed, so even a
// result that arrives at once finds it.
func (p *Tasks) Submit(ctx context.Context, closure uint32, args []byte) (task.ID, error) {
	var c *task.Completer[[]byte]
	tok, err := p.sub.submit(ctx, closure, args, func(token uint64) error {
		var err error
		if c, err = p.Tasks.RegisterExternal(task.ID(token)); err != nil {
			return err
		}
		p.mu.Lock()
		p.waiting[token] = c
		p.mu.Unlock()
		return nil
	})
	if err != nil && c != nil {
		p.mu.Lock()
		delete(p.waiting, tok)
		p.mu.Unlock()
		c.Fail(err)
	}
	return task.ID(tok), err
}

// Foreign counts results whose token no task of this Tasks waited for.
func (p *Tasks) Foreign() uint64 { return p.foreign.Load() }

func (p *Tasks) collect(ctx context.Context) {
	defer close(p.done)
	for {
		r, err := p.col.Recv(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, transport.ErrNotAttached) {
				return
			}
			continue // a malformed result: nothing to complete
		}
		p.mu.Lock()
		c, ok := p.waiting[r.Token]
		delete(p.waiting, r.Token)
		p.mu.Unlock()
		if !ok {
			p.foreign.Add(1)
			continue
		}
		if err := r.Err(); err != nil {
			c.Fail(err)
		} else {
			c.Complete(append([]byte(nil), r.Data...))
		}
	}
}

// Close stops collecting; tasks still waiting are cancelled (their
// completers released). Call it before stopping the scheduler.
func (p *Tasks) Close() {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	for tok, c := range p.waiting {
		c.Release()
		delete(p.waiting, tok)
	}
}
