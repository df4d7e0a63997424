package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/sched/pass"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// The processes of a pass run (pass.go): workers, each a pass.Pool, and
// submitters, each a pass.Client.

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
	if err := rep.toWire(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// passWorkerMain executes passes until the parent says stop, then stops
// the pool gracefully (passes in flight finish) and reports.
func passWorkerMain(j *passJob, ctl *control) (*report, error) {
	reg := pass.NewRegistry()
	reg.Register(closureCheckEcho, checkEcho)
	p, err := pass.NewPool(pass.PoolConfig{Shared: j.shared(fmt.Sprintf("pb-worker-%d", j.ID)), Workers: j.Threads, Registry: reg})
	if err != nil {
		return nil, err
	}
	ctl.markReady(j.Index)
	err = ctl.awaitStop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = errors.Join(err, withoutCut(p.Stop(ctx), ctx))
	st := p.Stats()
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

// submitterMain is a submitter process: a pass.Client whose Inflight
// goroutines each submit a pass, wait for its result, check it and go
// again, until the submitter's share is submitted or the deadline passes.
func submitterMain(j *passJob, ctl *control) (rep *report, err error) {
	c, err := pass.NewClient(pass.ClientConfig{Shared: j.shared(fmt.Sprintf("pb-submitter-%d", j.ID)), Reply: j.Reply, InFlight: j.Inflight})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, c.Close()) }() // at once, on an error path
	// Read-only views of the submit ring and this client's reply ring, to
	// see whether a missing result can still come.
	var views []*transport.Ring
	defer func() {
		for _, v := range views {
			v.Close()
		}
	}()
	for _, p := range []string{j.Submit, c.ReplyPath()} {
		v, err := transport.OpenRingReadOnly(p)
		if err != nil {
			return nil, err
		}
		views = append(views, v)
	}
	ctl.markReady(j.Index)
	_, deadline, err := ctl.awaitGo(context.Background())
	if err != nil {
		return nil, err
	}
	s := &passSubmitter{j: j, c: c, progress: ctl.line(j.Index).progress, deadline: deadline,
		limit: uint64(maxSeq), corruptSeq: math.MaxUint64, rec: newRecorder()}
	if j.Per != nil {
		s.limit = uint64(j.Per[j.ID])
	}
	if cr := j.Corrupt; cr != nil && cr.Producer == j.ID {
		s.corruptSeq = cr.Seq
	}
	if err := s.run(views); err != nil {
		return nil, err
	}
	// Close stops the client's receiving goroutine once it has settled
	// what it was settling: its counters are final after it.
	if err := c.Close(); err != nil {
		return nil, err
	}
	return s.report(c.Stats())
}

// passSubmitter is one submitter's run.
type passSubmitter struct {
	j          *passJob
	c          *pass.Client
	progress   *atomic.Uint64 // its control line's: passes settled, for the parent (chaos plan, progress bar)
	deadline   int64          // of a timed run, or 0
	limit      uint64         // passes to submit (a timed run: maxSeq)
	corruptSeq uint64         // tests only: the pass to damage after sealing it

	next       atomic.Uint64 // sequence numbers handed out
	submitting atomic.Int64  // goroutines in Submit
	sent       atomic.Int64  // passes submitted
	settled    atomic.Int64  // passes whose Wait returned
	stopped    atomic.Bool   // gave up on missing results

	mu    sync.Mutex
	rec   *recorder
	ok    int64 // results that were the pass's own arguments
	bad   int64 // error results and wrong echoes
	why   string
	first int64 // just before the goroutines start
	last  int64 // the last result
}

// run runs the goroutines and waits for them. A goroutine that fails
// ends the others.
func (s *passSubmitter) run(views []*transport.Ring) error {
	ctx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watchQuiet(watchCtx, views, giveUp)
	}()
	errs := make([]error, s.j.Inflight)
	var wg sync.WaitGroup
	s.first = shm.MonoNow()
	for i := range errs {
		wg.Go(func() {
			if errs[i] = s.loop(ctx); errs[i] != nil {
				giveUp()
			}
		})
	}
	wg.Wait()
	stopWatch()
	<-watched
	return errors.Join(errs...)
}

// loop is one goroutine: one pass in flight at a time, until the share is
// submitted, the deadline passes, or the submitter gives up.
//
// Every pass is resolved exactly once: each Submit has its own Wait, and
// the result must be the pass's own arguments byte for byte (they carry
// this submitter's id and the pass's sequence number under a checksum),
// so a result given to the wrong pass, or twice, is caught as corrupt;
// the client drops a second result for a pass (ClientStats.Unmatched,
// reported as duplicated), and report cross-checks the client's counts.
func (s *passSubmitter) loop(ctx context.Context) error {
	msg := newMsg(s.j.Payload, uint32(s.j.ID))
	for ctx.Err() == nil {
		seq := s.next.Add(1) - 1
		if seq >= s.limit {
			return nil
		}
		now := shm.MonoNow()
		if s.deadline != 0 && now >= s.deadline {
			return nil
		}
		stamp(msg, seq, now)
		if seq == s.corruptSeq {
			msg[offSeq] ^= 0x10
		}
		s.submitting.Add(1)
		h, err := s.c.Submit(ctx, closureCheckEcho, msg)
		if err == nil {
			s.sent.Add(1)
		}
		s.submitting.Add(-1)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("submit: %w", err)
		}
		res, err := h.Wait(ctx)
		done := shm.MonoNow()
		s.settled.Add(1)
		s.progress.Add(1)
		switch {
		case err != nil && ctx.Err() != nil:
			h.Cancel() // given up on: lost
			return nil
		case err != nil && !errors.Is(err, pass.ErrFailed):
			return fmt.Errorf("pass %d: %w", seq, err)
		}
		s.settle(msg, seq, now, res, err, done)
	}
	return nil
}

// settle checks one result (err: the error result) of the pass msg,
// submitted at sent, that came at done.
func (s *passSubmitter) settle(msg []byte, seq uint64, sent int64, res []byte, err error, done int64) {
	if err == nil && !bytes.Equal(res, msg) {
		err = fmt.Errorf("a result of %d bytes that is not the pass's arguments echoed", len(res))
	}
	if err == nil {
		_, err = parseMsg(res, len(msg))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = max(s.last, done)
	if err != nil {
		s.bad++
		if s.why == "" {
			s.why = fmt.Sprintf("pass %d: %v", seq, err)
		}
		return
	}
	s.ok++
	s.rec.record(done - sent)
}

// quietFor is how long a submitter waits, with passes awaiting results,
// nothing moving, and no pass or result anywhere, before it calls the
// missing results lost: no result can come any more (a pass set aside as
// poison after too many deliveries under --chaos, or a bug). A slow or
// stalled process cannot make a pass look lost (see quietNow): quietFor
// only bounds how long a run with a lost pass lingers.
const quietFor = 200 * time.Millisecond

// watchQuiet gives up (ends ctx for every goroutine) when the submitter
// awaits results that cannot come, as quietNow says at two looks in a
// row after quietFor without progress.
func (s *passSubmitter) watchQuiet(ctx context.Context, views []*transport.Ring, giveUp context.CancelFunc) {
	t := time.NewTicker(quietFor / 4)
	defer t.Stop()
	last, since, quiet := int64(-1), time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n := s.sent.Load() + s.settled.Load()
			switch {
			case n != last:
				last, since, quiet = n, now, 0
			case now.Sub(since) < quietFor || !s.quietNow(views):
				quiet = 0
			default:
				if quiet++; quiet >= 2 {
					s.stopped.Store(true)
					giveUp()
					return
				}
			}
		}
	}
}

// quietNow reports whether passes await results and none can be on its
// way: every slot of the submit ring and of the reply ring (views) is
// free or poison (a pass queued, leased, executing, or its result parked,
// holds a submit slot; a result not yet popped, a reply slot), every
// result popped from the reply ring has been settled by the client, and
// no goroutine is inside Submit (which registers a pass before it pushes
// it). The looks go in the order a pass moves (a result is freed from
// its slot before the ring counts it popped, and counted before the
// client settles it), so a result cannot slip between them unseen; what
// remains is a pass caught for two looks in a row between a ring's
// release store and its counter add.
func (s *passSubmitter) quietNow(views []*transport.Ring) bool {
	if s.c.Pending() == 0 || !ringsQuiet(views) {
		return false
	}
	popped := views[1].Counters().Popped
	st := s.c.Stats()
	settled := st.Resolved + st.Late + st.Unmatched + st.Stale + st.Undecoded
	return popped <= settled && s.submitting.Load() == 0 && s.c.Pending() > 0
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

// report is the submitter's report, once its client is closed: st are
// the client's final counts, which must agree with the submitter's.
func (s *passSubmitter) report(st pass.ClientStats) (*report, error) {
	sent := s.sent.Load()
	if st.Submitted != uint64(sent) {
		return nil, fmt.Errorf("the client counted %d passes submitted, the submitter %d", st.Submitted, sent)
	}
	if !s.stopped.Load() && st.Resolved != uint64(s.ok+s.bad) {
		return nil, fmt.Errorf("the client counted %d passes resolved, the submitter %d results", st.Resolved, s.ok+s.bad)
	}
	return &report{Role: roleSubmitter, ID: s.j.ID, Sent: sent, Received: s.ok, Corrupt: s.bad + int64(st.Undecoded),
		Why: s.why, First: s.first, Last: s.last, Duplicated: int64(st.Unmatched), StoppedEarly: s.stopped.Load(),
		Client: &st, rec: s.rec}, nil
}
