package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// runSpec is one measured throughput run (`passbench run`).
type runSpec struct {
	Transport string
	Mode      string // "" for the transport's default
	Producers int
	Consumers int
	Messages  int64         // in all; 0 for a timed run
	Duration  time.Duration // producers stop after this long; 0 for a counted run
	Payload   int
	Capacity  int
	SlotSize  int    // ring and deque only; 0 for the smallest that fits
	Record    string // directory for the consumers' lists of what they received
	Timeout   time.Duration
	Lease     bool  // consumers lease (Claim/Ack) under a watchdog; ring and deque only
	Batch     int   // ring only: workers send and receive with batch calls of this many (0, 1: one at a time)
	Loan      bool  // ring only: producers write each message into a loan in place
	Chaos     int   // consumers to kill during the run (implies Lease)
	Seed      int64 // of the kill plan
	SeedSet   bool  // Seed was given; else a fresh one is drawn

	corrupt *corruptAt // tests only: one producer damages one message
	chaos   chaosAgent // tests only: kills workers as if they died
	u       *ui        // where to announce the chaos seed (may be nil)
}

// Limits of the command line.
const (
	maxWorkers     = 256 // producers, and consumers
	defaultRunMsgs = 1_000_000
)

// check validates the spec and fills in defaults; errors are usage errors.
func (s *runSpec) check() (*transportInfo, error) {
	tr, err := lookupTransport(s.Transport)
	if err != nil {
		return nil, usageErr(err)
	}
	if !tr.Throughput {
		return nil, cliutil.Usage("transport %s measures round trips only (use rtt); run takes %v", tr.Name, transportNames(canRun))
	}
	if s.Mode, err = tr.mode(s.Mode); err != nil {
		return nil, usageErr(err)
	}
	switch {
	case s.Producers < 1 || s.Producers > maxWorkers:
		return nil, cliutil.Usage("--producers must be in [1, %d], got %d", maxWorkers, s.Producers)
	case s.Consumers < 1 || s.Consumers > maxWorkers:
		return nil, cliutil.Usage("--consumers must be in [1, %d], got %d", maxWorkers, s.Consumers)
	case s.Messages < 0 || s.Duration < 0:
		return nil, cliutil.Usage("--messages and --duration must not be negative")
	case s.Messages > 0 && s.Duration > 0:
		return nil, cliutil.Usage("give --messages or --duration, not both")
	case s.Messages > int64(s.Producers)*maxSeq:
		return nil, cliutil.Usage("--messages must stay below %d per producer", int64(maxSeq))
	case s.Timeout <= 0:
		return nil, cliutil.Usage("--timeout must be positive, got %v", s.Timeout)
	case s.Chaos < 0 || s.Chaos > maxChaos:
		return nil, cliutil.Usage("--chaos must be in [0, %d], got %d", maxChaos, s.Chaos)
	}
	if s.Chaos > 0 {
		s.Lease = true
	}
	if tr.OneProducer && s.Producers != 1 {
		return nil, cliutil.Usage("transport %s has one producer (its owner), got --producers %d", tr.Name, s.Producers)
	}
	if s.Lease {
		switch {
		case !tr.Leases:
			return nil, cliutil.Usage("--chaos and --lease need the ring or the deque (consumers lease messages with Claim and Ack); transport %s cannot", tr.Name)
		case s.Record != "":
			return nil, cliutil.Usage("--record does not go with --chaos or --lease")
		}
	}
	if err := s.checkBatchLoan(tr); err != nil {
		return nil, err
	}
	if s.Messages == 0 && s.Duration == 0 {
		s.Messages = defaultRunMsgs
	}
	if s.Lease && s.Messages > int64(s.Producers)*maxLeasedSeq {
		return nil, cliutil.Usage("with --chaos or --lease, --messages must stay below %d per producer", maxLeasedSeq)
	}
	if err := checkLane(tr, s.Payload, s.Capacity, s.SlotSize); err != nil {
		return nil, err
	}
	return tr, nil
}

// checkLane validates what a lane is made of.
func checkLane(tr *transportInfo, payload, capacity, slotSize int) error {
	switch {
	case payload < minPayload || payload > maxPayload:
		return cliutil.Usage("--payload must be in [%d, %d] bytes, got %d", minPayload, maxPayload, payload)
	case capacity < 1 || capacity > 1<<24:
		return cliutil.Usage("--capacity must be in [1, %d], got %d", 1<<24, capacity)
	case tr.Slotted && capacity&(capacity-1) != 0:
		return cliutil.Usage("--capacity of a %s must be a power of two, got %d", tr.Name, capacity)
	case slotSize != 0 && !tr.Slotted:
		return cliutil.Usage("--slot-size applies to the ring and the deque only")
	case slotSize != 0 && (slotSize%64 != 0 || slotSize < int(transport.SlotSizeFor(payload))):
		return cliutil.Usage("--slot-size must be a multiple of 64 of at least %d for a %d-byte payload, got %d",
			transport.SlotSizeFor(payload), payload, slotSize)
	case tr.Name == bareTransport && (max(slotSize, int(transport.SlotSizeFor(payload))) > bareMaxSlot || capacity < 2):
		return cliutil.Usage("the reference ring takes slots of at most %d bytes (payloads up to %d) and at least 2 of them",
			bareMaxSlot, bareMaxSlot-layout.RingSlotWordSize)
	}
	return nil
}

// perProducer splits the messages among the producers (nil: timed run).
func (s *runSpec) perProducer() []int64 {
	if s.Messages == 0 {
		return nil
	}
	per := make([]int64, s.Producers)
	for p := range per {
		per[p] = s.Messages / int64(s.Producers)
		if int64(p) < s.Messages%int64(s.Producers) {
			per[p]++
		}
	}
	return per
}

// runThroughput performs one run: P producers and C consumers (processes,
// or goroutines for chan) pass messages through one lane; the parent starts
// them together, waits for the producers, sends one end marker per
// consumer (one at a time with batches: end_markers.go), waits for the
// consumers, and merges what they report.
//
// A leased run (--lease, --chaos) adds a heartbeat table and a shared
// bitmap, and a watchdog in the parent; with --chaos, the files stay
// linked until the last replacement consumer has opened them, and before
// the end markers go the parent makes sure every lease of a killed
// consumer is back in the ring, ahead of them.
func runThroughput(ctx context.Context, s runSpec, u *ui) (res Result, err error) {
	tr, err := s.check()
	if err != nil {
		return Result{}, err
	}
	if s.Record != "" {
		if err := os.MkdirAll(s.Record, 0o755); err != nil {
			return Result{}, err
		}
	}
	f, err := newFleetSpares(ctx, tr, s.Producers+s.Consumers, s.Chaos, s.Timeout)
	if err != nil {
		return Result{}, err
	}
	defer func() { err = errors.Join(err, f.stop()) }()
	ctx = f.ctx
	f.keepLinked = s.Chaos > 0

	cfg := laneConfig{Transport: tr.Name, Mode: s.Mode, Payload: s.Payload, Capacity: s.Capacity,
		SlotSize: s.SlotSize, Participants: s.Producers + s.Consumers + s.Chaos + 2, Batch: s.Batch, Loan: s.Loan}
	if s.Lease {
		cfg.DeliveryLimit = leaseDeliveryLimit
	}
	ln, err := f.newLane(cfg)
	if err != nil {
		return Result{}, err
	}
	marker, err := ln.open(ctx, true) // the parent's own end, for the end markers
	if err != nil {
		return Result{}, err
	}
	base := job{Lane: cfg, Producers: s.Producers, PerProducer: s.perProducer(), Corrupt: s.corrupt}
	var lr *leasedRun
	if s.Lease {
		if lr, err = newLeasedRun(f, &base, ln, s); err != nil {
			return Result{}, err
		}
		f.onStop(lr.watch.stop)
	}
	for i := range s.Producers {
		j := base
		j.Role, j.Index, j.ID = roleProducer, i, i
		if err := f.spawn(j, ln, nil); err != nil {
			return Result{}, err
		}
	}
	for i := range s.Consumers {
		j := base
		j.Role, j.Index, j.ID, j.LatSlot = roleConsumer, s.Producers+i, i, i
		if s.Record != "" {
			j.Record = filepath.Join(s.Record, fmt.Sprintf("consumer-%d.txt", i))
		}
		if err := f.spawn(j, nil, ln); err != nil {
			return Result{}, err
		}
	}
	if err := f.awaitReady(); err != nil {
		return Result{}, err
	}

	stopBar := u.track(fmt.Sprintf("%s/%s", tr.Name, s.Mode), "msgs", s.Messages, s.Duration, f.ctl.progress)
	defer stopBar()
	chaos := s.chaos
	var plan *chaosPlan
	if s.Chaos > 0 {
		plan = lr.chaosPlan(s)
		chaos = plan
	}
	if lr != nil {
		lr.watch.start()
	}
	f.ctl.begin(s.Duration)
	if chaos != nil {
		chaos.start(ctx, f)
		f.onStop(func() { chaos.finish() })
	}
	prods, err := f.wait(roleProducer)
	if err != nil {
		return Result{}, err
	}
	killed := 0
	if chaos != nil {
		if err := chaos.finish(); err != nil {
			return Result{}, fmt.Errorf("chaos: %w (%v)", err, f.why())
		}
		killed = chaos.killed()
	}
	if lr != nil {
		// Every replacement has its files open: unlink them now. Then
		// put every lease of a killed consumer back before the end
		// markers, which would otherwise overtake them.
		if err := f.detachAll(); err != nil {
			return Result{}, err
		}
		lr.watch.stop()
		if err := lr.watch.settle(ctx); err != nil {
			return Result{}, err
		}
	}
	if err := sendEndMarkers(f, marker, endMsg(s.Payload), s.Consumers, s.Batch > 1); err != nil {
		return Result{}, err
	}
	cons, err := f.wait(roleConsumer)
	if err != nil {
		return Result{}, err
	}
	stopBar()

	if lr != nil {
		res = lr.tally(prods, cons)
	} else {
		res = tally(prods, cons)
	}
	res.Kind, res.Transport, res.Mode = kindThroughput, tr.Name, s.Mode
	res.Producers, res.Consumers, res.PayloadBytes = s.Producers, s.Consumers, s.Payload
	res.Capacity, res.Killed, res.Lease = ln.capacity(), killed, s.Lease
	res.Loan = s.Loan
	if s.Batch > 1 {
		res.Batch = s.Batch
	}
	switch l := ln.(type) {
	case *ringLane:
		res.Ring = l.stats()
	case *dequeLane:
		res.Deque = l.stats()
	}
	if plan != nil {
		res.Chaos = plan.report()
		res.Chaos.WatchdogScans, res.Chaos.Reclaimed = lr.watch.counts()
	}
	return res, nil
}

// leasedRun is the parent's side of a leased run.
type leasedRun struct {
	f         *fleet
	ln        lane             // a ring or a deque
	hb        *heartbeat.Table // ring only
	seen      *sharedSeen
	lat       *sharedLatency
	watch     *leaseWatch
	base      job
	producers int
	messages  int64 // in all; 0 in a timed run
	nextID    int   // the next replacement consumer's number
	nextIdx   int   // ... and line in the control file
}

// newLeasedRun creates the heartbeat table (ring only: the deque's own
// participant table proves a thief dead, and its Repair returns the
// thief's leases), the shared bitmap and the shared latency histograms,
// and fills in what every consumer's job needs to find them. The
// producers of a counted --chaos run are gated (chaosPlan).
func newLeasedRun(f *fleet, base *job, ln lane, s runSpec) (*leasedRun, error) {
	lr := &leasedRun{f: f, ln: ln, producers: s.Producers, messages: s.Messages,
		nextID: s.Consumers, nextIdx: s.Producers + s.Consumers}
	switch l := ln.(type) {
	case *ringLane:
		name, err := shmName("hb")
		if err != nil {
			return nil, err
		}
		hb, err := heartbeat.Create(name, heartbeat.Config{Capacity: max(64, s.Consumers+s.Chaos+2)})
		if err != nil {
			return nil, err
		}
		f.addFile(&linkedFile{path: hb.Path(), closeFn: hb.Close})
		lr.hb, lr.watch, base.Heartbeat = hb, newLeaseWatch(hb, l.r), hb.Path()
	case *dequeLane:
		lr.watch = newDequeWatch(l.d)
	default:
		return nil, fmt.Errorf("leased consumption needs a ring or a deque, not %s", s.Transport)
	}
	if base.PerProducer == nil {
		// A timed run: producers stop at the deadline, or at the
		// bitmap's limit.
		base.PerProducer = make([]int64, s.Producers)
		for p := range base.PerProducer {
			base.PerProducer[p] = leasedSeqLimit(s.Producers)
		}
	}
	seen, err := newSharedSeen(seenLimits(base.PerProducer))
	if err != nil {
		return nil, err
	}
	f.addFile(seen)
	lat, err := newSharedLatency(s.Consumers)
	if err != nil {
		return nil, err
	}
	f.addFile(lat)
	base.Lease, base.Seen, base.Latency, base.LatSlots = true, seen.path, lat.path, lat.slots
	base.Gated = s.Chaos > 0 && s.Messages > 0
	lr.seen, lr.lat, lr.base = seen, lat, *base
	return lr, nil
}

// chaosPlan makes the kill plan of a --chaos run; its progress is what
// the consumers have received, copies included.
func (lr *leasedRun) chaosPlan(s runSpec) *chaosPlan {
	seed := chaosSeed(s.Seed, s.SeedSet)
	if s.u != nil {
		s.u.note("chaos: seed %d (repeat the kill plan with --seed %d)", seed, seed)
	}
	p := newChaosPlan(s.Chaos, seed, roleConsumer, s.Messages, s.Duration, lr.f.ctl.progress, lr.replaceConsumer)
	if lr.base.Gated {
		p.gate = lr.gateAt
		p.holdAt(p.at[0]) // before the run starts
	}
	return p
}

// chaosLead is how far the producers of a counted --chaos run may run
// ahead of the next kill point, as a fraction of the messages: enough
// that a kill usually finds messages in flight, and little enough that
// every kill comes while at least 35 % of the messages (1 − chaosTo −
// chaosLead) are still to be delivered.
const chaosLead = 0.05

// gateAt holds the producers until the consumers' progress reaches the
// kill point at: together they may send at + chaosLead × messages (each
// its share, rounded up), and no more until the gate moves. at 0 lets
// them go.
func (lr *leasedRun) gateAt(at int64) {
	if at == 0 {
		lr.f.ctl.setGate(0)
		return
	}
	limit := at + int64(chaosLead*float64(lr.messages))
	per := (limit + int64(lr.producers) - 1) / int64(lr.producers)
	if per > maxLeasedSeq { // beyond every producer's share
		lr.f.ctl.setGate(0)
		return
	}
	lr.f.ctl.setGate(uint32(max(per, 1)))
}

// replaceConsumer starts a new consumer for victim on the next spare
// line, with victim's latency slot (victim is dead and reaped), and waits
// until it is ready.
func (lr *leasedRun) replaceConsumer(ctx context.Context, victim *worker) error {
	j := lr.base
	j.Role, j.Index, j.ID, j.LatSlot = roleConsumer, lr.nextIdx, lr.nextID, victim.job.LatSlot
	lr.nextIdx++
	lr.nextID++
	if err := lr.f.spawn(j, nil, lr.ln); err != nil {
		return err
	}
	return lr.f.awaitLines(func() bool { return lr.f.ctl.isReady(j.Index) })
}

// tally is tally for a leased run: the counts come from the shared
// bitmap and the consumers' control lines, the latencies from the shared
// histograms, killed consumers included.
func (lr *leasedRun) tally(prods, cons []*report) Result {
	var res Result
	sent := make([]int64, len(prods))
	first := int64(0)
	for _, p := range prods {
		sent[p.ID] = p.Sent
		res.Messages += p.Sent
		if p.Sent > 0 && (first == 0 || p.First < first) {
			first = p.First
		}
	}
	var last int64
	for _, w := range lr.f.list() {
		if w.role != roleConsumer {
			continue
		}
		l := lr.f.ctl.line(w.index)
		res.Duplicated += int64(l.dup.Load())
		res.Corrupt += int64(l.corrupt.Load())
		last = max(last, int64(l.last.Load()))
	}
	for _, c := range cons {
		if c.Why != "" && res.why == "" {
			res.why = fmt.Sprintf("consumer %d: %s", c.ID, c.Why)
		}
	}
	rec := lr.lat.recorder()
	distinct, extra := lr.seen.distinct(sent)
	res.Corrupt += extra
	res.Lost = res.Messages - distinct
	if first != 0 && last > first {
		res.Seconds = float64(last-first) / 1e9
		res.MsgsPerSec = float64(distinct) / res.Seconds
	}
	rec.fill(&res)
	return res
}

// tally merges the workers' reports: the measured interval runs from the
// first send to the last receive, both read on the shared CLOCK_MONOTONIC.
func tally(prods, cons []*report) Result {
	var res Result
	sent := make([]int64, len(prods))
	first := int64(0)
	for _, p := range prods {
		sent[p.ID] = p.Sent
		res.Messages += p.Sent
		if p.Sent > 0 && (first == 0 || p.First < first) {
			first = p.First
		}
	}
	rec := newRecorder()
	var sets []*seenSet
	var received, last int64
	for _, c := range cons {
		received += c.Received
		res.Corrupt += c.Corrupt
		if c.Why != "" && res.why == "" {
			res.why = fmt.Sprintf("consumer %d: %s", c.ID, c.Why)
		}
		last = max(last, c.Last)
		if c.rec != nil {
			rec.merge(c.rec)
		}
		if c.seen != nil {
			sets = append(sets, c.seen)
		}
	}
	distinct, extra := union(sets, sent)
	res.Corrupt += extra
	res.Lost = res.Messages - distinct
	res.Duplicated = received - distinct - extra
	if first != 0 && last > first {
		res.Seconds = float64(last-first) / 1e9
		res.MsgsPerSec = float64(distinct) / res.Seconds
	}
	rec.fill(&res)
	return res
}

// failure says why a finished run counts as failed: messages lost or
// corrupt, or duplicated although nobody was killed. nil if healthy.
func failure(r *Result) error {
	var errs []error
	if r.Lost > 0 {
		errs = append(errs, fmt.Errorf("%d lost", r.Lost))
	}
	if r.Corrupt > 0 {
		what := fmt.Errorf("%d corrupt", r.Corrupt)
		if r.why != "" {
			what = fmt.Errorf("%d corrupt (first: %s)", r.Corrupt, r.why)
		}
		errs = append(errs, what)
	}
	if r.Duplicated > 0 && r.Killed == 0 {
		errs = append(errs, fmt.Errorf("%d duplicated with no worker killed", r.Duplicated))
	}
	if errs == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", r.name(), joinComma(errs))
}

// joinComma joins errors on one line.
func joinComma(errs []error) error {
	s := ""
	for i, e := range errs {
		if i > 0 {
			s += ", "
		}
		s += e.Error()
	}
	return errors.New(s)
}
