package sched

import (
	"context"

	"github.com/shmkit/shmkit/transport"
)

// Submitter puts passes on the submit ring.
type Submitter struct{ q transport.Queue }

// Submitter returns a handle that submits passes.
func (s *PassScheduler) Submitter() *Submitter { return &Submitter{q: s.submit} }

// NewSubmitter submits to any queue (for processes without a scheduler).
func NewSubmitter(q transport.Queue) *Submitter { return &Submitter{q: q} }

// TrySubmit submits a pass without waiting and returns its token, which
// the result will carry. Tokens come from the submit ring's shared counter:
// unique across every submitting process. Arguments that do not fit give
// ErrArgsTooLarge; a full ring gives transport.ErrFull.
func (s *Submitter) TrySubmit(closure uint32, args []byte) (uint64, error) {
	var buf [256]byte
	msg, token, err := s.encode(buf[:], closure, args)
	if err != nil {
		return 0, err
	}
	return token, s.q.TryPush(msg)
}

// Submit is TrySubmit that waits for room.
func (s *Submitter) Submit(ctx context.Context, closure uint32, args []byte) (uint64, error) {
	var buf [256]byte
	msg, token, err := s.encode(buf[:], closure, args)
	if err != nil {
		return 0, err
	}
	return token, s.q.Push(ctx, msg)
}

func (s *Submitter) encode(small []byte, closure uint32, args []byte) ([]byte, uint64, error) {
	buf := small
	if p := s.q.MaxPayload(); p > len(buf) {
		buf = make([]byte, p)
	} else {
		buf = buf[:p]
	}
	// Check the size before taking a token: a refused pass wastes none.
	if len(args) > MaxArgs(len(buf)) {
		_, err := encodeSubmit(buf, closure, 0, args)
		return nil, 0, err
	}
	token := s.q.NextID()
	n, err := encodeSubmit(buf, closure, token, args)
	return buf[:n], token, err
}

// Collector reads results from the result ring. Every collector on a
// result ring competes for the same results: give each group of
// submitters its own result ring, or collect in one place and route by
// token (see PassAwaiter).
type Collector struct {
	q   transport.Queue
	buf []byte
}

// Collector returns a handle that reads results.
func (s *PassScheduler) Collector() *Collector { return NewCollector(s.result) }

// NewCollector reads results from any queue.
func NewCollector(q transport.Queue) *Collector {
	return &Collector{q: q, buf: make([]byte, q.MaxPayload())}
}

// TryRecv returns the next result, or transport.ErrEmpty. A Collector is
// not safe for concurrent use (each goroutine makes its own).
func (c *Collector) TryRecv() (PassResult, error) {
	n, err := c.q.TryPop(c.buf)
	if err != nil {
		return PassResult{}, err
	}
	return decodeResult(c.buf[:n])
}

// Recv waits for the next result.
func (c *Collector) Recv(ctx context.Context) (PassResult, error) {
	n, err := c.q.Pop(ctx, c.buf)
	if err != nil {
		return PassResult{}, err
	}
	return decodeResult(c.buf[:n])
}
