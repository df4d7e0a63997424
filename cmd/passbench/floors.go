package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// Options control one round-trip measurement.
type Options struct {
	Rounds  int           // measured rounds; 0 means the transport's default
	Warmup  int           // unrecorded rounds first
	Timeout time.Duration // bound on the whole measurement, peer included
}

// DefaultWarmup and DefaultTimeout are the flags' defaults.
const (
	DefaultWarmup  = 1000
	DefaultTimeout = 2 * time.Minute
)

// peerExitGrace is how long the peer gets to exit after the stop value.
const peerExitGrace = 5 * time.Second

func (o Options) validate(tr transport) (rounds int, err error) {
	rounds = o.Rounds
	if rounds == 0 {
		rounds = tr.DefaultRounds
	}
	switch {
	case rounds < 1:
		return 0, fmt.Errorf("rounds must be at least 1, got %d", rounds)
	case o.Warmup < 0:
		return 0, fmt.Errorf("warm-up must not be negative, got %d", o.Warmup)
	case rounds+o.Warmup > maxRounds:
		return 0, fmt.Errorf("rounds plus warm-up must stay below %d", maxRounds)
	case o.Timeout <= 0:
		return 0, fmt.Errorf("timeout must be positive, got %v", o.Timeout)
	}
	return rounds, nil
}

// runFloors measures every transport in turn, each with a fresh peer.
func runFloors(ctx context.Context, o Options) ([]Result, error) {
	var out []Result
	for _, tr := range transports {
		res, err := measureRTT(ctx, tr, o)
		if err != nil {
			return out, fmt.Errorf("%s: %w", tr.Name, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// measureRTT measures the round-trip time of tr between this process and a
// peer process: it creates the shared file, starts the peer, waits until the
// peer has mapped the file, unlinks it (so nothing is left behind whatever
// happens next), warms up, measures, and stops the peer. The peer is killed
// and reaped on every error path.
func measureRTT(ctx context.Context, tr transport, o Options) (res Result, err error) {
	rounds, err := o.validate(tr)
	if err != nil {
		return Result{}, err
	}
	name, err := shmName()
	if err != nil {
		return Result{}, err
	}
	r, err := shm.Create(name, shm.Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: regionBody}})
	if err != nil {
		return Result{}, err
	}
	path := r.Path()
	removed := false
	defer func() {
		if !removed {
			if rerr := shm.Remove(path); rerr != nil && err == nil {
				err = rerr
			}
		}
		if cerr := r.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	word, err := r.Uint32(offWord)
	if err != nil {
		return Result{}, err
	}
	state, err := r.Uint32(offPeerState)
	if err != nil {
		return Result{}, err
	}

	start := time.Now()
	peer, err := startPeer(ctx, tr, path, o.Timeout)
	if err != nil {
		return Result{}, err
	}
	reaped := false
	defer func() {
		if !reaped {
			peer.kill()
		}
	}()

	// The waits below give up when the caller's context ends or the peer
	// exits (it is killed at the timeout, so that ends them too).
	var abort atomic.Bool
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		select {
		case <-ctx.Done():
		case <-peer.done:
		case <-stopWatch:
			return
		}
		abort.Store(true)
	}()
	why := func(err error) error {
		if !errors.Is(err, errAborted) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		peer.kill()
		reaped = true
		if time.Since(start) >= o.Timeout {
			return fmt.Errorf("timed out after %v%s", o.Timeout, peer.output())
		}
		return fmt.Errorf("peer exited early (%v)%s", peer.err, peer.output())
	}

	if err := awaitAttach(state, &abort); err != nil {
		return Result{}, why(err)
	}
	// Both processes have the file mapped: unlink it now, so that even a
	// SIGKILL from here on leaves nothing in /dev/shm.
	if err := shm.Remove(path); err != nil {
		return Result{}, err
	}
	removed = true

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l := &link{word: word, sleep: tr.Sleep, abort: &abort}
	last, err := l.pingRounds(0, o.Warmup, nil)
	if err != nil {
		return Result{}, why(err)
	}
	rec := newRecorder()
	if _, err := l.pingRounds(last, rounds, rec.record); err != nil {
		return Result{}, why(err)
	}
	if err := l.send(stopValue); err != nil {
		return Result{}, err
	}
	reaped = true
	if err := peer.wait(peerExitGrace); err != nil {
		return Result{}, err
	}
	return rec.result(tr.Name, o.Warmup), nil
}

// awaitAttach waits until the peer says it has mapped the file.
func awaitAttach(state *atomic.Uint32, abort *atomic.Bool) error {
	for state.Load() != peerAttached {
		if abort.Load() {
			return errAborted
		}
		if err := shm.FutexWait(state, peerStarting, pollInterval); err != nil && !errors.Is(err, shm.ErrTimeout) {
			return err
		}
	}
	return nil
}

// shmName is a fresh bare name (so in /dev/shm) for one measurement.
func shmName() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return fmt.Sprintf("passbench-%d-%s", os.Getpid(), hex.EncodeToString(b[:])), nil
}

// clockReadCost estimates what one shm.MonoNow read costs: the median gap
// between back-to-back reads. Every measured round contains one such gap.
func clockReadCost() int64 {
	const n = 10001
	gaps := make([]int64, n)
	for i := range gaps {
		a := shm.MonoNow()
		b := shm.MonoNow()
		gaps[i] = b - a
	}
	slices.Sort(gaps)
	return gaps[n/2]
}
