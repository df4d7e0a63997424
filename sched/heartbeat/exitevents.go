package heartbeat

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shmkit/shmkit/shm"
)

// DefaultExitEventCapacity bounds the events queued for the subscriber.
const DefaultExitEventCapacity = 1024

// Exit-event errors.
var (
	ErrAlreadySubscribed = errors.New("heartbeat: exit events already have a subscriber")
	ErrDisconnected      = errors.New("heartbeat: exit-event publisher closed")
	ErrRecvTimeout       = errors.New("heartbeat: timed out waiting for an exit event")
)

// ExitReason says how a participant left.
type ExitReason uint8

const (
	ExitUnregistered ExitReason = iota + 1 // it unregistered itself
	ExitFoundDead                          // proven dead; its work is not yet requeued (a repair was busy or a ring unknown)
	ExitReclaimed                          // proven dead; its leased work was requeued and its slot freed
)

func (r ExitReason) String() string {
	switch r {
	case ExitUnregistered:
		return "unregistered"
	case ExitFoundDead:
		return "found dead"
	case ExitReclaimed:
		return "reclaimed"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// ExitEvent is one notification. Lagged marks that the subscriber fell
// behind: events of that batch were dropped, and the truth is in the
// heartbeat table (Snapshots).
type ExitEvent struct {
	Lagged bool
	PID    int32
	ID     shm.ProcessID
	Slot   int
	Reason ExitReason
	Detail string
}

func (e ExitEvent) String() string {
	if e.Lagged {
		return "lagged"
	}
	return fmt.Sprintf("exited pid %d (slot %d): %s", e.PID, e.Slot, e.Reason)
}

// ExitEvents is a bounded, single-subscriber stream of participant exits.
// Publishing never blocks: when the queue is full the subscriber's next
// receive returns one Lagged marker and the queued batch is discarded.
type ExitEvents struct {
	mu         sync.Mutex
	queue      []ExitEvent
	capacity   int
	lagged     bool
	closed     bool
	subscribed bool
	notify     chan struct{} // one token when the queue changes
	done       chan struct{} // closed by Close: wakes every blocked receive
	blocked    int           // receives waiting for a change (tests wait on it)
}

// NewExitEvents makes a stream with the given bound (<= 0: the default).
func NewExitEvents(capacity int) *ExitEvents {
	if capacity <= 0 {
		capacity = DefaultExitEventCapacity
	}
	return &ExitEvents{capacity: capacity, notify: make(chan struct{}, 1), done: make(chan struct{})}
}

// Subscription receives exit events.
type Subscription struct{ ev *ExitEvents }

// Subscribe returns the one subscription; a second gives ErrAlreadySubscribed.
func (ev *ExitEvents) Subscribe() (*Subscription, error) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.subscribed {
		return nil, ErrAlreadySubscribed
	}
	ev.subscribed = true
	return &Subscription{ev: ev}, nil
}

// Publish queues e without blocking. Events before a subscription exists
// are dropped (nobody asked for them).
func (ev *ExitEvents) Publish(e ExitEvent) {
	ev.mu.Lock()
	switch {
	case !ev.subscribed || ev.closed:
	case len(ev.queue) >= ev.capacity:
		ev.lagged = true
	default:
		ev.queue = append(ev.queue, e)
	}
	ev.mu.Unlock()
	select {
	case ev.notify <- struct{}{}:
	default:
	}
}

// Close disconnects the subscriber once it has received what is queued:
// every receive then returns ErrDisconnected, a blocked one included.
// Later publishes are dropped. Closing twice is harmless. pass.Scheduler's
// Stop closes the events it was given.
func (ev *ExitEvents) Close() {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if !ev.closed {
		ev.closed = true
		close(ev.done)
	}
}

// Recv blocks until an event, a Lagged marker or disconnection
// (ErrDisconnected, once Close was called and the queue is drained).
func (s *Subscription) Recv() (ExitEvent, error) { return s.recv(nil) }

// RecvTimeout is Recv bounded by d (d <= 0: only what is already queued).
func (s *Subscription) RecvTimeout(d time.Duration) (ExitEvent, error) {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	return s.recv(t.C)
}

func (s *Subscription) recv(timeout <-chan time.Time) (ExitEvent, error) {
	ev := s.ev
	for {
		ev.mu.Lock()
		if ev.lagged {
			// The queued events belong to the batch that overflowed.
			ev.lagged = false
			ev.queue = ev.queue[:0]
			ev.mu.Unlock()
			return ExitEvent{Lagged: true}, nil
		}
		if len(ev.queue) > 0 {
			e := ev.queue[0]
			ev.queue = ev.queue[1:]
			ev.mu.Unlock()
			return e, nil
		}
		if ev.closed {
			ev.mu.Unlock()
			return ExitEvent{}, ErrDisconnected
		}
		ev.blocked++
		ev.mu.Unlock()
		timedOut := false
		select {
		case <-ev.notify:
		case <-ev.done:
		case <-timeout:
			timedOut = true
		}
		ev.mu.Lock()
		ev.blocked--
		ev.mu.Unlock()
		if timedOut {
			return ExitEvent{}, ErrRecvTimeout
		}
	}
}

// blockedReceivers counts receives waiting for an event (for tests that
// must know a Recv is blocked before they act).
func (ev *ExitEvents) blockedReceivers() int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.blocked
}
