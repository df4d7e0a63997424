package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/shm"
)

// rttSpec is one round-trip measurement (`passbench rtt`).
type rttSpec struct {
	Transport string
	Mode      string // "" for the transport's default
	Options          // rounds (0: the transport's default), warm-up, timeout
	Payload   int
	Capacity  int
	SlotSize  int
}

// check validates the spec and fills in defaults; errors are usage errors.
func (s *rttSpec) check() (tr *transportInfo, rounds int, err error) {
	if tr, err = lookupTransport(s.Transport); err != nil {
		return nil, 0, usageErr(err)
	}
	if !tr.RTT {
		return nil, 0, cliutil.Usage("transport %s measures throughput only (use run); rtt takes %v", tr.Name, transportNames(canRTT))
	}
	if s.Mode, err = tr.mode(s.Mode); err != nil {
		return nil, 0, usageErr(err)
	}
	if rounds, err = s.Options.validate(tr.DefaultRounds[s.Mode]); err != nil {
		return nil, 0, usageErr(err)
	}
	if tr.floor != nil {
		return tr, rounds, nil
	}
	return tr, rounds, checkLane(tr, s.Payload, s.Capacity, s.SlotSize)
}

// measureRTT measures round trips of any rtt transport: a raw word for
// the floors, messages for the rest.
func measureRTT(ctx context.Context, s rttSpec, u *ui) (Result, error) {
	tr, rounds, err := s.check()
	if err != nil {
		return Result{}, err
	}
	var done atomic.Int64
	stopBar := u.track(fmt.Sprintf("rtt %s/%s", tr.Name, s.Mode), "round trips", int64(rounds), 0, done.Load)
	defer stopBar()
	if tr.floor != nil {
		return measureFloor(ctx, tr.floor, s.Options, &done)
	}
	s.Rounds = rounds
	return measureMsgRTT(ctx, tr, s, &done)
}

// measureMsgRTT measures round trips of one message between this process
// and an echo process, over two lanes (there and back): stamp and seal a
// message, then time the send and the receive of the echo, then check it.
func measureMsgRTT(ctx context.Context, tr *transportInfo, s rttSpec, done *atomic.Int64) (res Result, err error) {
	f, err := newFleet(ctx, tr, 1, s.Timeout)
	if err != nil {
		return Result{}, err
	}
	defer func() { err = errors.Join(err, f.stop()) }()
	cfg := laneConfig{Transport: tr.Name, Mode: s.Mode, Payload: s.Payload, Capacity: s.Capacity, SlotSize: s.SlotSize, Participants: 4}
	there, err := f.newLane(cfg)
	if err != nil {
		return Result{}, err
	}
	back, err := f.newLane(cfg)
	if err != nil {
		return Result{}, err
	}
	tx, err := there.open(f.ctx, true)
	if err != nil {
		return Result{}, err
	}
	rx, err := back.open(f.ctx, false)
	if err != nil {
		return Result{}, err
	}
	if err := f.spawn(job{Role: roleEcho, Lane: cfg}, back, there); err != nil {
		return Result{}, err
	}
	if err := f.awaitReady(); err != nil {
		return Result{}, err
	}
	f.ctl.begin(0)

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	msg := newMsg(s.Payload, 0)
	buf := make([]byte, s.Payload)
	rec := newRecorder()
	var t0, t1, begin int64
	for i := range s.Warmup + s.Rounds {
		if i == s.Warmup {
			begin = shm.MonoNow()
		}
		stamp(msg, uint64(i), 0)
		t0 = shm.MonoNow()
		err := tx.send(msg)
		n := 0
		if err == nil {
			n, err = rx.recv(buf)
		}
		t1 = shm.MonoNow()
		if err != nil {
			return Result{}, fmt.Errorf("round %d: %w (%v)", i, err, f.why())
		}
		h, err := parseMsg(buf[:n], s.Payload)
		if err == nil && h.seq != uint64(i) {
			err = fmt.Errorf("sequence %d, want %d", h.seq, i)
		}
		if err != nil {
			return Result{}, fmt.Errorf("round %d: echo is corrupt: %w", i, err)
		}
		if i >= s.Warmup {
			rec.record(t1 - t0)
			done.Add(1)
		}
	}
	secs := float64(t1-begin) / 1e9
	if err := tx.send(endMsg(s.Payload)); err != nil {
		return Result{}, err
	}
	if _, err := f.wait(roleEcho); err != nil {
		return Result{}, err
	}
	res = Result{
		Kind: kindRTT, Transport: tr.Name, Mode: s.Mode, Producers: 1, Consumers: 1,
		PayloadBytes: s.Payload, Capacity: there.capacity(), Messages: int64(s.Rounds),
		Warmup: s.Warmup, Seconds: secs,
	}
	if secs > 0 {
		res.MsgsPerSec = float64(s.Rounds) / secs
	}
	if rl, ok := there.(*ringLane); ok {
		res.Ring = rl.stats()
	}
	rec.fill(&res)
	return res, nil
}
