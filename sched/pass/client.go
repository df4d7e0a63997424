package pass

import (
	"context"
	"sync"

	"github.com/shmkit/shmkit/transport"
)

// Submitter puts passes on the submit ring. It is safe for concurrent use.
type Submitter struct {
	q    transport.Queue
	bufs sync.Pool // *[]byte of the ring's payload size: no allocation per pass
}

// Submitter returns a handle that submits passes.
func (s *Scheduler) Submitter() *Submitter { return NewSubmitter(s.submit) }

// NewSubmitter submits to any queue (for processes without a scheduler).
func NewSubmitter(q transport.Queue) *Submitter {
	sub := &Submitter{q: q}
	sub.bufs.New = func() any { b := make([]byte, q.MaxPayload()); return &b }
	return sub
}

// TrySubmit submits a pass without waiting and returns its token, which
// the result will carry. Tokens come from the submit ring's shared counter:
// unique across every submitting process. Arguments that do not fit give
// ErrArgsTooLarge (and use no token); a full ring gives transport.ErrFull.
func (s *Submitter) TrySubmit(closure uint32, args []byte) (uint64, error) {
	return s.submit(nil, closure, args, nil)
}

// Submit is TrySubmit that waits for room.
func (s *Submitter) Submit(ctx context.Context, closure uint32, args []byte) (uint64, error) {
	return s.submit(ctx, closure, args, nil)
}

// submit encodes and pushes a pass; ctx nil means do not wait. beforePush,
// if set, learns the token before the pass can possibly be executed.
func (s *Submitter) submit(ctx context.Context, closure uint32, args []byte, beforePush func(uint64) error) (uint64, error) {
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	buf := *bp
	if len(args) > MaxArgs(len(buf)) {
		_, err := encodeSubmit(buf, closure, 0, args)
		return 0, err
	}
	token := s.q.NextID()
	n, err := encodeSubmit(buf, closure, token, args)
	if err != nil {
		return 0, err
	}
	if beforePush != nil {
		if err := beforePush(token); err != nil {
			return 0, err
		}
	}
	if ctx == nil {
		return token, s.q.TryPush(buf[:n])
	}
	return token, s.q.Push(ctx, buf[:n])
}

// Collector reads results from the result ring. Every collector on a
// result ring competes for the same results: give each group of
// submitters its own result ring, or collect in one place and route by
// token (see Tasks).
type Collector struct {
	q   transport.Queue
	buf []byte
}

// Collector returns a handle that reads results.
func (s *Scheduler) Collector() *Collector { return NewCollector(s.result) }

// NewCollector reads results from any queue.
func NewCollector(q transport.Queue) *Collector {
	return &Collector{q: q, buf: make([]byte, q.MaxPayload())}
}

// TryRecv returns the next result, or transport.ErrEmpty. The result's
// Data is valid until the next receive on this collector. A Collector is
// not safe for concurrent use (each goroutine makes its own).
func (c *Collector) TryRecv() (Result, error) {
	n, err := c.q.TryPop(c.buf)
	if err != nil {
		return Result{}, err
	}
	return decodeResult(c.buf[:n])
}

// Recv waits for the next result.
func (c *Collector) Recv(ctx context.Context) (Result, error) {
	n, err := c.q.Pop(ctx, c.buf)
	if err != nil {
		return Result{}, err
	}
	return decodeResult(c.buf[:n])
}
