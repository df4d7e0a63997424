package heartbeat

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shmkit/shmkit/shm"
)

// DefaultExitEventCapacity bounds the events queued for the subscriber.
const DefaultExitEventCapacity = 1024

// DefaultOutcomeBound bounds the exit outcomes an ExitEvents keeps until
// they are received or taken.
const DefaultOutcomeBound = 4 * DefaultExitEventCapacity

// Exit-event errors.
var (
	ErrAlreadySubscribed = errors.New("heartbeat: exit events already have a subscriber")
	ErrDisconnected      = errors.New("heartbeat: exit-event publisher closed")
	ErrRecvTimeout       = errors.New("heartbeat: timed out waiting for an exit event")
	// ErrLagged: the subscriber fell behind and the events it missed will
	// not be received; their outcomes wait in the store (TakeOutcomes,
	// TakeOutcome). Recv returns it as a *LaggedError.
	ErrLagged = errors.New("heartbeat: exit-event subscriber lagged")
)

// LaggedError is what Recv returns when the subscriber's queue overflowed
// (or an outcome it was to receive was dropped for the store's bound).
// The queued batch is discarded as a notification, not as an outcome:
// every exit of it, and of the overflow, is still in the store, unless
// counted in Dropped. errors.Is(err, ErrLagged) holds.
type LaggedError struct {
	Missed  int    // exits published since the last receive that Recv will not deliver
	Dropped uint64 // outcomes dropped for the store's bound so far (ExitEvents.OutcomesDropped)
}

func (e *LaggedError) Error() string {
	s := fmt.Sprintf("%v: %d exits not received; take them from the outcome store", ErrLagged, e.Missed)
	if e.Dropped > 0 {
		s += fmt.Sprintf(" (%d outcomes dropped for its bound)", e.Dropped)
	}
	return s
}

func (e *LaggedError) Unwrap() error { return ErrLagged }

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

// ExitEvent is one participant's exit: the notification the subscriber
// receives, and the outcome the store keeps. ID.Start is 0 when the start
// time was not recorded (a member that registered and left between two
// scans: its slot's last-exit word names only the pid).
type ExitEvent struct {
	PID    int32
	ID     shm.ProcessID
	Slot   int
	Reason ExitReason
	Detail string
}

func (e ExitEvent) String() string {
	return fmt.Sprintf("exited pid %d (slot %d): %s", e.PID, e.Slot, e.Reason)
}

// ExitEvents is a bounded, single-subscriber stream of participant exits,
// with a store of their outcomes from which nothing the subscriber missed
// is lost.
//
// Every published exit is an outcome in the store until it is received
// (Recv), taken (TakeOutcome, TakeOutcomes) or dropped for the store's
// bound, so each exit reaches the caller once. Publishing never blocks:
// when the subscriber's queue is full its next receive returns a
// *LaggedError (ErrLagged) and the queued batch is no longer delivered,
// but its outcomes stay in the store with those of the overflow, for the
// subscriber to take. The store keeps at most its bound (DefaultOutcomeBound,
// WithOutcomeBound; never less than the queue's capacity); beyond it the
// oldest outcome is dropped and counted (OutcomesDropped), and if it was
// queued the subscriber lags. Exits published before a subscription are
// not received, but they are stored. A process's final exit replaces its
// found-dead outcome if that one is still pending.
//
// The store lives in this process's memory: it holds what this process's
// watchdog published, and ends with it. Another process learns of exits
// from its own watchdog, or from the table.
type ExitEvents struct {
	mu         sync.Mutex
	capacity   int        // queue bound
	bound      int        // store bound
	all        *list.List // *outcome, every pending outcome in publish order
	queue      *list.List // *outcome, the pending outcomes notified to the subscriber, in order
	byPID      map[int32][]*outcome
	dropped    uint64 // outcomes dropped for the bound
	missed     int    // since the last receive: notifications lost to overflow or the bound
	lagged     bool
	closed     bool
	subscribed bool
	notify     chan struct{} // one token when the queue changes
	done       chan struct{} // closed by Close: wakes every blocked receive
	blocked    int           // receives waiting for a change (tests wait on it)
}

type outcome struct {
	e      ExitEvent
	inAll  *list.Element
	queued *list.Element // nil unless notified to the subscriber
}

// ExitEventsOption configures NewExitEvents.
type ExitEventsOption func(*ExitEvents)

// WithOutcomeBound bounds the outcome store at n outcomes (<= 0: the
// default; never less than the queue's capacity).
func WithOutcomeBound(n int) ExitEventsOption {
	return func(ev *ExitEvents) {
		if n > 0 {
			ev.bound = n
		}
	}
}

// NewExitEvents makes a stream whose subscriber queue holds capacity events
// (<= 0: the default).
func NewExitEvents(capacity int, opts ...ExitEventsOption) *ExitEvents {
	if capacity <= 0 {
		capacity = DefaultExitEventCapacity
	}
	ev := &ExitEvents{capacity: capacity, bound: DefaultOutcomeBound,
		all: list.New(), queue: list.New(), byPID: map[int32][]*outcome{},
		notify: make(chan struct{}, 1), done: make(chan struct{})}
	for _, o := range opts {
		o(ev)
	}
	ev.bound = max(ev.bound, ev.capacity)
	return ev
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

// Publish stores e's outcome and queues it for the subscriber, without
// blocking. After Close it does nothing.
func (ev *ExitEvents) Publish(e ExitEvent) {
	if e.ID.PID == 0 {
		e.ID.PID = e.PID
	}
	ev.mu.Lock()
	if ev.closed {
		ev.mu.Unlock()
		return
	}
	if e.Reason != ExitFoundDead && e.ID.Start != 0 {
		// The final exit says more than the found-dead one of the same
		// process: it takes its place.
		for _, o := range ev.byPID[e.ID.PID] {
			if o.e.ID == e.ID && o.e.Reason == ExitFoundDead {
				ev.remove(o)
				break
			}
		}
	}
	o := &outcome{e: e}
	o.inAll = ev.all.PushBack(o)
	ev.byPID[e.ID.PID] = append(ev.byPID[e.ID.PID], o)
	if ev.all.Len() > ev.bound {
		old := ev.all.Front().Value.(*outcome)
		if old.queued != nil {
			ev.missed++
			ev.lagged = true
		}
		ev.remove(old)
		ev.dropped++
	}
	if ev.subscribed {
		if ev.queue.Len() < ev.capacity {
			o.queued = ev.queue.PushBack(o)
		} else {
			ev.missed++
			ev.lagged = true
		}
	}
	ev.mu.Unlock()
	select {
	case ev.notify <- struct{}{}:
	default:
	}
}

// remove takes o out of the store and the queue. ev.mu is held.
func (ev *ExitEvents) remove(o *outcome) {
	ev.all.Remove(o.inAll)
	if o.queued != nil {
		ev.queue.Remove(o.queued)
		o.queued = nil
	}
	pid := o.e.ID.PID
	same := ev.byPID[pid]
	for i, x := range same {
		if x == o {
			same = append(same[:i:i], same[i+1:]...)
			break
		}
	}
	if len(same) == 0 {
		delete(ev.byPID, pid)
	} else {
		ev.byPID[pid] = same
	}
}

// TakeOutcome removes and returns the oldest pending outcome of process
// id: one with that exact id, else, when its start time was not recorded
// (ID.Start 0), one with the same pid. With id.Start 0 any outcome of the
// pid matches. A pid names different processes over time, and members of
// other pid namespaces record pids of their own: a start-less match is the
// best the table recorded, not proof.
func (ev *ExitEvents) TakeOutcome(id shm.ProcessID) (ExitEvent, bool) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	same := ev.byPID[id.PID]
	var found *outcome
	for _, o := range same {
		if o.e.ID == id {
			found = o
			break
		}
	}
	if found == nil {
		for _, o := range same {
			if id.Start == 0 || o.e.ID.Start == 0 {
				found = o
				break
			}
		}
	}
	if found == nil {
		return ExitEvent{}, false
	}
	ev.remove(found)
	return found.e, true
}

// TakeOutcomes removes and returns every pending outcome, oldest first:
// what a subscriber does after ErrLagged. Outcomes still queued for the
// subscriber are taken too, and will not be received.
func (ev *ExitEvents) TakeOutcomes() []ExitEvent {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	out := ev.outcomes()
	ev.all.Init()
	ev.queue.Init()
	clear(ev.byPID)
	return out
}

// Outcomes lists the pending outcomes, oldest first, taking none.
func (ev *ExitEvents) Outcomes() []ExitEvent {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.outcomes()
}

func (ev *ExitEvents) outcomes() []ExitEvent {
	out := make([]ExitEvent, 0, ev.all.Len())
	for el := ev.all.Front(); el != nil; el = el.Next() {
		out = append(out, el.Value.(*outcome).e)
	}
	return out
}

// OutcomesDropped counts the outcomes dropped, oldest first, because the
// store held its bound: exits that nobody received or took in time.
func (ev *ExitEvents) OutcomesDropped() uint64 {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.dropped
}

// Close disconnects the subscriber once it has received what is queued:
// every receive then returns ErrDisconnected, a blocked one included.
// Later publishes are dropped; pending outcomes can still be taken.
// Closing twice is harmless. pass.Scheduler's Stop closes the events it
// was given.
func (ev *ExitEvents) Close() {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if !ev.closed {
		ev.closed = true
		close(ev.done)
	}
}

// Recv blocks until an event, a lag (a *LaggedError: take the missed
// exits from the store) or disconnection (ErrDisconnected, once Close was
// called and the queue is drained). A received event's outcome leaves the
// store.
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
			// The queued events belong to the batch that overflowed: they
			// are no longer notified, and stay in the store.
			missed := ev.missed + ev.queue.Len()
			for el := ev.queue.Front(); el != nil; el = el.Next() {
				el.Value.(*outcome).queued = nil
			}
			ev.queue.Init()
			ev.lagged, ev.missed = false, 0
			err := &LaggedError{Missed: missed, Dropped: ev.dropped}
			ev.mu.Unlock()
			return ExitEvent{}, err
		}
		if el := ev.queue.Front(); el != nil {
			o := el.Value.(*outcome)
			ev.remove(o)
			ev.mu.Unlock()
			return o.e, nil
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
