package main

import (
	"errors"

	"github.com/shmkit/shmkit/transport"
)

// run --batch N and --loan: the ring's batch calls and zero-copy send in
// the ordinary harness. The producer and consumer loops (loops.go) send
// and receive one message at a time; these ends sit between them and the
// ring. A batching sender gathers N messages (each stamped when the loop
// sends it, so the wait for the batch to fill counts in its latency) and
// pushes them with one batch call, and pushes what it holds when it is
// closed, before the producer exits; a batching receiver takes up to N
// with one batch call and hands them out one by one. A loaning sender
// copies each message into a loan and publishes it. Both wait as the
// end they wrap does: polling with its back-off, or with the blocking
// batch and loan calls.

// wrapEnds puts a worker's ends behind the batch or loan ends its lane
// asks for; the parent's own end (the end markers) stays as it is.
func wrapEnds(c laneConfig, tx, rx endpoint) (endpoint, endpoint) {
	if c.Batch > 1 {
		if e, ok := tx.(*ringEnd); ok {
			tx = newRingBatchSender(e, c.Batch)
		}
		if e, ok := rx.(*ringEnd); ok {
			rx = newRingBatchReceiver(e, c.Batch)
		}
	}
	if e, ok := tx.(*ringEnd); ok && c.Loan {
		tx = &ringLoanSender{ringEnd: e}
	}
	return tx, rx
}

// batchBufs is n buffers of size bytes each, on one allocation.
func batchBufs(n, size int) [][]byte {
	backing := make([]byte, n*size)
	b := make([][]byte, n)
	for i := range b {
		b[i] = backing[i*size : (i+1)*size : (i+1)*size]
	}
	return b
}

// ringBatchSender gathers messages and pushes them in batches.
type ringBatchSender struct {
	*ringEnd
	bufs [][]byte
	msgs [][]byte // bufs[i][:len of message i], for the batch call
	n    int
}

func newRingBatchSender(e *ringEnd, batch int) *ringBatchSender {
	return &ringBatchSender{ringEnd: e, bufs: batchBufs(batch, int(e.r.MaxPayload())), msgs: make([][]byte, batch)}
}

func (s *ringBatchSender) send(msg []byte) error {
	if len(msg) > len(s.bufs[s.n]) {
		return s.r.TryPush(msg) // refused with the ring's own ErrTooLarge
	}
	s.msgs[s.n] = s.bufs[s.n][:copy(s.bufs[s.n], msg)]
	s.n++
	if s.n == len(s.bufs) {
		return s.flush()
	}
	return nil
}

// flush pushes every message gathered, in order.
func (s *ringBatchSender) flush() error {
	msgs := s.msgs[:s.n]
	s.n = 0
	for fails := 1; len(msgs) > 0; fails++ {
		var k int
		var err error
		if s.poll {
			k, err = s.r.TryPushBatch(msgs)
		} else {
			k, err = s.r.PushBatch(s.ctx, msgs)
		}
		msgs = msgs[k:]
		switch {
		case err == nil || (s.poll && errors.Is(err, transport.ErrFull)):
		default:
			return err
		}
		if k == 0 && s.poll {
			if err := pollIdle(s.ctx, fails); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *ringBatchSender) close() error { return errors.Join(s.flush(), s.ringEnd.close()) }

// ringBatchReceiver takes messages in batches and hands them out one by one.
type ringBatchReceiver struct {
	*ringEnd
	bufs       [][]byte
	lens       []int
	have, next int
}

func newRingBatchReceiver(e *ringEnd, batch int) *ringBatchReceiver {
	return &ringBatchReceiver{ringEnd: e, bufs: batchBufs(batch, int(e.r.MaxPayload())), lens: make([]int, batch)}
}

func (r *ringBatchReceiver) recv(buf []byte) (int, error) {
	for fails := 1; r.next == r.have; fails++ {
		var k int
		var err error
		if r.poll {
			k, err = r.r.TryPopBatch(r.bufs, r.lens)
		} else {
			k, err = r.r.PopBatch(r.ctx, r.bufs, r.lens)
		}
		r.have, r.next = k, 0
		if k > 0 {
			break
		}
		if err != nil && !(r.poll && errors.Is(err, transport.ErrEmpty)) {
			return 0, err
		}
		if r.poll {
			if err := pollIdle(r.ctx, fails); err != nil {
				return 0, err
			}
		}
	}
	i := r.next
	r.next++
	return copy(buf, r.bufs[i][:r.lens[i]]), nil
}

// ringLoanSender writes each message into a loan and publishes it.
type ringLoanSender struct{ *ringEnd }

func (s *ringLoanSender) send(msg []byte) error {
	for fails := 1; ; fails++ {
		var l transport.Loan
		var err error
		if s.poll {
			l, err = s.r.TryLoan(len(msg))
		} else {
			l, err = s.r.Loan(s.ctx, len(msg))
		}
		if err == nil {
			copy(l.Data(), msg)
			return s.r.Publish(l)
		}
		if !s.poll || !errors.Is(err, transport.ErrFull) {
			return err
		}
		if err := pollIdle(s.ctx, fails); err != nil {
			return err
		}
	}
}
