package pass

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// Config configures a Pass scheduler.
type Config struct {
	SubmitPath    string // submit ring (opened or created)
	ResultPath    string // result ring (opened or created)
	HeartbeatPath string // heartbeat table (opened or created)

	Ring      transport.RingConfig // geometry for rings this process creates (default capacity 1024, 64-byte slots)
	Heartbeat heartbeat.Config     // geometry for a table this process creates (default 64 slots)

	Workers  int       // goroutines executing passes in this process (0: submit and collect only)
	Registry *Registry // closures this process can execute (required when Workers > 0)
	Label    string    // shown by hbdump

	BeatInterval time.Duration // default 100 ms

	// Watchdog runs a failover watchdog in this process: every
	// WatchdogInterval (default 1 s) it reclaims dead participants.
	Watchdog         bool
	WatchdogInterval time.Duration
	Stale            time.Duration         // report participants silent this long (default 5 s)
	Events           *heartbeat.ExitEvents // where the watchdog publishes exits (optional; Stop closes it)
}

func (c *Config) defaults() {
	if c.Ring.Capacity == 0 {
		c.Ring.Capacity = 1024
	}
	if c.Heartbeat.Capacity == 0 {
		c.Heartbeat.Capacity = 64
	}
	if c.BeatInterval <= 0 {
		c.BeatInterval = 100 * time.Millisecond
	}
	if c.WatchdogInterval <= 0 {
		c.WatchdogInterval = time.Second
	}
	if c.Stale <= 0 {
		c.Stale = 5 * time.Second
	}
}

// Stats counts what this process's workers did.
type Stats struct {
	Executed       uint64 // passes run to a result
	Failed         uint64 // results with an error status
	Backpressure   uint64 // results that waited for room in the result ring
	Released       uint64 // passes handed back unfinished at Stop
	WatchdogScans  uint64
	Reclaimed      uint64 // dead participants this process's watchdog reclaimed
	LeaseRecordErr uint64 // leases that could not be shown in the heartbeat table
}

// Scheduler runs passes: it owns this process's registration in the
// heartbeat table, its workers, and optionally a watchdog.
type Scheduler struct {
	cfg    Config
	submit transport.Queue
	result transport.Queue
	hb     *heartbeat.Table
	member *heartbeat.Member
	wd     *heartbeat.Watchdog

	claimCtx     context.Context // ends when Stop begins: no new claims
	stopClaim    context.CancelFunc
	finishCtx    context.Context // ends when Stop's own context ends: in-flight work gives up
	finishCancel context.CancelFunc
	wg           sync.WaitGroup
	stopOnce     sync.Once
	stopErr      error

	executed, failed, backpressure, released atomic.Uint64
	scans, reclaimed, leaseRecordErr         atomic.Uint64
}

// Start opens or creates the submit ring, result ring and heartbeat table,
// registers this process and starts its workers (and watchdog).
func Start(cfg Config) (*Scheduler, error) {
	cfg.defaults()
	submit, _, err := transport.OpenOrCreateRing(cfg.SubmitPath, cfg.Ring)
	if err != nil {
		return nil, err
	}
	result, _, err := transport.OpenOrCreateRing(cfg.ResultPath, cfg.Ring)
	if err != nil {
		submit.Close()
		return nil, err
	}
	s, err := StartWithQueues(cfg, submit, result)
	if err != nil {
		submit.Close()
		result.Close()
	}
	return s, err
}

// StartWithQueues is Start over transports the caller opened (any
// transport.Queue: the ring, or another with the same interface). The
// scheduler closes them at Stop. A result deque must be owned by this
// handle when the scheduler runs workers, and must not be when it runs
// none (ErrResultDequeOwner): only the owner can push.
func StartWithQueues(cfg Config, submit, result transport.Queue) (*Scheduler, error) {
	cfg.defaults()
	if cfg.Workers > 0 && cfg.Registry == nil {
		return nil, fmt.Errorf("%w: %d workers need a registry", heartbeat.ErrInvalidConfig, cfg.Workers)
	}
	if MaxArgs(submit.MaxPayload()) < 0 || MaxResult(result.MaxPayload()) <= 0 {
		return nil, fmt.Errorf("%w: ring payloads too small for passes", heartbeat.ErrInvalidConfig)
	}
	if err := checkResultSide(cfg, result); err != nil {
		return nil, err
	}
	hb, _, err := heartbeat.OpenOrCreate(cfg.HeartbeatPath, cfg.Heartbeat)
	if err != nil {
		return nil, err
	}
	// A table full of dead members' slots recovers itself: their leases
	// are in these rings, which Register repairs before it frees them.
	member, err := hb.Register(cfg.Label, submit, result)
	if err != nil {
		hb.Close()
		return nil, err
	}
	s := &Scheduler{cfg: cfg, submit: submit, result: result, hb: hb, member: member}
	s.claimCtx, s.stopClaim = context.WithCancel(context.Background())
	s.finishCtx, s.finishCancel = context.WithCancel(context.Background())
	for i := 0; i < cfg.Workers; i++ {
		s.wg.Add(1)
		go s.worker()
	}
	s.wg.Add(1)
	go s.every(cfg.BeatInterval, member.Beat)
	s.wd = heartbeat.NewWatchdog(hb, heartbeat.WatchdogConfig{Stale: cfg.Stale, Queues: []heartbeat.Repairable{submit, result}, Events: cfg.Events})
	if cfg.Watchdog {
		s.wg.Add(1)
		go s.every(cfg.WatchdogInterval, func() { s.ScanNow() })
	}
	return s, nil
}

// every runs fn at each tick until Stop.
func (s *Scheduler) every(d time.Duration, fn func()) {
	defer s.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.claimCtx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// ScanNow runs one watchdog scan (with apply) and returns its report. It
// works whether or not the periodic watchdog is enabled.
func (s *Scheduler) ScanNow() heartbeat.WatchReport {
	rep := s.wd.Scan(true)
	s.scans.Add(1)
	s.reclaimed.Add(uint64(len(rep.Reclaimed)))
	return rep
}

// worker claims passes, runs them and pushes their results. A worker
// killed anywhere in here loses nothing: the pass stays leased in the
// submit ring until a watchdog requeues it.
func (s *Scheduler) worker() {
	defer s.wg.Done()
	out := make([]byte, s.result.MaxPayload())
	ringID := s.submit.ID()
	for s.claimCtx.Err() == nil {
		lease, err := s.submit.Claim(s.claimCtx)
		if err != nil {
			if s.claimCtx.Err() != nil {
				return
			}
			// Corrupt ring memory: report through the ring's Scan; do
			// not spin on it.
			time.Sleep(s.cfg.BeatInterval)
			continue
		}
		ref, rerr := s.member.RecordLease(ringID, lease.Slot(), lease.Lap(), lease.Deliveries)
		if rerr != nil {
			s.leaseRecordErr.Add(1)
		}
		shm.CrashPoint(crashPassWorkerAfterClaim)
		n := s.execute(lease.Data(), out)
		shm.CrashPoint(crashPassWorkerAfterExecute)
		err = s.result.TryPush(out[:n])
		if errors.Is(err, transport.ErrFull) {
			s.backpressure.Add(1)
			err = s.result.Push(s.finishCtx, out[:n])
		}
		if err != nil {
			// Stop's deadline passed with the result ring full: hand the
			// pass back for another worker rather than drop its result.
			s.submit.Release(lease)
			s.released.Add(1)
		} else {
			shm.CrashPoint(crashPassWorkerAfterResult)
			s.submit.Ack(lease)
		}
		if rerr == nil {
			s.member.ClearLease(ref)
		}
	}
}

// execute runs one submit message and writes its result message into out.
func (s *Scheduler) execute(msg, out []byte) int {
	closure, token, args, err := decodeSubmit(msg)
	if err != nil {
		s.failed.Add(1)
		return encodeResult(out, token, StatusMalformed, []byte(err.Error()))
	}
	fn, err := s.cfg.Registry.Lookup(closure)
	if err != nil {
		s.failed.Add(1)
		return encodeResult(out, token, StatusUnknownClosure, []byte(err.Error()))
	}
	res, err := runClosure(fn, args)
	s.executed.Add(1)
	switch {
	case err != nil:
		s.failed.Add(1)
		return encodeResult(out, token, StatusError, []byte(err.Error()))
	case len(res) > MaxResult(len(out)):
		s.failed.Add(1)
		msg := fmt.Sprintf("%v: %d bytes, the limit is %d", ErrResultTooLarge, len(res), MaxResult(len(out)))
		return encodeResult(out, token, StatusResultTooLarge, []byte(msg))
	}
	return encodeResult(out, token, StatusOK, res)
}

// runClosure turns a panicking closure into an error result: one bad pass
// must not take the worker process (and its other leases) down.
func runClosure(fn Closure, args []byte) (res []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("closure panicked: %v\n%s", r, firstLines(debug.Stack(), 6))
		}
	}()
	return fn(args)
}

func firstLines(b []byte, n int) []byte {
	for i, c := range b {
		if c == '\n' {
			if n--; n == 0 {
				return b[:i]
			}
		}
	}
	return b
}

// Stats returns this process's counters.
func (s *Scheduler) Stats() Stats {
	return Stats{
		Executed: s.executed.Load(), Failed: s.failed.Load(), Backpressure: s.backpressure.Load(),
		Released: s.released.Load(), WatchdogScans: s.scans.Load(), Reclaimed: s.reclaimed.Load(),
		LeaseRecordErr: s.leaseRecordErr.Load(),
	}
}

// Heartbeat returns the table this scheduler is registered in.
func (s *Scheduler) Heartbeat() *heartbeat.Table { return s.hb }

// Member returns this process's registration.
func (s *Scheduler) Member() *heartbeat.Member { return s.member }

// Stop ends the scheduler gracefully: workers stop claiming, passes in
// flight finish (if ctx ends first, they are released back to the submit
// ring for another worker), the registration is removed and the files are
// closed. The files stay. Stop closes Config.Events, if set: its
// subscriber receives what is queued, then heartbeat.ErrDisconnected.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		stop := context.AfterFunc(ctx, s.finishCancel)
		defer stop()
		s.stopClaim()
		s.wg.Wait()
		s.finishCancel()
		if s.cfg.Events != nil {
			// No scan runs any more: disconnect the subscriber, as
			// dropping the seed's scheduler does.
			s.cfg.Events.Close()
		}
		s.stopErr = errors.Join(s.member.Unregister(), s.submit.Close(), s.result.Close(), s.hb.Close())
	})
	return s.stopErr
}
