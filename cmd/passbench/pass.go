package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/sched/pass"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// `passbench pass` puts load on the Pass scheduler (sched/pass) end to end,
// in the topology it is built for: --submitters submitter processes, each
// a pass.Client that receives exactly its own results in its own reply
// ring, and --workers worker processes, each a pass.Pool with --threads
// worker goroutines. Nobody collects for anyone else: each submitter
// verifies and times its own passes and reports to the parent, which only
// creates the shared files, starts the processes, kills workers and runs
// the watchdog under --chaos, and adds the reports up.
//
// A submitter runs --inflight goroutines, each a closed loop: stamp a
// passbench message (msg.go) of --payload bytes, Submit it, Wait for its
// result, check it, go again (passchild.go). So a submitter has --inflight
// passes in flight, and with 1 a run is a series of round trips through
// the scheduler that compares with `rtt`. The closure checks the
// checksum (a bad one makes an error result) and echoes the arguments;
// the submitter checks that the echo is its own arguments, byte for byte.
// Latency is the submitter's clock when Wait returns minus its clock just
// before Submit: queueing in the submit ring and the reply ring included.

// Pass roles.
const (
	rolePassWorker = "worker"    // a pass.Pool executing passes
	roleSubmitter  = "submitter" // a pass.Client submitting passes and awaiting their results

	roleSched = "sched" // the child role (PASSBENCH_ROLE) of both
)

// closureCheckEcho is the one closure passbench registers.
const closureCheckEcho = 1

// kindPass is the kind of a pass run.
const kindPass = "pass"

// Defaults and limits of `pass`.
const (
	defaultPasses       = 200_000
	defaultSubmitters   = 3  // several services sharing the workers: the topology the scheduler is for
	defaultPassInflight = 16 // per submitter: batches for the workers, far from filling the rings
	// defaultPassPayload fills one 64-byte slot (56 payload bytes) with
	// the 22-byte pass header of wire version 2 (unit_test.go checks it).
	defaultPassPayload = 34
	maxPassWorkers     = 64
	maxPassThreads     = 64
)

// The pass wire format's headers, from the library: a submit payload of n
// bytes carries pass.MaxArgs(n) = n - passSubmitHeader argument bytes, a
// result payload pass.MaxResult(n) = n - passResultHeader result bytes.
var (
	passSubmitHeader = 1024 - pass.MaxArgs(1024)
	passResultHeader = 1024 - pass.MaxResult(1024)
)

// passSpec is one `passbench pass` run.
type passSpec struct {
	Workers    int // worker processes
	Threads    int // worker goroutines in each
	Submitters int // submitter processes
	Passes     int64
	Duration   time.Duration
	Payload    int // argument bytes
	Capacity   int // slots of the submit ring and of each reply ring
	Inflight   int // per submitter: goroutines, each with one pass in flight; 0: the default
	Chaos      int
	Seed       int64
	SeedSet    bool
	Timeout    time.Duration

	corrupt *corruptAt // tests only: one submitter damages one pass
	u       *ui
}

// PassReport is what is particular to a pass run.
type PassReport struct {
	Workers         int             `json:"workers"`
	Threads         int             `json:"threads"`
	Submitters      int             `json:"submitters"`       // processes, each a pass.Client
	Inflight        int             `json:"inflight"`         // passes in flight per submitter
	SlotBytes       int             `json:"slot_bytes"`       // of the submit ring and of every reply ring
	Executed        uint64          `json:"executed"`         // passes the workers that finished executed (killed workers' counts are lost)
	Failed          uint64          `json:"failed"`           // error results they made
	Backpressure    uint64          `json:"backpressure"`     // results parked because their reply ring was full (pass.Stats.Parked)
	Released        uint64          `json:"released"`         // passes handed back unfinished at their Stop
	LateResults     uint64          `json:"late_results"`     // results of runs abandoned at their Stop, dropped
	Orphaned        uint64          `json:"orphaned"`         // passes skipped unrun because their submitter had left (copies of passes run twice)
	OrphanedResults uint64          `json:"orphaned_results"` // results dropped because their submitter had left
	Requeued        uint64          `json:"requeued"`         // passes of dead workers delivered again
	LeftInRing      int             `json:"left_in_ring"`     // passes still in the submit ring at the end
	StoppedEarly    bool            `json:"stopped_early"`    // a submitter gave up on missing results
	PerSubmitter    []PassSubmitter `json:"per_submitter"`    // by id
}

// PassSubmitter is one submitter's share of a pass run: the fields mean
// what the run's fields of the same name mean, for its passes alone.
type PassSubmitter struct {
	ID           int     `json:"id"`
	Messages     int64   `json:"messages"`      // passes it submitted
	Resolved     int64   `json:"resolved"`      // of them, passes whose result came and was its own arguments
	Seconds      float64 `json:"seconds"`       // from its first Submit to its last result
	MsgsPerSec   float64 `json:"msgs_per_sec"`  // resolved ÷ seconds
	Latency      Latency `json:"latency_ns"`    // submit to result
	Lost         int64   `json:"lost"`          // messages − resolved
	Duplicated   int64   `json:"duplicated"`    // results that came again for a pass already resolved (dropped by the client)
	Corrupt      int64   `json:"corrupt"`       // error results, echoes that differ, results that could not be decoded
	StoppedEarly bool    `json:"stopped_early"` // it gave up on missing results
}

// mostInflight is the most passes a client may await at once with reply
// rings of capacity slots (pass.ClientConfig.InFlight).
func mostInflight(capacity int) int { return capacity - capacity/8 }

func (s *passSpec) check() error {
	switch {
	case s.Workers < 1 || s.Workers > maxPassWorkers:
		return cliutil.Usage("--workers must be in [1, %d], got %d", maxPassWorkers, s.Workers)
	case s.Threads < 1 || s.Threads > maxPassThreads:
		return cliutil.Usage("--threads must be in [1, %d], got %d", maxPassThreads, s.Threads)
	case s.Submitters < 1 || s.Submitters > maxWorkers:
		return cliutil.Usage("--submitters must be in [1, %d], got %d", maxWorkers, s.Submitters)
	case s.Passes < 0 || s.Duration < 0:
		return cliutil.Usage("--passes and --duration must not be negative")
	case s.Passes > 0 && s.Duration > 0:
		return cliutil.Usage("give --passes or --duration, not both")
	case s.Passes > 0 && s.Passes < int64(s.Submitters):
		return cliutil.Usage("--passes must be at least --submitters (%d), got %d", s.Submitters, s.Passes)
	case s.Passes > int64(s.Submitters)*maxSeq:
		return cliutil.Usage("--passes must stay below %d per submitter", int64(maxSeq))
	case s.Payload < minPayload || s.Payload > maxPayload:
		return cliutil.Usage("--payload must be in [%d, %d] bytes, got %d", minPayload, maxPayload, s.Payload)
	case s.Capacity < 2 || s.Capacity > 1<<20 || s.Capacity&(s.Capacity-1) != 0:
		return cliutil.Usage("--capacity must be a power of two in [2, %d], got %d", 1<<20, s.Capacity)
	case s.Inflight < 0 || s.Inflight > mostInflight(s.Capacity):
		return cliutil.Usage("--inflight must be in [1, %d] (a reply ring of --capacity %d slots, less an eighth), got %d",
			mostInflight(s.Capacity), s.Capacity, s.Inflight)
	case s.Chaos < 0 || s.Chaos > maxChaos:
		return cliutil.Usage("--chaos must be in [0, %d], got %d", maxChaos, s.Chaos)
	case s.Timeout <= 0:
		return cliutil.Usage("--timeout must be positive, got %v", s.Timeout)
	}
	if s.Inflight == 0 {
		s.Inflight = min(defaultPassInflight, mostInflight(s.Capacity))
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
	per := make([]int64, s.Submitters)
	for i := range per {
		per[i] = s.Passes / int64(s.Submitters)
		if int64(i) < s.Passes%int64(s.Submitters) {
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
	Heartbeat string               `json:"heartbeat"`
	Ring      transport.RingConfig `json:"ring"`  // the submit ring
	Reply     transport.RingConfig `json:"reply"` // a submitter's reply ring
	HB        heartbeat.Config     `json:"hb"`
	Threads   int                  `json:"threads,omitempty"`
	Payload   int                  `json:"payload"`
	Per       []int64              `json:"per,omitempty"` // passes each submitter submits; nil: timed
	Inflight  int                  `json:"inflight,omitempty"`
	Corrupt   *corruptAt           `json:"corrupt,omitempty"`
}

// shared is what every process of the run names: the same files and the
// same geometry everywhere, or opening a file fails.
func (j *passJob) shared(label string) pass.Shared {
	return pass.Shared{SubmitPath: j.Submit, HeartbeatPath: j.Heartbeat, Ring: j.Ring, Heartbeat: j.HB, Label: label}
}

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
	// A pool opens a submitter's reply ring by name when a pass first
	// names it (and a replacement worker opens everything by name), so
	// the files stay linked until every submitter is done, not just
	// until every process is ready.
	f.keepLinked = true

	slot := transport.SlotSizeFor(s.Payload + passSubmitHeader) // a result (echo) needs less: passResultHeader < passSubmitHeader
	peers := uint32(max(64, W+S+s.Chaos+4))
	base := passJob{Lines: f.ctl.n, Control: f.ctl.path, Payload: s.Payload, Per: s.perSubmitter(),
		Inflight: s.Inflight, Threads: s.Threads, Corrupt: s.corrupt,
		Ring:  transport.RingConfig{Capacity: uint64(s.Capacity), SlotSize: slot, Participants: peers},
		Reply: transport.RingConfig{Capacity: uint64(s.Capacity), SlotSize: slot, Participants: peers},
		HB:    heartbeat.Config{Capacity: max(64, W+S+s.Chaos+4), Leases: max(16, s.Threads)}}
	if s.Chaos > 0 {
		base.Ring.DeliveryLimit = leaseDeliveryLimit
	}
	// The parent creates the submit ring and the heartbeat table (for its
	// watchdog and its final look at the ring); the pools and clients
	// create the cancel board and the reply rings, registered here before
	// they exist so that stop removes whatever was created.
	names := [2]string{}
	for i, what := range []string{"submit", "hb"} {
		name, err := shmName(what)
		if err != nil {
			return Result{}, err
		}
		names[i] = shm.Resolve(name)
	}
	base.Submit, base.Heartbeat = names[0], names[1]
	submit, err := transport.CreateRing(base.Submit, base.Ring)
	if err != nil {
		return Result{}, err
	}
	f.addFile(&linkedFile{path: base.Submit, closeFn: submit.Close})
	hb, err := heartbeat.Create(base.Heartbeat, base.HB)
	if err != nil {
		return Result{}, err
	}
	f.addFile(&linkedFile{path: base.Heartbeat, closeFn: hb.Close})
	f.addFile(&linkedFile{path: pass.BoardPath(base.Submit), missingOK: true})
	for i := range base.HB.Capacity {
		f.addFile(&linkedFile{path: pass.ReplyPath(base.Submit, i), missingOK: true})
	}

	spawn := func(role string, id, index int) error {
		j := base
		j.Role, j.Index, j.ID = role, index, id
		return f.spawnChild(role, id, index, roleSched, j)
	}
	for i := range W {
		if err := spawn(rolePassWorker, i, i); err != nil {
			return Result{}, err
		}
	}
	for i := range S {
		if err := spawn(roleSubmitter, i, W+i); err != nil {
			return Result{}, err
		}
	}
	if err := f.awaitReady(); err != nil {
		return Result{}, err
	}

	var plan *chaosPlan
	var watch *leaseWatch
	if s.Chaos > 0 {
		// The parent's watchdog: a killed worker's leases go back to the
		// submit ring (from its heartbeat slot, and by the ring's
		// repair), and another worker runs them again.
		watch = newLeaseWatch(hb, submit)
		f.onStop(watch.stop)
		seed := chaosSeed(s.Seed, s.SeedSet)
		s.u.note("chaos: seed %d (repeat the kill plan with --seed %d)", seed, seed)
		nextID, nextIdx := W, W+S
		replace := func(ctx context.Context, _ *worker) error {
			id, idx := nextID, nextIdx
			nextID++
			nextIdx++
			if err := spawn(rolePassWorker, id, idx); err != nil {
				return err
			}
			return f.awaitLines(func() bool { return f.ctl.isReady(idx) })
		}
		plan = newChaosPlan(s.Chaos, seed, rolePassWorker, s.Passes, s.Duration, f.ctl.progress, replace)
	}

	stopBar := u.track("pass", "passes", s.Passes, s.Duration, f.ctl.progress)
	defer stopBar()
	if watch != nil {
		watch.start()
	}
	f.ctl.begin(s.Duration)
	if plan != nil {
		plan.start(ctx, f)
		f.onStop(func() { plan.finish() })
	}
	subs, err := f.wait(roleSubmitter)
	if err != nil {
		return Result{}, err
	}
	stopBar()
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
	if watch != nil {
		watch.stop()
	}

	res, per := tallyPass(subs)
	res.Kind, res.Transport, res.Mode = kindPass, "pass", modeBlock
	res.Producers, res.Consumers, res.PayloadBytes, res.Capacity, res.Killed = S, W, s.Payload, s.Capacity, killed
	pr := &PassReport{Workers: W, Threads: s.Threads, Submitters: S, Inflight: s.Inflight, SlotBytes: int(slot),
		Requeued: submit.Counters().Requeued, LeftInRing: len(submit.Scan().Slots), PerSubmitter: per}
	for _, p := range per {
		pr.StoppedEarly = pr.StoppedEarly || p.StoppedEarly
	}
	for _, w := range workers {
		if p := w.Pass; p != nil {
			pr.Executed += p.Executed
			pr.Failed += p.Failed
			pr.Backpressure += p.Parked
			pr.Released += p.Released
			pr.LateResults += p.LateResults
			pr.Orphaned += p.Orphaned
			pr.OrphanedResults += p.OrphanedResults
		}
	}
	res.Pass = pr
	if plan != nil {
		res.Chaos = plan.report()
		res.Chaos.WatchdogScans, res.Chaos.Reclaimed = watch.counts()
	}
	return res, nil
}

// tallyPass adds up the submitters' reports: a row for each, by id, and
// the run's totals. The run's interval runs from the first submitter's
// first Submit to the last submitter's last result, both read on the
// shared CLOCK_MONOTONIC; its latencies are every submitter's merged.
func tallyPass(subs []*report) (Result, []PassSubmitter) {
	subs = slices.Clone(subs)
	slices.SortFunc(subs, func(a, b *report) int { return a.ID - b.ID })
	var res Result
	per := make([]PassSubmitter, 0, len(subs))
	rec := newRecorder()
	var distinct, first, last int64
	for _, r := range subs {
		p := PassSubmitter{ID: r.ID, Messages: r.Sent, Resolved: r.Received, Lost: r.Sent - r.Received,
			Duplicated: r.Duplicated, Corrupt: r.Corrupt, StoppedEarly: r.StoppedEarly}
		if r.Sent > 0 && r.Last > r.First {
			p.Seconds = float64(r.Last-r.First) / 1e9
			p.MsgsPerSec = float64(r.Received) / p.Seconds
			if first == 0 || r.First < first {
				first = r.First
			}
			last = max(last, r.Last)
		}
		if r.rec != nil {
			p.Latency = r.rec.latency()
			rec.merge(r.rec)
		}
		per = append(per, p)
		res.Messages += p.Messages
		distinct += p.Resolved
		res.Duplicated += p.Duplicated
		res.Corrupt += p.Corrupt
		if r.Why != "" && res.why == "" {
			res.why = fmt.Sprintf("submitter %d: %s", r.ID, r.Why)
		}
	}
	res.Lost = res.Messages - distinct
	if first != 0 && last > first {
		res.Seconds = float64(last-first) / 1e9
		res.MsgsPerSec = float64(distinct) / res.Seconds
	}
	rec.fill(&res)
	return res, per
}
