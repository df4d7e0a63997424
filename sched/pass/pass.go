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
	Executed       uint64 // closures run to a result (late ones included)
	Failed         uint64 // results with an error status (late ones included)
	Backpressure   uint64 // results that waited for room in the result ring
	Released       uint64 // passes handed back unfinished (at Stop, or after a result push failed): another worker runs them again
	LateResults    uint64 // results dropped because Stop's context ended while their closure ran (the pass released)
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

	claimCtx  context.Context // ends when Stop begins: no new claims
	stopClaim context.CancelFunc
	// finishCtx ends when Stop's own context ends: it is every running
	// closure's context, and bounds a result's wait for room.
	finishCtx    context.Context
	finishCancel context.CancelFunc
	runs         []*run // one per worker goroutine
	wg           sync.WaitGroup
	stopOnce     sync.Once
	stopErr      error

	executed, failed, backpressure, released, late atomic.Uint64
	scans, reclaimed, leaseRecordErr               atomic.Uint64
}

// run is what one worker goroutine is doing, shared with Stop so that it
// can abandon a closure that outlives Stop's context.
type run struct {
	mu       sync.Mutex
	state    runState
	lease    transport.Lease
	ref      heartbeat.LeaseRef
	recorded bool   // ref names a lease record to clear
	msg      []byte // the pass being executed (the worker's copy), for a closure that never returns
}

type runState uint8

const (
	runIdle      runState = iota // claiming, or pushing a result: the worker holds its lease
	runExecuting                 // in the closure: Stop may abandon it
	runAbandoned                 // Stop released the lease and took over the worker's share of wg
)

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
		r := &run{}
		s.runs = append(s.runs, r)
		s.wg.Add(1)
		go s.worker(r)
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
// submit ring until a watchdog requeues it. When Stop's context ends while
// a closure runs, Stop releases the pass and the worker, once the closure
// returns, drops its result and exits (see abandon).
func (s *Scheduler) worker(r *run) {
	abandoned := false
	out := make([]byte, s.result.MaxPayload())
	defer func() {
		// A closure that ends its goroutine with runtime.Goexit (as
		// t.FailNow does) neither returns nor panics: the worker unwinds
		// with its run still executing. Settle the pass as a failed one
		// and start a worker in its place.
		r.mu.Lock()
		goexit := r.state == runExecuting
		if goexit {
			r.state = runIdle
		}
		if r.state == runAbandoned && !abandoned {
			// Stop abandoned the run (and gave back this worker's share
			// of wg), then the closure called Goexit: nothing to settle.
			abandoned = true
			s.late.Add(1)
		}
		lease, ref, recorded, msg := r.lease, r.ref, r.recorded, r.msg
		r.lease, r.msg = transport.Lease{}, nil
		r.mu.Unlock()
		if goexit {
			s.settleGoexit(lease, ref, recorded, msg, out)
			if s.claimCtx.Err() == nil {
				s.wg.Add(1)
				go s.worker(r)
			}
		}
		if !abandoned { // an abandoned worker's share of wg was Stop's to give back
			s.wg.Done()
		}
	}()
	// The closure reads its arguments from this copy, not from the slot:
	// an abandoned closure may still be reading after its lease was
	// released (the slot reused) and the ring unmapped.
	in := make([]byte, s.submit.MaxPayload())
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
		msg := in[:copy(in, lease.Data())]
		r.mu.Lock()
		if s.finishCtx.Err() != nil {
			// Claimed as Stop gave up: Stop's sweep is past this worker
			// or about to find it idle. Do not start the closure.
			r.mu.Unlock()
			s.handBack(lease, ref, rerr == nil)
			return
		}
		r.state, r.lease, r.ref, r.recorded, r.msg = runExecuting, lease, ref, rerr == nil, msg
		r.mu.Unlock()
		n := s.execute(s.finishCtx, msg, out)
		r.mu.Lock()
		if r.state == runAbandoned {
			// Stop released the pass while the closure ran; another
			// worker runs it again. This result is late: drop it.
			r.mu.Unlock()
			s.late.Add(1)
			abandoned = true
			return
		}
		r.state, r.lease, r.msg = runIdle, transport.Lease{}, nil
		r.mu.Unlock()
		shm.CrashPoint(crashPassWorkerAfterExecute)
		if s.finishCtx.Err() != nil {
			// The closure's context was cancelled while it ran: what it
			// returned may be that cancellation, not the pass's result.
			// Hand the pass back as Stop would have.
			s.late.Add(1)
			s.handBack(lease, ref, rerr == nil)
			return
		}
		err = s.result.TryPush(out[:n])
		if errors.Is(err, transport.ErrFull) {
			s.backpressure.Add(1)
			err = s.result.Push(s.finishCtx, out[:n])
		}
		if err != nil {
			// Stop's context ended with the result ring full: hand the
			// pass back for another worker rather than drop its result.
			s.handBack(lease, ref, rerr == nil)
			continue // the next Claim sees claimCtx ended
		}
		shm.CrashPoint(crashPassWorkerAfterResult)
		s.submit.Ack(lease)
		if rerr == nil {
			s.member.ClearLease(ref)
		}
	}
}

// settleGoexit answers a pass whose closure called runtime.Goexit with an
// error result, as a panic is answered (the submitter hears of it once),
// then acks it; with no room for the result it hands the pass back
// instead, never blocking (the worker goroutine is going away).
func (s *Scheduler) settleGoexit(lease transport.Lease, ref heartbeat.LeaseRef, recorded bool, msg, out []byte) {
	s.executed.Add(1)
	s.failed.Add(1)
	_, token, _, err := decodeSubmit(msg)
	if err != nil || s.finishCtx.Err() != nil {
		s.handBack(lease, ref, recorded)
		return
	}
	n := encodeResult(out, token, StatusError, []byte("closure called runtime.Goexit (t.FailNow?) instead of returning"))
	if s.result.TryPush(out[:n]) != nil {
		s.handBack(lease, ref, recorded)
		return
	}
	s.submit.Ack(lease)
	if recorded {
		s.member.ClearLease(ref)
	}
}

// handBack releases an unfinished pass to the submit queue for another
// worker and clears its lease record.
func (s *Scheduler) handBack(lease transport.Lease, ref heartbeat.LeaseRef, recorded bool) {
	s.submit.Release(lease)
	s.released.Add(1)
	if recorded {
		s.member.ClearLease(ref)
	}
}

// abandon runs when Stop's context has ended (finishCtx is cancelled, so
// every running closure's context is): it releases the pass of every
// closure still running, and gives back its worker's share of wg so that
// Stop does not wait for the closure. The worker drops the result when the
// closure returns.
func (s *Scheduler) abandon() {
	for _, r := range s.runs {
		r.mu.Lock()
		if r.state == runExecuting {
			r.state = runAbandoned
			s.handBack(r.lease, r.ref, r.recorded)
			r.lease = transport.Lease{}
			s.wg.Done()
		}
		r.mu.Unlock()
	}
}

// execute runs one submit message and writes its result message into out.
func (s *Scheduler) execute(ctx context.Context, msg, out []byte) int {
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
	res, err := runClosure(ctx, fn, args)
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
func runClosure(ctx context.Context, fn Closure, args []byte) (res []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("closure panicked: %v\n%s", r, firstLines(debug.Stack(), 6))
		}
	}()
	return fn(ctx, args)
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
		Released: s.released.Load(), LateResults: s.late.Load(), WatchdogScans: s.scans.Load(), Reclaimed: s.reclaimed.Load(),
		LeaseRecordErr: s.leaseRecordErr.Load(),
	}
}

// Heartbeat returns the table this scheduler is registered in.
func (s *Scheduler) Heartbeat() *heartbeat.Table { return s.hb }

// Member returns this process's registration.
func (s *Scheduler) Member() *heartbeat.Member { return s.member }

// Stop ends the scheduler gracefully: workers stop claiming and passes in
// flight finish, until ctx ends. Then every running closure's context is
// cancelled, each unfinished pass (a closure still running, or a result
// waiting for room in a full result ring) is released back to the submit
// queue for another worker, and Stop returns without waiting for the
// closures: whatever an abandoned run returns later is dropped and counted
// (Stats.LateResults). A pass so released runs again elsewhere, so it can
// run twice, its first run cut short or not (at least once, as after a
// crash). Then the registration is removed and the files are closed (they
// stay). Stop closes Config.Events, if set: its subscriber receives what
// is queued, then heartbeat.ErrDisconnected. The error wraps ctx's if
// passes had to be released; it is nil otherwise, unless closing failed.
// Calls after the first return the first's result.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopClaim()
		released := s.released.Load() // before this Stop (a result ring that failed a push hands passes back too)
		done := make(chan struct{})
		go func() {
			s.wg.Wait()
			close(done)
		}()
		var cut error
		select {
		case <-done:
		case <-ctx.Done():
			s.finishCancel()
			s.abandon()
			<-done // workers not abandoned exit now: their claims and pushes end with finishCtx
			if n := s.released.Load() - released; n > 0 {
				cut = fmt.Errorf("pass: stop: %d unfinished passes released for another worker: %w", n, ctx.Err())
			}
		}
		s.finishCancel()
		if s.cfg.Events != nil {
			// No scan runs any more: disconnect the subscriber, as
			// dropping the seed's scheduler does.
			s.cfg.Events.Close()
		}
		s.stopErr = errors.Join(cut, s.member.Unregister(), s.submit.Close(), s.result.Close(), s.hb.Close())
	})
	return s.stopErr
}
