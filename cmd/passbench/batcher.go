package main

// batcher is what the batching ends (batch_end.go) need of the end they
// wrap: the transport's batch calls, each one try when the end polls and
// the blocking call when it blocks, and the end's polling back-off. The
// ring end and the deque end implement it, so one sender and one receiver
// serve both.
type batcher interface {
	endpoint
	// maxPayload is the longest message a batch call takes.
	maxPayload() int
	// pushBatch publishes msgs in order as far as they fit and returns
	// how many: TryPushBatch (ErrFull when none fit) or PushBatch(ctx).
	pushBatch(msgs [][]byte) (int, error)
	// takeBatch takes up to len(bufs) messages the way the end's recv
	// takes one: TryPopBatch (ErrEmpty when none waits) or PopBatch(ctx).
	takeBatch(bufs [][]byte, lens []int) (int, error)
	// idle is the polling back-off after the fails-th empty try in a row.
	idle(fails int) error
}

func (e *ringEnd) maxPayload() int { return e.r.MaxPayload() }

func (e *ringEnd) pushBatch(msgs [][]byte) (int, error) {
	if e.poll {
		return e.r.TryPushBatch(msgs)
	}
	return e.r.PushBatch(e.ctx, msgs)
}

func (e *ringEnd) takeBatch(bufs [][]byte, lens []int) (int, error) {
	if e.poll {
		return e.r.TryPopBatch(bufs, lens)
	}
	return e.r.PopBatch(e.ctx, bufs, lens)
}

// The deque's batches: the producer pushes as the owner (it adopted the
// deque when it opened its end); consumers are thieves and steal the
// oldest first, as dequeEnd.recv does one at a time. (The parent's own
// end, which adopts the deque at its first send, is never wrapped.)

func (e *dequeEnd) maxPayload() int { return e.d.MaxPayload() }

func (e *dequeEnd) pushBatch(msgs [][]byte) (int, error) {
	if e.poll {
		return e.d.TryPushBatch(msgs)
	}
	return e.d.PushBatch(e.ctx, msgs)
}

func (e *dequeEnd) takeBatch(bufs [][]byte, lens []int) (int, error) {
	if e.poll {
		return e.d.TryStealBatch(bufs, lens)
	}
	return e.d.StealBatch(e.ctx, bufs, lens)
}

func (e *dequeEnd) idle(fails int) error { return pollIdle(e.ctx, fails) }

// The ends implement batcher.
var (
	_ batcher = (*ringEnd)(nil)
	_ batcher = (*dequeEnd)(nil)
)
