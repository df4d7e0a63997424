package main

import "fmt"

// sendEndMarkers ends the consumers' streams once the producers have
// exited (everything they sent is in the lane): one end marker per
// consumer, behind all the data, through the parent's own end.
//
// A consumer that takes one message per call takes exactly one marker and
// stops, so then the markers go all at once. A batching consumer (run
// --batch) takes up to N messages per call, and could take two markers in
// one: it stops at the first, the second goes down with its buffer, and
// the consumer it was meant for waits forever. Sending them spread out in
// time does not help: the ring's batch calls take run after run, and a
// deque thief's steal batch message after message, until the batch is
// full or nothing waits, so a marker sent while another consumer's batch
// call is still going may join that batch. So with batches the parent
// sends one marker, waits until one more consumer has exited (the one
// that took it: a consumer exits only at its marker, and one that fails
// fails the run), and only then sends the next. A consumer that has
// exited makes no more batch calls, so none can take two. The waits come
// after the last data message, outside what the run measures (its rate
// and latencies end at each consumer's last data message).
func sendEndMarkers(f *fleet, marker endpoint, end []byte, consumers int, oneByOne bool) error {
	for i := range consumers {
		if oneByOne && i > 0 {
			if err := f.awaitLines(func() bool { return f.finishedCount(roleConsumer) >= i }); err != nil {
				return fmt.Errorf("waiting for consumer %d of %d to take its end marker: %w", i, consumers, err)
			}
		}
		if err := marker.send(end); err != nil {
			return fmt.Errorf("sending an end marker: %w (%v)", err, f.why())
		}
	}
	return nil
}

// finishedCount is how many workers in role have finished, whatever
// their end.
func (f *fleet) finishedCount(role string) int {
	n := 0
	for _, w := range f.list() {
		if w.role != role {
			continue
		}
		select {
		case <-w.done:
			n++
		default:
		}
	}
	return n
}
