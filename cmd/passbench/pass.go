package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/sched/pass"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// `passbench pass` puts load on the Pass scheduler (sched/pass) end to end:
// submitter processes submit passes, worker processes (each a
// pass.Start with --threads worker goroutines) execute them, and the
// parent collects every result from the one result ring (only one process
// may collect there) and matches it to its pass by the submitter id and
// sequence number the pass carries. With --submitters 0 the parent
// submits too, from the collecting goroutine, keeping --inflight passes
// (default 1) in flight: with 1, a round trip through the scheduler that
// compares with `rtt`.
//
// A pass's arguments are a passbench message (see msg.go) of --payload
// bytes: submitter id, sequence number, send time, CRC-32C. The worker's
// closure checks the checksum (a bad one makes an error result) and
// returns the arguments; the parent checks the echo again. Latency is the
// parent's clock when it has the result minus the submitter's just before
// Submit: queueing in both rings included.

// Pass roles.
const (
	rolePassWorker = "worker"    // executes passes
	roleSubmitter  = "submitter" // submits passes

	roleSched = "sched" // the child role (PASSBENCH_ROLE) of both
)

// closureCheckEcho is the one closure passbench registers.
const closureCheckEcho = 1

// kindPass is the kind of a pass run.
const kindPass = "pass"

// Defaults and limits of `pass`.
const (
	defaultPasses      = 200_000
	defaultPassPayload = 32 // with the 14-byte pass header, one 64-byte slot
	maxPassWorkers     = 64
	maxPassThreads     = 64
)

// passSpec is one `passbench pass` run.
type passSpec struct {
	Workers    int // worker processes
	Threads    int // worker goroutines in each
	Submitters int // submitter processes; 0: the parent submits
	Passes     int64
	Duration   time.Duration
	Payload    int // argument bytes
	Capacity   int // slots of each ring
	Inflight   int // per submitter, passes submitted and not yet collected; 0: no limit
	Chaos      int
	Seed       int64
	SeedSet    bool
	Timeout    time.Duration

	corrupt *corruptAt // tests only: one submitter damages one pass
	u       *ui
}

// PassReport is what is particular to a pass run.
type PassReport struct {
	Workers      int    `json:"workers"`
	Threads      int    `json:"threads"`
	Submitters   int    `json:"submitters"`    // processes; 0: the parent submitted, from its collecting goroutine
	Inflight     int    `json:"inflight"`      // 0: no limit
	SlotBytes    int    `json:"slot_bytes"`    // of both rings
	Executed     uint64 `json:"executed"`      // passes the workers that finished executed (killed workers' counts are lost)
	Failed       uint64 `json:"failed"`        // error results they made
	Backpressure uint64 `json:"backpressure"`  // results that waited for room in the result ring
	Released     uint64 `json:"released"`      // passes handed back unfinished at their Stop
	LateResults  uint64 `json:"late_results"`  // results of runs abandoned at their Stop, dropped
	Requeued     uint64 `json:"requeued"`      // passes of dead workers delivered again
	LeftInRing   int    `json:"left_in_ring"`  // passes still in the submit ring at the end (copies whose result had already come)
	StoppedEarly bool   `json:"stopped_early"` // results were still missing when both rings went quiet
}

func (s *passSpec) check() error {
	switch {
	case s.Workers < 1 || s.Workers > maxPassWorkers:
		return cliutil.Usage("--workers must be in [1, %d], got %d", maxPassWorkers, s.Workers)
	case s.Threads < 1 || s.Threads > maxPassThreads:
		return cliutil.Usage("--threads must be in [1, %d], got %d", maxPassThreads, s.Threads)
	case s.Submitters < 0 || s.Submitters > maxWorkers:
		return cliutil.Usage("--submitters must be in [0, %d], got %d", maxWorkers, s.Submitters)
	case s.Passes < 0 || s.Duration < 0:
		return cliutil.Usage("--passes and --duration must not be negative")
	case s.Passes > 0 && s.Duration > 0:
		return cliutil.Usage("give --passes or --duration, not both")
	case s.Passes > int64(max(1, s.Submitters))*maxSeq:
		return cliutil.Usage("--passes must stay below %d per submitter", int64(maxSeq))
	case s.Payload < minPayload || s.Payload > maxPayload:
		return cliutil.Usage("--payload must be in [%d, %d] bytes, got %d", minPayload, maxPayload, s.Payload)
	case s.Capacity < 2 || s.Capacity > 1<<20 || s.Capacity&(s.Capacity-1) != 0:
		return cliutil.Usage("--capacity must be a power of two in [2, %d], got %d", 1<<20, s.Capacity)
	case s.Inflight < 0:
		return cliutil.Usage("--inflight must not be negative, got %d", s.Inflight)
	case s.Chaos < 0 || s.Chaos > maxChaos:
		return cliutil.Usage("--chaos must be in [0, %d], got %d", maxChaos, s.Chaos)
	case s.Timeout <= 0:
		return cliutil.Usage("--timeout must be positive, got %v", s.Timeout)
	}
	if s.Submitters == 0 {
		// Passes in flight wait in the two rings; more than they hold
		// would block the parent's Submit with nobody collecting.
		if s.Inflight == 0 {
			s.Inflight = 1
		}
		if s.Inflight > s.Capacity {
			return cliutil.Usage("with --submitters 0, --inflight must be at most --capacity (%d), got %d", s.Capacity, s.Inflight)
		}
	}
	if s.Passes == 0 && s.Duration == 0 {
		s.Passes = defaultPasses
	}
	return nil
}

// perSubmitter splits the passes among the submitters (nil: timed run).
func (s *passSpec) perSubmitter() []int64 {
	if s.Passes == 0 {
		return nil
	}
	n := max(1, s.Submitters) // the parent is submitter 0 when there are none
	per := make([]int64, n)
	for i := range per {
		per[i] = s.Passes / int64(n)
		if int64(i) < s.Passes%int64(n) {
			per[i]++
		}
	}
	return per
}

// passJob is what a pass worker or submitter process gets.
type passJob struct {
	Role      string               `json:"role"`
	Index     int                  `json:"index"` // line in the control file
	ID        int                  `json:"id"`
	Lines     int                  `json:"lines"` // in the control file
	Control   string               `json:"control"`
	Submit    string               `json:"submit"`
	Result    string               `json:"result"`
	Heartbeat string               `json:"heartbeat"`
	Ring      transport.RingConfig `json:"ring"`
	HB        heartbeat.Config     `json:"hb"`
	Threads   int                  `json:"threads,omitempty"`
	Payload   int                  `json:"payload"`
	Per       []int64              `json:"per,omitempty"` // passes each submitter submits; nil: timed
	Inflight  int                  `json:"inflight,omitempty"`
	Corrupt   *corruptAt           `json:"corrupt,omitempty"`
}

// passConfig is the scheduler configuration every process of the run
// uses: the same geometry everywhere, or opening a file fails.
func (j *passJob) passConfig(workers int, reg *pass.Registry, label string) pass.Config {
	return pass.Config{SubmitPath: j.Submit, ResultPath: j.Result, HeartbeatPath: j.Heartbeat,
		Ring: j.Ring, Heartbeat: j.HB, Workers: workers, Registry: reg, Label: label}
}

// checkEcho is the closure: it verifies the pass's checksum and returns
// the arguments unchanged.
func checkEcho(_ context.Context, args []byte) ([]byte, error) {
	if _, err := parseMsg(args, len(args)); err != nil {
		return nil, err
	}
	return args, nil
}

// passChildMain runs a pass worker or submitter process.
func passChildMain(jobJSON string) error {
	var j passJob
	if err := json.Unmarshal([]byte(jobJSON), &j); err != nil {
		return fmt.Errorf("bad job: %w", err)
	}
	ctl, err := openControl(j.Control, j.Lines)
	if err != nil {
		return err
	}
	defer ctl.close()
	var rep *report
	switch j.Role {
	case rolePassWorker:
		rep, err = passWorkerMain(&j, ctl)
	case roleSubmitter:
		rep, err = submitterMain(&j, ctl)
	default:
		err = fmt.Errorf("unknown role %q", j.Role)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// passWorkerMain executes passes until the parent says stop, then stops
// the scheduler gracefully (passes in flight finish) and reports.
func passWorkerMain(j *passJob, ctl *control) (*report, error) {
	reg := pass.NewRegistry()
	reg.Register(closureCheckEcho, checkEcho)
	s, err := pass.Start(j.passConfig(j.Threads, reg, fmt.Sprintf("pb-worker-%d", j.ID)))
	if err != nil {
		return nil, err
	}
	ctl.markReady(j.Index)
	err = ctl.awaitStop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = errors.Join(err, withoutCut(s.Stop(ctx), ctx))
	st := s.Stats()
	return &report{Role: rolePassWorker, ID: j.ID, Pass: &st}, err
}

// withoutCut drops from Stop's error the part that says its context ended
// with passes unfinished: those were released for another worker and are
// reported (PassReport.Released), not a failure of the worker.
func withoutCut(err error, ctx context.Context) error {
	if ctx.Err() == nil || err == nil {
		return err
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var kept []error
	for _, e := range errs {
		if !errors.Is(e, ctx.Err()) {
			kept = append(kept, e)
		}
	}
	return errors.Join(kept...)
}

// submitterMain submits this submitter's passes, each stamped just before
// Submit, keeping at most Inflight uncollected if that is set.
func submitterMain(j *passJob, ctl *control) (*report, error) {
	r, err := transport.OpenRing(j.Submit)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	sub := pass.NewSubmitter(r)
	ctl.markReady(j.Index)
	ctx := context.Background()
	_, deadline, err := ctl.awaitGo(ctx)
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	line := ctl.line(j.Index)
	msg := newMsg(j.Payload, uint32(j.ID))
	limit := uint64(maxSeq)
	if j.Per != nil {
		limit = uint64(j.Per[j.ID])
	}
	corruptSeq := uint64(math.MaxUint64)
	if c := j.Corrupt; c != nil && c.Producer == j.ID {
		corruptSeq = c.Seq
	}
	rep := &report{Role: roleSubmitter, ID: j.ID}
	var seq, gone uint64
	for ; seq < limit; seq++ {
		if j.Inflight > 0 {
			awaitWindow(line, seq, uint64(j.Inflight), &gone)
		}
		now := shm.MonoNow()
		if deadline != 0 && now >= deadline {
			break
		}
		if seq == 0 {
			rep.First = now
		}
		stamp(msg, seq, now)
		if seq == corruptSeq {
			msg[offSeq] ^= 0x10
		}
		if _, err := sub.Submit(ctx, closureCheckEcho, msg); err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
	}
	rep.Sent, rep.Last = int64(seq), shm.MonoNow()
	return rep, nil
}

// Waiting for room in the window: re-check for a while, then yield, then
// sleep on the line's done word, which the parent bumps (and wakes when a
// sleeper says so) each time it collects one of this submitter's passes.
// A pass whose result never comes, or comes as an error the parent cannot
// credit to anyone (a corrupt pass), would close the window for good: after
// windowGiveUp without any result the submitter goes on regardless (the
// run reports the pass as lost or corrupt).
const (
	windowSpin   = 20 * time.Microsecond
	windowYield  = 50 * time.Microsecond
	windowGiveUp = time.Second
)

// awaitWindow waits until fewer than window of the sent passes are
// uncollected, not counting *gone, the passes given up on; if no result
// comes for windowGiveUp it gives up on one more.
func awaitWindow(l ctlLineWords, sent, window uint64, gone *uint64) {
	var began int64
	done := l.progress.Load()
	for {
		if sent-done-min(*gone, sent-done) < window {
			return
		}
		now := shm.MonoNow()
		if began == 0 {
			began = now
		}
		switch waited := time.Duration(now - began); {
		case waited < windowSpin:
			pause(pollPause)
		case waited < windowYield:
			runtime.Gosched()
		case waited > windowGiveUp:
			*gone++
			return
		default:
			v := l.done.Load()
			l.waiter.Store(1)
			if d := l.progress.Load(); sent-d-min(*gone, sent-d) < window {
				return
			}
			_ = shm.FutexWait(l.done, v, pollInterval)
		}
		if d := l.progress.Load(); d != done {
			done, began = d, 0 // a result came: wait afresh
		}
	}
}

// collected tells submitter i's line that one more of its passes is in.
func collected(l ctlLineWords, wake bool) {
	n := l.progress.Add(1)
	if wake {
		l.done.Store(uint32(n))
		if l.waiter.Load() != 0 && l.waiter.Swap(0) != 0 {
			shm.FutexWake(l.done, 1)
		}
	}
}

// Why a collection ended early.
var (
	errAllIn = errors.New("every result is in")
	errQuiet = errors.New("results missing, and both rings are quiet")
)

// quietFor is how long the parent waits, once every pass is submitted and
// both rings hold nothing, before it calls the missing results lost.
const quietFor = 200 * time.Millisecond

// runPass performs one pass run.
func runPass(ctx context.Context, s passSpec, u *ui) (res Result, err error) {
	if err := s.check(); err != nil {
		return Result{}, err
	}
	W, S := s.Workers, s.Submitters
	f, err := newFleetSpares(ctx, nil, W+S, s.Chaos, s.Timeout)
	if err != nil {
		return Result{}, err
	}
	defer func() { err = errors.Join(err, f.stop()) }()
	ctx = f.ctx
	f.keepLinked = s.Chaos > 0

	base := passJob{Lines: f.ctl.n, Control: f.ctl.path, Payload: s.Payload, Per: s.perSubmitter(),
		Inflight: s.Inflight, Threads: s.Threads, Corrupt: s.corrupt,
		Ring: transport.RingConfig{
			Capacity:     uint64(s.Capacity),
			SlotSize:     transport.SlotSizeFor(s.Payload + submitHeaderBytes),
			Participants: uint32(max(64, W+S+s.Chaos+4)),
		},
		HB: heartbeat.Config{Capacity: max(64, W+s.Chaos+4), Leases: max(16, s.Threads)}}
	if s.Chaos > 0 {
		base.Ring.DeliveryLimit = leaseDeliveryLimit
	}
	for _, file := range []struct {
		path *string
		what string
	}{{&base.Submit, "submit"}, {&base.Result, "result"}, {&base.Heartbeat, "hb"}} {
		name, err := shmName(file.what)
		if err != nil {
			return Result{}, err
		}
		*file.path = shm.Resolve(name)
		// Registered before they exist: whatever Start creates, stop
		// removes, even if Start fails half-way.
		f.addFile(&linkedFile{path: *file.path, missingOK: true})
	}
	// The parent's scheduler has no workers: it collects, and under
	// --chaos its watchdog reclaims killed workers every watchEvery.
	cfg := base.passConfig(0, nil, "passbench")
	cfg.Watchdog, cfg.WatchdogInterval = s.Chaos > 0, watchEvery
	ps, err := pass.Start(cfg)
	if err != nil {
		return Result{}, err
	}
	stopSched := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return ps.Stop(sctx)
	}
	f.onStop(func() { stopSched() })
	// Read-only views of the rings, to see whether they have gone quiet.
	var views []*transport.Ring
	var monitors sync.WaitGroup
	f.onStop(func() {
		monitors.Wait()
		for _, v := range views {
			v.Close()
		}
	})
	for _, p := range []string{base.Submit, base.Result} {
		v, err := transport.OpenRingReadOnly(p)
		if err != nil {
			return Result{}, err
		}
		views = append(views, v)
	}

	for i := range W {
		j := base
		j.Role, j.Index, j.ID = rolePassWorker, i, i
		if err := f.spawnChild(rolePassWorker, j.ID, j.Index, roleSched, j); err != nil {
			return Result{}, err
		}
	}
	for i := range S {
		j := base
		j.Role, j.Index, j.ID = roleSubmitter, W+i, i
		if err := f.spawnChild(roleSubmitter, j.ID, j.Index, roleSched, j); err != nil {
			return Result{}, err
		}
	}
	if err := f.awaitReady(); err != nil {
		return Result{}, err
	}

	c := &passCollector{s: &s, ctl: f.ctl, W: W, seen: newSeenSet(max(1, S), base.Per), rec: newRecorder()}
	if base.Per != nil {
		c.total.Store(s.Passes)
		c.totalKnown.Store(true)
	}
	if S == 0 {
		c.self = &selfSubmitter{sub: ps.Submitter(), msg: newMsg(s.Payload, 0), limit: maxSeq, window: uint64(s.Inflight),
			corruptSeq: math.MaxUint64}
		if s.corrupt != nil && s.corrupt.Producer == 0 {
			c.self.corruptSeq = s.corrupt.Seq
		}
		if base.Per != nil {
			c.self.limit = uint64(base.Per[0])
		}
	}
	stopBar := u.track("pass", s.Passes, s.Duration, c.received.Load)
	defer stopBar()
	var plan *chaosPlan
	if s.Chaos > 0 {
		seed := chaosSeed(s.Seed, s.SeedSet)
		s.u.note("chaos: seed %d (repeat the kill plan with --seed %d)", seed, seed)
		nextID, nextIdx := W, W+S
		replace := func(ctx context.Context, _ *worker) error {
			j := base
			j.Role, j.Index, j.ID = rolePassWorker, nextIdx, nextID
			nextID++
			nextIdx++
			if err := f.spawnChild(rolePassWorker, j.ID, j.Index, roleSched, j); err != nil {
				return err
			}
			return f.awaitLines(func() bool { return f.ctl.isReady(j.Index) })
		}
		plan = newChaosPlan(s.Chaos, seed, rolePassWorker, s.Passes, s.Duration, c.received.Load, replace)
	}

	collectCtx, stopCollect := context.WithCancelCause(ctx)
	defer stopCollect(nil)
	f.ctl.begin(s.Duration)
	if plan != nil {
		plan.start(ctx, f)
		f.onStop(func() { plan.finish() })
	}
	var subs []*report
	if c.self != nil {
		_, c.self.deadline, _ = f.ctl.awaitGo(ctx) // said already: returns at once
	} else {
		monitors.Add(1)
		go func() { // learns the total once every submitter is done
			defer monitors.Done()
			reps, err := f.wait(roleSubmitter)
			if err != nil {
				return // the fleet has failed: ctx ends the collection
			}
			subs = reps
			var n int64
			for _, r := range reps {
				n += r.Sent
			}
			c.total.Store(n)
			c.totalKnown.Store(true)
			c.submitted.Store(true)
			if c.distinct.Load() >= n {
				stopCollect(errAllIn)
			}
		}()
	}
	monitors.Add(1)
	go func() { // ends the collection if results are missing and nothing moves
		defer monitors.Done()
		c.watchQuiet(collectCtx, views, stopCollect)
	}()
	if c.self != nil {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	err = c.collect(collectCtx, ps.Collector())
	stopCollect(nil)
	monitors.Wait()
	if c.self != nil {
		subs = []*report{{Role: roleSubmitter, Sent: int64(c.self.seq), First: c.self.first}}
	}
	if err != nil {
		return Result{}, fmt.Errorf("collecting results: %w", f.settleErr(err))
	}
	killed := 0
	if plan != nil {
		if err := plan.finish(); err != nil {
			return Result{}, fmt.Errorf("chaos: %w (%v)", err, f.why())
		}
		killed = plan.killed()
	}
	if err := f.detachAll(); err != nil {
		return Result{}, err
	}
	f.ctl.stopServing()
	workers, err := f.wait(rolePassWorker)
	if err != nil {
		return Result{}, err
	}
	// Results of copies executed after the first result came (a worker
	// killed between pushing a result and acking its pass).
	col := ps.Collector()
	for {
		r, err := col.TryRecv()
		if errors.Is(err, transport.ErrEmpty) {
			break
		}
		c.take(r, err, shm.MonoNow())
	}
	submitLeft := views[0].Scan()
	requeued := views[0].Counters().Requeued
	stats := ps.Stats()
	if err := stopSched(); err != nil {
		return Result{}, err
	}

	res = c.result(subs)
	res.Kind, res.Transport, res.Mode = kindPass, "pass", modeBlock
	res.Producers, res.Consumers, res.PayloadBytes, res.Capacity, res.Killed = S, W, s.Payload, s.Capacity, killed
	pr := &PassReport{Workers: W, Threads: s.Threads, Submitters: S, Inflight: s.Inflight,
		SlotBytes: int(base.Ring.SlotSize), Requeued: requeued, StoppedEarly: c.quiet,
		LeftInRing: len(submitLeft.Slots)}
	for _, w := range workers {
		if p := w.Pass; p != nil {
			pr.Executed += p.Executed
			pr.Failed += p.Failed
			pr.Backpressure += p.Backpressure
			pr.Released += p.Released
			pr.LateResults += p.LateResults
		}
	}
	res.Pass = pr
	if plan != nil {
		res.Chaos = plan.report()
		res.Chaos.WatchdogScans, res.Chaos.Reclaimed = int(stats.WatchdogScans), int(stats.Reclaimed)
	}
	return res, nil
}

// submitHeaderBytes is the pass wire format's submit header (package pass's
// submitHeader): MaxArgs(n) = n - 14.
const submitHeaderBytes = 14

// passCollector is the parent's side of a pass run: it takes every
// result, matches it to its pass and keeps the counts.
type passCollector struct {
	s    *passSpec
	ctl  *control
	W    int // submitter i's control line is W+i
	seen *seenSet
	rec  *recorder

	self *selfSubmitter // --submitters 0

	received   atomic.Int64 // results, copies included (the chaos plan's progress)
	distinct   atomic.Int64
	total      atomic.Int64 // passes submitted, once totalKnown
	totalKnown atomic.Bool
	submitted  atomic.Bool // every submitter is done

	dup, corrupt int64
	why          string
	last         int64 // when the last new result came
	quiet        bool  // ended by watchQuiet
}

// selfSubmitter is the parent submitting (--submitters 0): before each
// receive it tops the passes in flight up to window.
type selfSubmitter struct {
	sub      *pass.Submitter
	msg      []byte
	seq      uint64 // passes submitted
	limit    uint64
	window   uint64
	deadline int64 // of a timed run, or 0
	first    int64

	corruptSeq uint64 // tests only
}

// fill submits passes while fewer than window are uncollected (a corrupt
// result counts as collected: it cannot be credited to a pass); once it
// has submitted its last, the collector knows the total.
func (p *selfSubmitter) fill(ctx context.Context, c *passCollector) error {
	for p.seq < p.limit && p.seq-uint64(c.distinct.Load()+c.corrupt) < p.window {
		now := shm.MonoNow()
		if p.deadline != 0 && now >= p.deadline {
			p.limit = p.seq
			break
		}
		if p.seq == 0 {
			p.first = now
		}
		stamp(p.msg, p.seq, now)
		if p.seq == p.corruptSeq {
			p.msg[offSeq] ^= 0x10
		}
		if _, err := p.sub.Submit(ctx, closureCheckEcho, p.msg); err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		p.seq++
	}
	if p.seq >= p.limit && !c.submitted.Load() {
		c.total.Store(int64(p.seq))
		c.totalKnown.Store(true)
		c.submitted.Store(true)
	}
	return nil
}

// collect receives results until every pass has one, or ctx ends.
func (c *passCollector) collect(ctx context.Context, col *pass.Collector) error {
	for {
		if c.self != nil {
			if err := c.self.fill(ctx, c); err != nil {
				return err
			}
		}
		if c.totalKnown.Load() && c.distinct.Load() >= c.total.Load() {
			return nil
		}
		r, err := col.Recv(ctx)
		now := shm.MonoNow()
		if err != nil && ctx.Err() != nil {
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errAllIn):
				return nil
			case errors.Is(cause, errQuiet):
				c.quiet = true
				return nil
			default:
				return cause
			}
		}
		if err != nil && !errors.Is(err, pass.ErrMalformed) {
			return err
		}
		c.take(r, err, now)
	}
}

// take accounts for one result received at now.
func (c *passCollector) take(r pass.Result, err error, now int64) {
	c.received.Add(1)
	if err == nil {
		err = r.Err()
	}
	var h msgHeaderFields
	if err == nil {
		h, err = parseMsg(r.Data, c.s.Payload)
	}
	again := false
	if err == nil {
		if again = c.seen.has(h.producer, h.seq); !again && !c.seen.add(h.producer, h.seq) {
			err = fmt.Errorf("submitter %d sequence %d out of range", h.producer, h.seq)
		}
	}
	switch {
	case err != nil:
		if c.corrupt == 0 {
			c.why = err.Error()
		}
		c.corrupt++
	case again:
		c.dup++
	default:
		c.rec.record(now - h.sent)
		c.last = now
		if c.self == nil {
			collected(c.ctl.line(c.W+int(h.producer)), c.s.Inflight > 0)
		}
		c.distinct.Add(1)
	}
}

// watchQuiet stops the collection, once every pass is submitted (or
// when the parent submits, which may be waiting for a result itself), if
// results are still missing, nothing has come for quietFor, and neither
// ring holds anything (poison aside): no result can come any more.
func (c *passCollector) watchQuiet(ctx context.Context, views []*transport.Ring, stop context.CancelCauseFunc) {
	t := time.NewTicker(quietFor / 4)
	defer t.Stop()
	last, since := int64(-1), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n := c.received.Load()
			if n != last {
				last, since = n, now
				continue
			}
			// The parent submitting itself may wait for a result that
			// will not come before it has submitted its last pass.
			if (!c.submitted.Load() && c.self == nil) || now.Sub(since) < quietFor {
				continue
			}
			if ringsQuiet(views) {
				stop(errQuiet)
				return
			}
		}
	}
}

// ringsQuiet reports whether every slot of the rings is free (or poison).
func ringsQuiet(views []*transport.Ring) bool {
	for _, v := range views {
		for _, sl := range v.Scan().Slots {
			if sl.Problem != transport.SlotPoison {
				return false
			}
		}
	}
	return true
}

// result is the run's Result from what was collected.
func (c *passCollector) result(subs []*report) Result {
	var res Result
	first := int64(0)
	for _, s := range subs {
		res.Messages += s.Sent
		if s.Sent > 0 && (first == 0 || s.First < first) {
			first = s.First
		}
	}
	distinct := c.distinct.Load()
	res.Lost = res.Messages - distinct
	res.Duplicated, res.Corrupt, res.why = c.dup, c.corrupt, c.why
	if first != 0 && c.last > first {
		res.Seconds = float64(c.last-first) / 1e9
		res.MsgsPerSec = float64(distinct) / res.Seconds
	}
	c.rec.fill(&res)
	return res
}
