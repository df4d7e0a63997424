package pass

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// PoolConfig configures a worker pool.
type PoolConfig struct {
	Shared

	Workers  int       // goroutines executing passes (0: runtime.GOMAXPROCS(0))
	Registry *Registry // closures this process can execute (required)

	// Watchdog runs a failover watchdog in this process: every
	// WatchdogInterval (default 1 s) it reclaims dead participants, workers
	// (their passes go back to the queue) and clients (their passes are
	// then skipped) alike.
	Watchdog         bool
	WatchdogInterval time.Duration
	Stale            time.Duration         // report participants silent this long (default 5 s)
	Events           *heartbeat.ExitEvents // where the watchdog publishes exits (optional; Stop closes it)
}

func (c *PoolConfig) defaults() {
	c.Shared.defaults()
	if c.Workers == 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.WatchdogInterval <= 0 {
		c.WatchdogInterval = time.Second
	}
	if c.Stale <= 0 {
		c.Stale = 5 * time.Second
	}
}

// Stats counts what a pool's workers did.
type Stats struct {
	Executed        uint64 // closures run to a result (late ones included)
	Failed          uint64 // results with an error status (late ones included)
	Cancelled       uint64 // passes answered as cancelled: skipped, or their closure's context cancelled, at their submitter's request
	Orphaned        uint64 // passes acked unrun: their submitter had left (unregistered, or reclaimed on proof of death)
	OrphanedResults uint64 // results dropped: their submitter left, or was proven dead, while its pass ran or its result waited
	Malformed       uint64 // passes acked unrun that named no reply address (another wire version, or a short header)
	Poisoned        uint64 // passes answered with StatusPoisoned: they reached the submit queue's delivery limit
	Parked          uint64 // results that found their reply ring full and waited beside the workers for room
	Released        uint64 // passes handed back unfinished (at Stop, or when their reply ring could not be opened): another worker runs them again
	LateResults     uint64 // results dropped because Stop's context ended while their closure ran (the pass released)
	WatchdogScans   uint64
	Reclaimed       uint64 // dead participants this process's watchdog reclaimed
	LeaseRecordErr  uint64 // leases that could not be shown in the heartbeat table
}

// Pool executes passes: it owns this process's registration in the
// heartbeat table, its workers, a watcher of the cancel board and
// optionally a watchdog.
type Pool struct {
	cfg PoolConfig
	*seat
	replies *replies
	parking *parking
	wd      *heartbeat.Watchdog

	claimCtx  context.Context // ends when Stop begins: no new claims
	stopClaim context.CancelFunc
	// finishCtx ends when Stop's own context ends; abandon then cancels
	// every running closure's context (passCtx).
	finishCtx    context.Context
	finishCancel context.CancelFunc
	runs         []*run // one per worker goroutine
	wg           sync.WaitGroup
	watching     sync.WaitGroup // the cancel-board watcher
	stopping     atomic.Bool
	stopOnce     sync.Once
	// life guards the mappings against ScanNow calls from outside: Stop
	// takes it for writing before it closes the files (gone is then true).
	life    sync.RWMutex
	gone    bool
	stopErr error

	executed, failed, cancelled, orphaned, orphanedResults, malformed, poisoned atomic.Uint64
	poisonSeen                                                                  atomic.Uint64 // the queue's poison count at the last drain
	parked, released, late, scans, reclaimed, leaseRecordErr                    atomic.Uint64
}

// run is what one worker goroutine is doing, shared with Stop (which can
// abandon a closure that outlives Stop's context) and with the cancel
// watcher (which cancels a closure its submitter gave up on).
type run struct {
	mu        sync.Mutex
	state     runState
	lease     transport.Lease
	ref       heartbeat.LeaseRef
	recorded  bool   // ref names a lease record to clear
	msg       []byte // the pass being executed (the worker's copy), for a closure that never returns
	token     uint64
	reply     heartbeat.Ticket
	ctx       *passCtx // the running closure's context
	cancelled bool     // the submitter cancelled this run, or left
}

type runState uint8

const (
	runIdle      runState = iota // claiming, or pushing a result: the worker holds its lease
	runExecuting                 // in the closure: Stop may abandon it, the watcher cancel it
	runAbandoned                 // Stop released the lease and took over the worker's share of wg
)

// NewPool opens or creates the submit queue, heartbeat table and cancel
// board, registers this process and starts its workers (and watchdog).
// Reply rings are the clients': a pool opens each when a pass first names
// it, and never creates one.
func NewPool(cfg PoolConfig) (*Pool, error) {
	cfg.defaults()
	switch {
	case cfg.Registry == nil:
		return nil, fmt.Errorf("%w: a pool needs a registry of closures", heartbeat.ErrInvalidConfig)
	case cfg.Workers < 0:
		return nil, fmt.Errorf("%w: %d workers", heartbeat.ErrInvalidConfig, cfg.Workers)
	}
	st, err := cfg.take(false)
	if err != nil {
		return nil, err
	}
	if MaxArgs(st.submit.MaxPayload()) <= 0 {
		st.close()
		return nil, fmt.Errorf("%w: %s: a %d-byte payload cannot carry a pass header (%d bytes)", heartbeat.ErrInvalidConfig, cfg.SubmitPath, st.submit.MaxPayload(), submitHeader)
	}
	p := &Pool{cfg: cfg, seat: st, replies: newReplies(cfg.SubmitPath, st.hb.Capacity())}
	p.parking = newParking(p)
	p.claimCtx, p.stopClaim = context.WithCancel(context.Background())
	p.finishCtx, p.finishCancel = context.WithCancel(context.Background())
	for i := 0; i < cfg.Workers; i++ {
		r := &run{}
		p.runs = append(p.runs, r)
		p.wg.Add(1)
		go p.worker(r)
	}
	p.wg.Add(1)
	go p.every(cfg.BeatInterval, p.member.Beat)
	p.watching.Add(1)
	go p.watchCancels()
	p.wd = heartbeat.NewWatchdog(p.hb, heartbeat.WatchdogConfig{Stale: cfg.Stale, Queues: []heartbeat.Repairable{p.submit}, Events: cfg.Events})
	if cfg.Watchdog {
		p.wg.Add(1)
		go p.every(cfg.WatchdogInterval, func() { p.ScanNow() })
	}
	return p, nil
}

// every runs fn at each tick until Stop.
func (p *Pool) every(d time.Duration, fn func()) {
	defer p.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-p.claimCtx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// ScanNow runs one watchdog scan (with apply) and returns its report. It
// works whether or not the periodic watchdog is enabled.
func (p *Pool) ScanNow() heartbeat.WatchReport {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.gone {
		return heartbeat.WatchReport{} // stopped: the files are closed
	}
	rep := p.wd.Scan(true)
	if q, ok := p.submit.(poisonClaimer); ok {
		p.answerPoisoned(q)
	}
	p.scans.Add(1)
	p.reclaimed.Add(uint64(len(rep.Reclaimed)))
	if len(rep.Reclaimed) > 0 {
		// Requests of clients just reclaimed go, and every pool's watcher
		// rescans: closures running for those clients are cancelled.
		p.board.sweep(p.hb)
		p.board.wake()
	}
	return rep
}

// watchCancels sleeps on the cancel board's epoch and, each time it
// moves, cancels the context of every closure here whose pass is on the
// board, or whose submitter has left (a watchdog that reclaims members
// bumps the epoch). One goroutine per pool, blocked in the kernel (one OS
// thread) while nothing happens.
func (p *Pool) watchCancels() {
	defer p.watching.Done()
	for !p.stopping.Load() {
		e := p.board.epoch.Load()
		p.board.each(func(token uint64) { p.cancelRuns(func(r *run) bool { return r.token == token }, ErrCancelled) })
		p.cancelRuns(func(r *run) bool { return !p.hb.Holds(r.reply) }, ErrSubmitterGone)
		if p.stopping.Load() {
			return
		}
		// Asleep until the epoch moves, or a second: a submitter
		// reclaimed by something that does not bump the epoch (a Register
		// on a full table, a plain heartbeat watchdog, a pool that died
		// between reclaiming and waking) still has its closures cancelled
		// within the second. One wake-up a second per pool.
		_ = shm.FutexWait(p.board.epoch, e, watchRecheck)
	}
}

// watchRecheck bounds the cancel watcher's sleep.
const watchRecheck = time.Second

// cancelRuns cancels, with cause, the closures running here whose run
// matches.
func (p *Pool) cancelRuns(match func(*run) bool, cause error) {
	for _, r := range p.runs {
		r.mu.Lock()
		if r.state == runExecuting && !r.cancelled && match(r) {
			r.cancelled = true
			r.ctx.cancel(cause)
		}
		r.mu.Unlock()
	}
}

// worker claims passes, runs them and pushes their results to their
// submitters' reply rings. A worker killed anywhere in here loses nothing:
// the pass stays leased in the submit queue until a watchdog requeues it.
func (p *Pool) worker(r *run) {
	abandoned := false
	out := make([]byte, p.submit.MaxPayload())
	defer func() {
		// A closure that ends its goroutine with runtime.Goexit (as
		// t.FailNow does) neither returns nor panics: the worker unwinds
		// with its run still executing. Settle the pass as a failed one
		// and start a worker in its place.
		r.mu.Lock()
		goexit := r.state == runExecuting
		if goexit {
			r.state = runIdle
			r.ctx.cancel(nil)
		}
		if r.state == runAbandoned && !abandoned {
			// Stop abandoned the run (and gave back this worker's share
			// of wg), then the closure called Goexit: nothing to settle.
			abandoned = true
			p.late.Add(1)
		}
		lease, ref, recorded, msg := r.lease, r.ref, r.recorded, r.msg
		r.lease, r.msg = transport.Lease{}, nil
		r.mu.Unlock()
		if goexit {
			p.settleGoexit(lease, ref, recorded, msg)
			if p.claimCtx.Err() == nil {
				p.wg.Add(1)
				go p.worker(r)
			}
		}
		if !abandoned { // an abandoned worker's share of wg was Stop's to give back
			p.wg.Done()
		}
	}()
	// The closure reads its arguments from this copy, not from the slot:
	// an abandoned closure may still be reading after its lease was
	// released (the slot reused) and the queue unmapped.
	in := make([]byte, p.submit.MaxPayload())
	ringID := p.submit.ID()
	for p.claimCtx.Err() == nil {
		lease, err := p.submit.TryClaim()
		if errors.Is(err, transport.ErrEmpty) {
			// A take that finds a pass at its delivery limit poisons it
			// and goes on: answer it before waiting (see drainPoisoned).
			p.drainPoisoned()
			lease, err = p.submit.Claim(p.claimCtx)
		}
		if err != nil {
			if p.claimCtx.Err() != nil {
				return
			}
			// Corrupt queue memory: report through the queue's Scan; do
			// not spin on it.
			time.Sleep(p.cfg.BeatInterval)
			continue
		}
		ref, rerr := p.member.RecordLease(ringID, lease.Slot(), lease.Lap(), lease.Deliveries)
		if rerr != nil {
			p.leaseRecordErr.Add(1)
		}
		shm.CrashPoint(crashPassWorkerAfterClaim)
		msg := in[:copy(in, lease.Data())]
		m, derr := decodeSubmit(msg)
		if derr != nil && len(msg) < submitHeader || errors.Is(derr, ErrWireVersion) {
			// No reply address: nobody to answer. Ack it (running it again
			// cannot help) and count it.
			p.malformed.Add(1)
			p.finish(lease, ref, rerr == nil)
			continue
		}
		if !p.hb.Holds(m.reply) {
			// Its submitter has left (unregistered, or reclaimed on proof
			// of death): nobody awaits the result. Skip it unrun.
			p.orphaned.Add(1)
			p.finish(lease, ref, rerr == nil)
			continue
		}
		reply, err := p.replies.get(m.reply)
		if err != nil {
			p.unreachable(lease, ref, rerr == nil, m.reply)
			continue
		}
		if need := reply.MaxPayload(); need > len(out) {
			out = make([]byte, need)
		}
		res := out[:reply.MaxPayload()]
		var n int
		switch {
		case derr != nil:
			p.failed.Add(1)
			n = encodeResult(res, m.token, StatusMalformed, []byte(derr.Error()))
		case p.board.has(m.token):
			p.cancelled.Add(1)
			n = encodeResult(res, m.token, StatusCancelled, []byte("cancelled by its submitter before it ran"))
		default:
			var ok bool
			if n, ok = p.runPass(r, lease, ref, rerr == nil, msg, m, res); !ok {
				if r.stateIs(runAbandoned) {
					abandoned = true
				}
				return
			}
		}
		shm.CrashPoint(crashPassWorkerAfterExecute)
		p.deliver(lease, ref, rerr == nil, m.reply, reply, res[:n])
	}
}

func (r *run) stateIs(s runState) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == s
}

// runPass runs the closure of m with a context of its own (cancelled by
// Stop or by the submitter's request) and encodes its result into res.
// ok is false when the worker must exit: Stop abandoned the run, or gave
// up while it ran (the pass was handed back).
func (p *Pool) runPass(r *run, lease transport.Lease, ref heartbeat.LeaseRef, recorded bool, msg []byte, m submitMsg, res []byte) (n int, ok bool) {
	ctx := &passCtx{}
	r.mu.Lock()
	if p.finishCtx.Err() != nil {
		// Claimed as Stop gave up: Stop's sweep is past this worker or
		// about to find it idle. Do not start the closure.
		r.mu.Unlock()
		p.handBack(lease, ref, recorded)
		return 0, false
	}
	r.state, r.lease, r.ref, r.recorded, r.msg = runExecuting, lease, ref, recorded, msg
	r.token, r.reply, r.ctx, r.cancelled = m.token, m.reply, ctx, false
	if p.board.has(m.token) {
		// Cancelled between the look before and the watcher's scan. (Under
		// r.mu: once the run is executing, abandon may give back this
		// worker's share of wg and Stop unmap the board; it takes r.mu
		// first.)
		r.cancelled = true
		ctx.cancel(ErrCancelled)
	}
	r.mu.Unlock()
	n = p.execute(ctx, m, res)
	r.mu.Lock()
	ctx.cancel(nil) // a closure's context ends when it returns
	if r.state == runAbandoned {
		// Stop released the pass while the closure ran; another worker
		// runs it again. This result is late: drop it.
		r.mu.Unlock()
		p.late.Add(1)
		return 0, false
	}
	cancelled := r.cancelled
	r.state, r.lease, r.msg, r.ctx = runIdle, transport.Lease{}, nil, nil
	r.mu.Unlock()
	if p.finishCtx.Err() != nil {
		// The closure's context was cancelled while it ran: what it
		// returned may be that cancellation, not the pass's result. Hand
		// the pass back as Stop would have.
		p.late.Add(1)
		p.handBack(lease, ref, recorded)
		return 0, false
	}
	if cancelled && errors.Is(ctx.Err(), ErrSubmitterGone) {
		cancelled = false // deliver drops the result: the submitter has left
	}
	if cancelled {
		// Whatever the closure returned after its context was cancelled,
		// the submitter asked for no result (or has left, and deliver
		// drops it): answer that it was cancelled.
		p.cancelled.Add(1)
		n = encodeResult(res, m.token, StatusCancelled, []byte("cancelled by its submitter while it ran"))
	}
	return n, true
}

// poisonClaimer is a submit queue that leases its poisoned messages (the
// ring; a deque's poison is taken by tools only).
type poisonClaimer interface {
	ClaimPoisoned() (transport.Lease, error)
	Poisoned() uint64
	DeliveryLimit() int
}

// drainPoisoned answers every poisoned pass: one that reached the submit
// queue's delivery limit (its workers died, or stopping pools handed it
// back, that many times) is set aside by the queue, never to be claimed
// again, and its client would wait for ever. It is leased
// (ClaimPoisoned: a pool that dies here leaves an ordinary lease, requeued
// and poisoned again), answered with StatusPoisoned, and acked. Workers
// look when the queue's poison count has moved, before they wait for
// work; watchdog scans look every time.
func (p *Pool) drainPoisoned() {
	q, ok := p.submit.(poisonClaimer)
	if !ok {
		return
	}
	if n := q.Poisoned(); n == p.poisonSeen.Load() {
		return
	} else {
		p.poisonSeen.Store(n)
	}
	p.answerPoisoned(q)
}

func (p *Pool) answerPoisoned(q poisonClaimer) {
	var buf []byte
	for {
		lease, err := q.ClaimPoisoned()
		if err != nil {
			return
		}
		shm.CrashPoint(crashPassPoisonAfterClaim)
		if cap(buf) < len(lease.Data()) {
			buf = make([]byte, p.submit.MaxPayload())
		}
		msg := buf[:copy(buf[:cap(buf)], lease.Data())]
		m, derr := decodeSubmit(msg)
		if derr != nil && len(msg) < submitHeader || errors.Is(derr, ErrWireVersion) {
			p.malformed.Add(1)
			p.finish(lease, heartbeat.LeaseRef{}, false)
			continue
		}
		if !p.hb.Holds(m.reply) {
			p.orphaned.Add(1)
			p.finish(lease, heartbeat.LeaseRef{}, false)
			continue
		}
		reply, err := p.replies.get(m.reply)
		if err != nil {
			p.orphanedResults.Add(1) // nowhere to answer: dropping it is all there is to do
			p.finish(lease, heartbeat.LeaseRef{}, false)
			continue
		}
		p.poisoned.Add(1)
		res := make([]byte, reply.MaxPayload())
		n := encodeResult(res, m.token, StatusPoisoned, fmt.Appendf(nil, "delivered %d times without a result (the submit queue's limit is %d): its workers died or were stopped while running it", lease.Deliveries, q.DeliveryLimit()))
		p.deliver(lease, heartbeat.LeaseRef{}, false, m.reply, reply, res[:n])
	}
}

// deliver pushes a result to its submitter's reply ring and acks the pass.
// It never waits: a full reply ring belongs to a submitter that is slow,
// stopped or dead, and the workers serve the others meanwhile. A dead one
// (proven) loses the result, counted; a live one gets it once there is
// room (parking).
func (p *Pool) deliver(lease transport.Lease, ref heartbeat.LeaseRef, recorded bool, to heartbeat.Ticket, reply *transport.Ring, res []byte) {
	if !p.hb.Holds(to) {
		// The submitter left while its pass ran: nobody will read this.
		p.orphanedResults.Add(1)
		p.finish(lease, ref, recorded)
		return
	}
	err := reply.TryPush(res)
	switch {
	case err == nil:
		shm.CrashPoint(crashPassWorkerAfterResult)
		p.finish(lease, ref, recorded)
	case errors.Is(err, transport.ErrFull) && p.hb.Gone(to):
		p.orphanedResults.Add(1)
		p.finish(lease, ref, recorded)
	case errors.Is(err, transport.ErrFull):
		p.parked.Add(1)
		p.parking.add(parked{lease: lease, ref: ref, recorded: recorded, to: to, reply: reply, res: append([]byte(nil), res...)})
	default:
		// The reply ring is unusable from here (corrupt, detached):
		// another worker may do better.
		p.unreachable(lease, ref, recorded, to)
	}
}

// unreachable settles a pass whose reply ring cannot be used: dropped if
// its submitter is gone, handed back for another worker otherwise.
func (p *Pool) unreachable(lease transport.Lease, ref heartbeat.LeaseRef, recorded bool, to heartbeat.Ticket) {
	if p.hb.Gone(to) {
		p.orphanedResults.Add(1)
		p.finish(lease, ref, recorded)
		return
	}
	p.handBack(lease, ref, recorded)
}

// finish acks a settled pass and clears its lease record.
func (p *Pool) finish(lease transport.Lease, ref heartbeat.LeaseRef, recorded bool) {
	p.submit.Ack(lease)
	if recorded {
		p.member.ClearLease(ref)
	}
}

// settleGoexit answers a pass whose closure called runtime.Goexit with an
// error result, as a panic is answered (the submitter hears of it once),
// never blocking (the worker goroutine is going away).
func (p *Pool) settleGoexit(lease transport.Lease, ref heartbeat.LeaseRef, recorded bool, msg []byte) {
	p.executed.Add(1)
	p.failed.Add(1)
	m, err := decodeSubmit(msg)
	if err != nil || p.finishCtx.Err() != nil {
		p.handBack(lease, ref, recorded)
		return
	}
	reply, err := p.replies.get(m.reply)
	if err != nil {
		p.unreachable(lease, ref, recorded, m.reply)
		return
	}
	res := make([]byte, reply.MaxPayload())
	n := encodeResult(res, m.token, StatusError, []byte("closure called runtime.Goexit (t.FailNow?) instead of returning"))
	p.deliver(lease, ref, recorded, m.reply, reply, res[:n])
}

// handBack releases an unfinished pass to the submit queue for another
// worker and clears its lease record.
func (p *Pool) handBack(lease transport.Lease, ref heartbeat.LeaseRef, recorded bool) {
	if err := p.submit.Release(lease); errors.Is(err, transport.ErrFull) {
		// No room to queue it again: the lease is still ours. Retry
		// beside the workers (parking); Stop's close of the queue
		// releases whatever is still held then.
		p.parking.add(parked{lease: lease, ref: ref, recorded: recorded})
		return
	}
	p.released.Add(1)
	if recorded {
		p.member.ClearLease(ref)
	}
}

// abandon runs when Stop's context has ended (finishCtx is cancelled, so
// every running closure's context is): it releases the pass of every
// closure still running, and gives back its worker's share of wg so that
// Stop does not wait for the closure. The worker drops the result when the
// closure returns.
func (p *Pool) abandon() {
	for _, r := range p.runs {
		r.mu.Lock()
		if r.state == runExecuting {
			r.ctx.cancel(context.Canceled)
			r.state = runAbandoned
			p.handBack(r.lease, r.ref, r.recorded)
			r.lease = transport.Lease{}
			p.wg.Done()
		}
		r.mu.Unlock()
	}
}

// execute runs one decoded pass and writes its result message into out.
func (p *Pool) execute(ctx context.Context, m submitMsg, out []byte) int {
	fn, err := p.cfg.Registry.Lookup(m.closure)
	if err != nil {
		p.failed.Add(1)
		return encodeResult(out, m.token, StatusUnknownClosure, []byte(err.Error()))
	}
	res, err := runClosure(ctx, fn, m.args)
	p.executed.Add(1)
	switch {
	case err != nil:
		p.failed.Add(1)
		return encodeResult(out, m.token, StatusError, []byte(err.Error()))
	case len(res) > MaxResult(len(out)):
		p.failed.Add(1)
		msg := fmt.Sprintf("%v: %d bytes, the limit is %d", ErrResultTooLarge, len(res), MaxResult(len(out)))
		return encodeResult(out, m.token, StatusResultTooLarge, []byte(msg))
	}
	return encodeResult(out, m.token, StatusOK, res)
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

// Stats returns this pool's counters.
func (p *Pool) Stats() Stats {
	return Stats{
		Executed: p.executed.Load(), Failed: p.failed.Load(), Cancelled: p.cancelled.Load(),
		Orphaned: p.orphaned.Load(), OrphanedResults: p.orphanedResults.Load(), Malformed: p.malformed.Load(), Poisoned: p.poisoned.Load(),
		Parked: p.parked.Load(), Released: p.released.Load(), LateResults: p.late.Load(),
		WatchdogScans: p.scans.Load(), Reclaimed: p.reclaimed.Load(), LeaseRecordErr: p.leaseRecordErr.Load(),
	}
}

// Heartbeat returns the table this pool is registered in.
func (p *Pool) Heartbeat() *heartbeat.Table { return p.hb }

// Member returns this process's registration.
func (p *Pool) Member() *heartbeat.Member { return p.member }

// Stop ends the pool gracefully: workers stop claiming and passes in
// flight finish, until ctx ends. Then every running closure's context is
// cancelled, each unfinished pass (a closure still running, or a result
// parked for room in a full reply ring) is released back to the submit
// queue for another worker, and Stop returns without waiting for the
// closures: whatever an abandoned run returns later is dropped and counted
// (Stats.LateResults). A pass so released runs again elsewhere, so it can
// run twice, its first run cut short or not (at least once, as after a
// crash). Then the registration is removed and the files are closed (they
// stay). Stop closes Config.Events, if set: its subscriber receives what
// is queued, then heartbeat.ErrDisconnected. The error wraps ctx's if
// passes had to be released; it is nil otherwise, unless closing failed.
// Calls after the first return the first's result.
func (p *Pool) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.stopClaim()
		released := p.released.Load() // before this Stop
		done := make(chan struct{})
		go func() {
			p.wg.Wait()
			close(done)
		}()
		var cut error
		select {
		case <-done:
		case <-ctx.Done():
			p.finishCancel()
			p.abandon()
			<-done // workers not abandoned exit now: their claims end with claimCtx
		}
		// Results waiting for room in a full reply ring wait until ctx
		// ends too; then their passes go back to the queue.
		p.parking.stop(ctx)
		p.finishCancel()
		if n := p.released.Load() - released; n > 0 && ctx.Err() != nil {
			cut = fmt.Errorf("pass: stop: %d unfinished passes released for another worker: %w", n, ctx.Err())
		}
		p.stopping.Store(true)
		p.board.wake()
		p.watching.Wait()
		if p.cfg.Events != nil {
			// No scan runs any more: disconnect the subscriber, as
			// dropping the seed's scheduler does.
			p.cfg.Events.Close()
		}
		p.life.Lock()
		p.gone = true
		p.stopErr = errors.Join(cut, p.replies.close(), p.seat.close())
		p.life.Unlock()
	})
	return p.stopErr
}
