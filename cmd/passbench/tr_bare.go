package main

import (
	"context"
	"os"

	"github.com/shmkit/shmkit/internal/bareref"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// The reference row of the comparison: internal/bareref's Vyukov ring,
// without any crash safety, in the harness every other transport runs in
// (the same messages, checks and poll back-off as ring/poll), so that a
// user sees on their own machine what the ring's crash safety costs. It is
// a reference, not a transport to use: a process killed in the middle of
// a call wedges it for good.

// bareTransport is its name on the command line and in JSON.
const bareTransport = "bare"

// bareMaxSlot is the largest slot the reference ring takes.
const bareMaxSlot = 256

// bareLane is a reference ring in a region file in /dev/shm.
type bareLane struct {
	reg     *shm.Region
	r       *bareref.Ring
	slots   int
	slot    int
	removed bool
}

func newBareLane(c laneConfig) (lane, error) {
	g := c.slotConfig()
	slots, slot := int(g.Capacity), int(g.SlotSize)
	name, err := shmName("bare")
	if err != nil {
		return nil, err
	}
	reg, err := shm.Create(name, shm.Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: uint64(bareref.Size(slots, slot))}})
	if err != nil {
		return nil, err
	}
	r, err := bareref.Init(reg.Body(), slots, slot)
	if err != nil {
		_ = shm.Remove(reg.Path())
		_ = reg.Close()
		return nil, err
	}
	return &bareLane{reg: reg, r: r, slots: slots, slot: slot}, nil
}

func (l *bareLane) share(bool) (endSpec, *os.File, error) {
	return endSpec{Path: l.reg.Path()}, nil, nil
}

func (l *bareLane) open(ctx context.Context, _ bool) (endpoint, error) {
	return &bareEnd{r: l.r, ctx: ctx}, nil
}

func (l *bareLane) detach() error {
	if l.removed {
		return nil
	}
	l.removed = true
	return shm.Remove(l.reg.Path())
}

func (l *bareLane) capacity() int { return l.slots }

func (l *bareLane) close() error {
	err := l.detach()
	if cerr := l.reg.Close(); err == nil {
		err = cerr
	}
	return err
}

// openBareEnd maps the reference ring at e.Path in a child process.
func openBareEnd(ctx context.Context, c laneConfig, e endSpec, _ bool) (endpoint, error) {
	reg, err := shm.Open(e.Path, layout.KindRegion)
	if err != nil {
		return nil, err
	}
	g := c.slotConfig()
	r, err := bareref.Attach(reg.Body(), int(g.Capacity), int(g.SlotSize))
	if err != nil {
		reg.Close()
		return nil, err
	}
	return &bareEnd{r: r, ctx: ctx, reg: reg}, nil
}

// bareEnd polls the reference ring with the ring's poll back-off.
type bareEnd struct {
	r   *bareref.Ring
	ctx context.Context
	reg *shm.Region // a child's own mapping, closed with the end
}

func (e *bareEnd) send(msg []byte) error {
	for fails := 1; !e.r.TryPush(msg); fails++ {
		if err := pollIdle(e.ctx, fails); err != nil {
			return err
		}
	}
	return nil
}

func (e *bareEnd) recv(buf []byte) (int, error) {
	for fails := 1; ; fails++ {
		if n, ok := e.r.TryPop(buf); ok {
			return n, nil
		}
		if err := pollIdle(e.ctx, fails); err != nil {
			return 0, err
		}
	}
}

func (e *bareEnd) close() error {
	if e.reg == nil {
		return nil
	}
	return e.reg.Close()
}
