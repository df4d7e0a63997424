package main

import (
	"errors"

	"github.com/shmkit/shmkit/transport"
)

// run --batch N and --loan: the ring's and the deque's batch calls, and
// the ring's zero-copy send, in the ordinary harness. The producer and
// consumer loops (loops.go) send and receive one message at a time; these
// ends sit between them and the transport. A batching sender gathers N
// messages (each stamped when the loop sends it, so the wait for the
// batch to fill counts in its latency) and pushes them with one batch
// call, and pushes what it holds when it is closed, before the producer
// exits; a batching receiver takes up to N with one batch call and hands
// them out one by one. A loaning sender copies each message into a loan
// and publishes it. Both wait as the end they wrap does: polling with its
// back-off, or with the blocking batch and loan calls. The batching ends
// reach the transport through batcher (batcher.go): the ring's push and
// pop batches, the deque owner's push batches and a thief's steal
// batches. A batching receiver may take several end markers in one call:
// the parent sends them one at a time (end_markers.go).

// wrapEnds puts a worker's ends behind the batch or loan ends its lane
// asks for; the parent's own end (the end markers) stays as it is.
func wrapEnds(c laneConfig, tx, rx endpoint) (endpoint, endpoint) {
	if c.Batch > 1 {
		if b, ok := tx.(batcher); ok {
			tx = newBatchSender(b, c.Batch)
		}
		if b, ok := rx.(batcher); ok {
			rx = newBatchReceiver(b, c.Batch)
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

// batchSender gathers messages and pushes them in batches.
type batchSender struct {
	batcher
	bufs [][]byte
	msgs [][]byte // bufs[i][:len of message i], for the batch call
	n    int
}

func newBatchSender(b batcher, batch int) *batchSender {
	return &batchSender{batcher: b, bufs: batchBufs(batch, b.maxPayload()), msgs: make([][]byte, batch)}
}

func (s *batchSender) send(msg []byte) error {
	if len(msg) > len(s.bufs[s.n]) {
		return s.batcher.send(msg) // refused with the transport's own ErrTooLarge
	}
	s.msgs[s.n] = s.bufs[s.n][:copy(s.bufs[s.n], msg)]
	s.n++
	if s.n == len(s.bufs) {
		return s.flush()
	}
	return nil
}

// flush pushes every message gathered, in order. A blocking push batch
// waits until at least one fits, so only a polling one comes back with
// ErrFull and nothing pushed, and backs off.
func (s *batchSender) flush() error {
	msgs := s.msgs[:s.n]
	s.n = 0
	for fails := 1; len(msgs) > 0; fails++ {
		k, err := s.pushBatch(msgs)
		msgs = msgs[k:]
		if err != nil && !errors.Is(err, transport.ErrFull) {
			return err
		}
		if k == 0 {
			if err := s.idle(fails); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *batchSender) close() error { return errors.Join(s.flush(), s.batcher.close()) }

// batchReceiver takes messages in batches and hands them out one by one.
type batchReceiver struct {
	batcher
	bufs       [][]byte
	lens       []int
	have, next int
}

func newBatchReceiver(b batcher, batch int) *batchReceiver {
	return &batchReceiver{batcher: b, bufs: batchBufs(batch, b.maxPayload()), lens: make([]int, batch)}
}

// recv hands out the next message of the batch it holds, or takes the
// next batch; as for the sender, only a polling take comes back empty.
func (r *batchReceiver) recv(buf []byte) (int, error) {
	for fails := 1; r.next == r.have; fails++ {
		k, err := r.takeBatch(r.bufs, r.lens)
		r.have, r.next = k, 0
		if k > 0 {
			break
		}
		if err != nil && !errors.Is(err, transport.ErrEmpty) {
			return 0, err
		}
		if err := r.idle(fails); err != nil {
			return 0, err
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
