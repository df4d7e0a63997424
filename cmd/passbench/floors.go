package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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

func (o Options) validate(defaultRounds int) (rounds int, err error) {
	rounds = o.Rounds
	if rounds == 0 {
		rounds = defaultRounds
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

// floor is one of the two hardware floors: two processes passing a turn
// back and forth through one shared word.
type floor struct {
	Name          string
	DefaultRounds int
	Sleep         bool // waiters sleep in FutexWait instead of spinning
	About         string
}

// floors are what any shared-memory transport sits on.
var floors = [...]floor{
	{Name: "spin", DefaultRounds: 100000, About: "both sides spin on one shared 32-bit word on its own cache line (cache-line ping-pong); no message, no system call"},
	{Name: "futex", DefaultRounds: 20000, Sleep: true, About: "both sides sleep in FUTEX_WAIT on the word; the writer stores, then FUTEX_WAKEs, every round"},
}

// floorJob is what a floor's peer process is told.
type floorJob struct {
	Floor string `json:"floor"`
	Shm   string `json:"shm"`
}

// measureFloor measures the round-trip time of fl between this process and
// a peer process: it creates the shared file, starts the peer, waits until
// the peer has mapped the file, unlinks it (so nothing is left behind
// whatever happens next), warms up, measures, and stops the peer. The peer
// is killed and reaped on every error path. done, if not nil, counts the
// measured rounds as they complete (for a progress bar).
func measureFloor(ctx context.Context, fl *floor, o Options, done *atomic.Int64) (res Result, err error) {
	rounds, err := o.validate(fl.DefaultRounds)
	if err != nil {
		return Result{}, err
	}
	name, err := shmName(fl.Name)
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
	peer, err := startChild(ctx, roleFloor, floorJob{Floor: fl.Name, Shm: path}, nil, o.Timeout)
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
			return context.Cause(ctx)
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
	l := &link{word: word, sleep: fl.Sleep, abort: &abort}
	last, err := l.pingRounds(0, o.Warmup, nil)
	if err != nil {
		return Result{}, why(err)
	}
	rec := newRecorder()
	record := rec.record
	if done != nil {
		record = func(ns int64) {
			rec.record(ns)
			done.Add(1)
		}
	}
	t0 := shm.MonoNow()
	if _, err := l.pingRounds(last, rounds, record); err != nil {
		return Result{}, why(err)
	}
	secs := float64(shm.MonoNow()-t0) / 1e9
	if err := l.send(stopValue); err != nil {
		return Result{}, err
	}
	reaped = true
	if err := peer.wait(peerExitGrace); err != nil {
		return Result{}, fmt.Errorf("peer: %w", err)
	}
	mode := modePoll
	if fl.Sleep {
		mode = modeBlock
	}
	res = Result{
		Kind: kindRTT, Transport: fl.Name, Mode: mode, Producers: 1, Consumers: 1,
		PayloadBytes: 4, Messages: int64(rounds), Warmup: o.Warmup, Seconds: secs,
	}
	if secs > 0 {
		res.MsgsPerSec = float64(rounds) / secs
	}
	rec.fill(&res)
	return res, nil
}

// floorPeerMain is the peer's side: map the file, say so, answer every
// ping until the stop value.
func floorPeerMain(jobJSON string) error {
	var j floorJob
	if err := json.Unmarshal([]byte(jobJSON), &j); err != nil {
		return fmt.Errorf("bad job: %w", err)
	}
	var fl *floor
	for i := range floors {
		if floors[i].Name == j.Floor {
			fl = &floors[i]
		}
	}
	if fl == nil {
		return fmt.Errorf("unknown floor %q", j.Floor)
	}
	r, err := shm.Open(j.Shm, layout.KindRegion)
	if err != nil {
		return err
	}
	defer r.Close()
	word, err := r.Uint32(offWord)
	if err != nil {
		return err
	}
	state, err := r.Uint32(offPeerState)
	if err != nil {
		return err
	}
	state.Store(peerAttached)
	if _, err := shm.FutexWake(state, 1); err != nil {
		return err
	}
	runtime.LockOSThread()
	// The abort flag is never set: watchParent ends the whole process.
	l := &link{word: word, sleep: fl.Sleep, abort: new(atomic.Bool)}
	return l.serve()
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

// shmName is a fresh bare name (so in /dev/shm) for one file of one
// measurement; what says what the file is for.
func shmName(what string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return fmt.Sprintf("passbench-%d-%s-%s", os.Getpid(), what, hex.EncodeToString(b[:])), nil
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
