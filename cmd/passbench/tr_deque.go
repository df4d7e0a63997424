package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// dequeLane is a shmkit work-stealing deque in /dev/shm. A deque has one
// owner, who alone pushes: the one producer process. The parent creates
// the deque and gives the owner role up at once (Close), the producer
// opens it and adopts it (Adopt), and every consumer opens it as a thief
// and steals from the top, oldest first. The parent keeps a thief's handle
// of its own, for the counters and the repairs of a leased run, and
// adopts the deque once the producer has exited (and closed it, giving
// the role up) to push the end markers behind all the data.
type dequeLane struct {
	d       *transport.Deque // the parent's handle: a thief until it pushes the end markers
	path    string
	poll    bool
	removed bool
}

func newDequeLane(c laneConfig) (lane, error) {
	name, err := shmName("deque")
	if err != nil {
		return nil, err
	}
	created, err := transport.CreateDeque(name, c.slotConfig())
	if err != nil {
		return nil, err
	}
	path := created.Path()
	// Give the owner role up for the producer; the file stays.
	if err := created.Close(); err != nil {
		return nil, errors.Join(err, shm.Remove(path))
	}
	d, err := transport.OpenDeque(path)
	if err != nil {
		return nil, errors.Join(err, shm.Remove(path))
	}
	return &dequeLane{d: d, path: path, poll: c.Mode == modePoll}, nil
}

func (l *dequeLane) share(bool) (endSpec, *os.File, error) { return endSpec{Path: l.path}, nil, nil }

// open is the parent's own end: a write end adopts the deque at its first
// send (the end markers, once the producer is done).
func (l *dequeLane) open(ctx context.Context, write bool) (endpoint, error) {
	return &dequeEnd{d: l.d, ctx: ctx, poll: l.poll, adopt: write}, nil
}

func (l *dequeLane) detach() error {
	if l.removed {
		return nil
	}
	l.removed = true
	return shm.Remove(l.path)
}

func (l *dequeLane) capacity() int { return int(l.d.Capacity()) }

func (l *dequeLane) close() error {
	err := l.detach()
	if cerr := l.d.Close(); err == nil {
		err = cerr
	}
	return err
}

// stats reads the deque's counters.
func (l *dequeLane) stats() *DequeStats {
	c := l.d.Counters()
	return &DequeStats{SlotBytes: int(l.d.SlotSize()), FullHits: c.FullHits, EmptyHits: c.EmptyHits,
		Stolen: c.Stolen, Claimed: c.Claimed, OwnerPopped: c.OwnerPopped,
		Returned: c.Returned, Poisoned: c.Poisoned}
}

// openDequeEnd opens the deque at e.Path in a child process: the producer
// (write) adopts it, a consumer stays a thief.
func openDequeEnd(ctx context.Context, c laneConfig, e endSpec, write bool) (endpoint, error) {
	d, err := transport.OpenDeque(e.Path)
	if err != nil {
		return nil, err
	}
	if write {
		if _, err := d.Adopt(); err != nil {
			return nil, errors.Join(fmt.Errorf("adopting the deque: %w", err), d.Close())
		}
	}
	return &dequeEnd{d: d, ctx: ctx, poll: c.Mode == modePoll, owned: true}, nil
}

// dequeEnd sends as the owner with TryPush or Push, and receives as a
// thief with TrySteal or Steal (leased: TryClaim or Claim, then Ack).
type dequeEnd struct {
	d     *transport.Deque
	ctx   context.Context
	poll  bool
	owned bool // close closes the handle
	adopt bool // adopt the deque before the first send (the parent's end)
}

func (e *dequeEnd) send(msg []byte) error {
	if e.adopt {
		if _, err := e.d.Adopt(); err != nil {
			return fmt.Errorf("adopting the deque: %w", err)
		}
		e.adopt = false
	}
	if !e.poll {
		return e.d.Push(e.ctx, msg)
	}
	for fails := 1; ; fails++ {
		err := e.d.TryPush(msg)
		if !errors.Is(err, transport.ErrFull) {
			return err
		}
		if err := pollIdle(e.ctx, fails); err != nil {
			return err
		}
	}
}

func (e *dequeEnd) recv(buf []byte) (int, error) {
	if !e.poll {
		return e.d.Steal(e.ctx, buf)
	}
	for fails := 1; ; fails++ {
		n, err := e.d.TrySteal(buf)
		if !errors.Is(err, transport.ErrEmpty) {
			return n, err
		}
		if err := pollIdle(e.ctx, fails); err != nil {
			return 0, err
		}
	}
}

// claim leases the oldest message, polling or blocking as the end does.
func (e *dequeEnd) claim() (transport.Lease, error) {
	if !e.poll {
		return e.d.Claim(e.ctx)
	}
	for fails := 1; ; fails++ {
		l, err := e.d.TryClaim()
		if !errors.Is(err, transport.ErrEmpty) {
			return l, err
		}
		if err := pollIdle(e.ctx, fails); err != nil {
			return l, err
		}
	}
}

func (e *dequeEnd) ack(l transport.Lease) error { return e.d.Ack(l) }
func (e *dequeEnd) fileID() uint64              { return e.d.ID() }

func (e *dequeEnd) close() error {
	if !e.owned {
		return nil
	}
	return e.d.Close()
}
