package main

import (
	"context"
	"errors"
	"os"
	"runtime"

	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// pollSpins is how many failed tries in a row a polling ring end makes
// before it starts yielding the processor (runtime.Gosched) between tries.
// With two cores and two busy processes, a tight spin alone would starve
// whatever else needs the core.
const pollSpins = 64

// pollPause is the length of the pause between two of those tries: a short
// loop on registers that leaves the ring's cache lines alone (Go has no
// PAUSE instruction). Retrying at once makes a producer facing a full ring
// re-read the very slot the consumer is freeing, and a consumer facing an
// empty one the slot the producer is filling, stealing the line from under
// the side that is making progress; measured here, a pause of this length
// takes ~0.2 µs off a ring round trip and keeps a one-to-one stream from
// settling into the slow "always full" regime (see docs/bench.md).
const pollPause = 64

// pollCheckEvery is how many yields a polling end makes between looks at
// its context.
const pollCheckEvery = 1024

// ringLane is a shmkit ring in /dev/shm, created by the parent.
type ringLane struct {
	r       *transport.Ring // the parent's handle: it created the ring
	path    string
	poll    bool
	removed bool
}

func newRingLane(c laneConfig) (lane, error) {
	name, err := shmName("ring")
	if err != nil {
		return nil, err
	}
	r, err := transport.CreateRing(name, c.slotConfig())
	if err != nil {
		return nil, err
	}
	return &ringLane{r: r, path: r.Path(), poll: c.Mode == modePoll}, nil
}

func (l *ringLane) share(bool) (endSpec, *os.File, error) { return endSpec{Path: l.path}, nil, nil }

func (l *ringLane) open(ctx context.Context, _ bool) (endpoint, error) {
	return &ringEnd{r: l.r, ctx: ctx, poll: l.poll}, nil
}

func (l *ringLane) detach() error {
	if l.removed {
		return nil
	}
	l.removed = true
	return shm.Remove(l.path)
}

func (l *ringLane) capacity() int { return int(l.r.Capacity()) }

func (l *ringLane) close() error {
	err := l.detach()
	if cerr := l.r.Close(); err == nil {
		err = cerr
	}
	return err
}

// stats reads the ring's counters that say how often each side waited.
func (l *ringLane) stats() *RingStats {
	c := l.r.Counters()
	return &RingStats{SlotBytes: int(l.r.SlotSize()), FullHits: c.FullHits, EmptyHits: c.EmptyHits,
		Requeued: c.Requeued, Poisoned: c.Poisoned, Burned: c.Burned}
}

// openRingEnd opens the ring at e.Path in a child process.
func openRingEnd(ctx context.Context, c laneConfig, e endSpec, _ bool) (endpoint, error) {
	r, err := transport.OpenRing(e.Path)
	if err != nil {
		return nil, err
	}
	return &ringEnd{r: r, ctx: ctx, poll: c.Mode == modePoll, owned: true}, nil
}

// ringEnd sends with TryPush or Push and receives with TryPop or Pop.
type ringEnd struct {
	r     *transport.Ring
	ctx   context.Context
	poll  bool
	owned bool // close closes the handle
}

func (e *ringEnd) send(msg []byte) error {
	if !e.poll {
		return e.r.Push(e.ctx, msg)
	}
	for fails := 1; ; fails++ {
		err := e.r.TryPush(msg)
		if !errors.Is(err, transport.ErrFull) {
			return err
		}
		if err := e.idle(fails); err != nil {
			return err
		}
	}
}

func (e *ringEnd) recv(buf []byte) (int, error) {
	if !e.poll {
		return e.r.Pop(e.ctx, buf)
	}
	for fails := 1; ; fails++ {
		n, err := e.r.TryPop(buf)
		if !errors.Is(err, transport.ErrEmpty) {
			return n, err
		}
		if err := e.idle(fails); err != nil {
			return 0, err
		}
	}
}

// idle is the polling back-off after the fails-th failed try in a row.
func (e *ringEnd) idle(fails int) error { return pollIdle(e.ctx, fails) }

// pollIdle is the polling back-off (ring and deque) after the fails-th
// failed try in a row: pause briefly, then yield between tries, looking
// at the context now and then.
func pollIdle(ctx context.Context, fails int) error {
	if fails < pollSpins {
		pause(pollPause)
		return nil
	}
	runtime.Gosched()
	if fails%pollCheckEvery == 0 {
		return ctx.Err()
	}
	return nil
}

func (e *ringEnd) close() error {
	if !e.owned {
		return nil
	}
	return e.r.Close()
}

// pause spins n iterations on registers only. It is not inlined, so its
// loop is not removed although nobody uses the result.
//
//go:noinline
func pause(n int) int {
	x := 0
	for i := range n {
		x += i
	}
	return x
}
