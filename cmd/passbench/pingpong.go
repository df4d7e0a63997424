package main

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// The shared file is a KindRegion whose body holds two words, each on its own
// cache line so that the peer's "I am attached" store does not disturb the
// line being ping-ponged:
//
//	body+0   ping-pong word: the parent stores odd values, the peer even ones
//	body+64  peer state: peerAttached once the peer has mapped the file
const (
	offWord      = layout.HeaderSize
	offPeerState = layout.HeaderSize + layout.CacheLine
	regionBody   = 2 * layout.CacheLine
)

// Peer states in the state word.
const (
	peerStarting uint32 = iota
	peerAttached
)

// stopValue, stored by the parent, tells the peer to exit. It is odd (a
// parent value) and far above any round count that maxRounds allows.
const stopValue = ^uint32(0)

// maxRounds keeps 2*(warm-up+rounds) well below stopValue.
const maxRounds = 1 << 30

// spinLimit is how many loads a spinning waiter makes before it yields.
// The two processes normally sit on the two cores and a reply arrives within
// a few hundred loads; the yield only matters when something else needs the
// core.
const spinLimit = 1 << 12

// pollInterval bounds each futex sleep, so a waiter notices an abort (peer
// gone, deadline, signal) even if no wake ever comes.
const pollInterval = 100 * time.Millisecond

// errAborted is returned by a wait that gave up because its abort flag was
// set; the caller knows why.
var errAborted = errors.New("aborted")

// link is one side of the ping-pong on a shared word.
type link struct {
	word  *atomic.Uint32
	sleep bool         // futex: sleep in FutexWait and FutexWake after each store
	abort *atomic.Bool // set by a watcher goroutine to stop waiting
}

// send publishes v to the other side.
func (l *link) send(v uint32) error {
	l.word.Store(v)
	if l.sleep {
		if _, err := shm.FutexWake(l.word, 1); err != nil {
			return err
		}
	}
	return nil
}

// await waits until the word no longer holds old and returns what it holds.
func (l *link) await(old uint32) (uint32, error) {
	if l.sleep {
		return l.awaitFutex(old)
	}
	return l.awaitSpin(old)
}

// awaitSpin is the hot loop of the spin floor: a tight run of atomic loads,
// then a yield and a look at the abort flag, never an unbounded spin.
func (l *link) awaitSpin(old uint32) (uint32, error) {
	w := l.word
	for {
		for range spinLimit {
			if v := w.Load(); v != old {
				return v, nil
			}
		}
		if l.abort.Load() {
			return 0, errAborted
		}
		runtime.Gosched()
	}
}

// awaitFutex sleeps in the kernel while the word holds old. FutexWait returns
// on wake-ups, mismatches and spurious wake-ups alike: the loop re-checks.
func (l *link) awaitFutex(old uint32) (uint32, error) {
	w := l.word
	for {
		if v := w.Load(); v != old {
			return v, nil
		}
		if l.abort.Load() {
			return 0, errAborted
		}
		if err := shm.FutexWait(w, old, pollInterval); err != nil && !errors.Is(err, shm.ErrTimeout) {
			return 0, err
		}
	}
}

// pingRounds runs n round trips from the parent's side. last is the value
// the word holds now (the peer's latest reply, or 0); it returns the new one.
// record, if not nil, gets each round's latency in nanoseconds, measured on
// CLOCK_MONOTONIC around the store and the wait for the reply.
func (l *link) pingRounds(last uint32, n int, record func(ns int64)) (uint32, error) {
	for range n {
		ping := last + 1
		t0 := shm.MonoNow()
		if err := l.send(ping); err != nil {
			return last, err
		}
		v, err := l.await(ping)
		t1 := shm.MonoNow()
		if err != nil {
			return last, err
		}
		if v != ping+1 {
			return last, fmt.Errorf("protocol error: sent %d, peer answered %d (want %d)", ping, v, ping+1)
		}
		last = v
		if record != nil {
			record(t1 - t0)
		}
	}
	return last, nil
}

// serve is the peer's side: answer every odd value with the next even one
// until the parent stores stopValue. The word starts at 0 in a fresh file;
// the parent may already have stored its first ping by the time serve runs,
// so the peer must not take its starting point from the word.
func (l *link) serve() error {
	last := uint32(0)
	for {
		v, err := l.await(last)
		if err != nil {
			return err
		}
		if v == stopValue {
			return nil
		}
		if v != last+1 {
			return fmt.Errorf("protocol error: had %d, parent sent %d (want %d)", last, v, last+1)
		}
		last = v + 1
		if err := l.send(last); err != nil {
			return err
		}
	}
}
