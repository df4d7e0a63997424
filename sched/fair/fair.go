package fair

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Scheduler schedules transitions of many requests fairly and
// transactionally, independently of what executes them.
//
// Each request owns a canonical state S. Its work items W are queued in
// order; preparing one takes a branch B of the state; submitting hands the
// work and its branch to a Backend, which returns an output O holding
// the backend's resources; polling observes exact completions and commits
// the branch of successful work only. Requests are served round-robin, so
// one request with a long queue cannot starve the others, and every
// occupancy dimension is bounded by Limits.
//
// Cancellation (explicit or by deadline) discards queued and prepared work
// at once. Submitted work cannot be recalled: it is abandoned, never
// published, and its output is kept until its exact completion releases
// it; the report records how long that took. A request whose work fails
// ends failed, and its other submitted work is abandoned the same way.
//
// With a ConsensusTransport, RunDistributedTurn makes a group of
// schedulers (one per process) agree, before acting, on each turn's
// schedule, on cancellations and expired deadlines, and on completions. A
// disagreement poisons the scheduler: every later mutation fails with
// ErrSchedulerPoisoned, and submitted work stays retained until its exact
// local completion (Poll keeps working).
//
// A Scheduler is not safe for concurrent use.
type Scheduler[W Work, S State[B], B any, O Output] struct {
	limits    Limits
	reqs      map[RequestID]*fairRequest[W, S, B, O]
	active    int // requests in status RequestActive
	queued    int // queued work of active requests
	ready     fairDeque[*fairRequest[W, S, B, O]]
	prepared  fairDeque[*fairItem[W, S, B, O]]
	submitted []*fairItem[W, S, B, O]
	spare     []*fairItem[W, S, B, O] // the other half of submitted's double buffer
	pool      []*fairItem[W, S, B, O]
	live      int // accepted, non-terminal work: queued, prepared and submitted
	abandoned int // submitted work with an abandon disposition

	// Queued and prepared work with a deadline, and a lower bound of the
	// earliest such deadline, so turns without expiries skip the scan.
	deadlined int
	earliest  time.Time

	peakLive, peakInFlight, peakAbandonedResources int

	accepted, completed, failed, discarded     uint64
	cancelBefore, cancelAfter, abandonReleased uint64
	finishedReqs, cancelledReqs, expiredReqs   uint64
	drainCycles                                uint64
	released                                   bool
	lastRelease, maxRelease                    time.Duration

	backends       []string // observed backend names, sorted
	lastBackend    string
	allPreemptible bool

	poisoned     bool
	poisonReason string

	// Scratch buffers of distributed turns.
	msg, gathered []uint32
	verdicts      []resolution
	obs           []fairObservation
	expiredIDs    []RequestID
}

// fairRequest is one request, active or terminal.
type fairRequest[W Work, S State[B], B any, O Output] struct {
	id        RequestID
	state     S
	status    RequestStatus
	next      uint64                           // sequence of the next work enqueued
	pending   fairDeque[*fairItem[W, S, B, O]] // queued work, sequences [front, next)
	branches  int                              // prepared + submitted work
	submitted int                              // submitted work, any disposition
	// final records the lifecycle of work that ended other than committed;
	// work that is neither live nor listed here was committed.
	final map[uint64]WorkLifecycle
}

func (r *fairRequest[W, S, B, O]) setFinal(seq uint64, l WorkLifecycle) {
	if r.final == nil {
		r.final = make(map[uint64]WorkLifecycle)
	}
	r.final[seq] = l
}

// fairDisposition is what happens to submitted work when it completes.
type fairDisposition uint8

const (
	dispPublish fairDisposition = iota // commit its branch
	dispAbandon                        // cancelled: release only
	dispFail                           // failed on some participant: release, then fail
)

// fairItem is one live transition.
type fairItem[W Work, S State[B], B any, O Output] struct {
	id          WorkID
	req         *fairRequest[W, S, B, O]
	work        W
	deadline    time.Time // zero: none
	hasDeadline bool      // counted in deadlined (queued or prepared with a deadline)
	desc        []uint32  // descriptor words, encoded when prepared
	branch      B
	out         O
	life        WorkLifecycle
	disp        fairDisposition
	cancelledAt time.Time
}

// New returns an empty scheduler under validated limits.
func New[W Work, S State[B], B any, O Output](limits Limits) (*Scheduler[W, S, B, O], error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	return &Scheduler[W, S, B, O]{
		limits:         limits,
		reqs:           make(map[RequestID]*fairRequest[W, S, B, O]),
		allPreemptible: true,
	}, nil
}

// Limits returns the configured limits.
func (s *Scheduler[W, S, B, O]) Limits() Limits { return s.limits }

func (s *Scheduler[W, S, B, O]) usable() error {
	if s.poisoned {
		return fmt.Errorf("%w: %s", ErrSchedulerPoisoned, s.poisonReason)
	}
	return nil
}

// ValidateRegistration reports whether Register(id, ...) would succeed,
// before the caller builds the request's state.
func (s *Scheduler[W, S, B, O]) ValidateRegistration(id RequestID) error {
	if err := s.usable(); err != nil {
		return err
	}
	if r, dup := s.reqs[id]; dup {
		return fmt.Errorf("%w: request %d (%s)", ErrDuplicateRequest, id, r.status)
	}
	if s.active >= s.limits.MaxActiveRequests {
		return fmt.Errorf("%w: all %d active-request places taken", ErrCapacity, s.limits.MaxActiveRequests)
	}
	return nil
}

// Register adds an active request with its canonical state. The id must be
// new: terminal requests keep theirs until ForgetTerminal.
func (s *Scheduler[W, S, B, O]) Register(id RequestID, state S) error {
	if err := s.ValidateRegistration(id); err != nil {
		return err
	}
	s.reqs[id] = &fairRequest[W, S, B, O]{id: id, state: state, status: RequestActive}
	s.active++
	return nil
}

// State returns a copy of an active request's canonical state, made by
// the state's Clone method: S must implement Cloner[S], or State fails
// with ErrStateTransaction. Changing the copy changes nothing the
// scheduler holds; the canonical state, into which Commit publishes
// branches, changes only through UpdateState, which refuses while a branch
// of it exists (a change made beside a branch would be silently
// overwritten by that branch's Commit). For the same reason, a caller must
// not change a state after handing it to Register.
func (s *Scheduler[W, S, B, O]) State(id RequestID) (S, error) {
	var zero S
	r := s.reqs[id]
	if r == nil || r.status != RequestActive {
		return zero, fmt.Errorf("%w: request %d", ErrUnknownRequest, id)
	}
	c, ok := any(r.state).(Cloner[S])
	if !ok {
		return zero, fmt.Errorf("%w: request %d: state type %T has no Clone() %T method, so State cannot hand out a copy (read it through UpdateState)", ErrStateTransaction, id, r.state, r.state)
	}
	return c.Clone(), nil
}

// UpdateState lets fn change an active request's canonical state, which is
// allowed only while no branch of it exists (no prepared or submitted work).
func (s *Scheduler[W, S, B, O]) UpdateState(id RequestID, fn func(state *S) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	r := s.reqs[id]
	if r == nil || r.status != RequestActive {
		return fmt.Errorf("%w: request %d", ErrUnknownRequest, id)
	}
	if r.branches != 0 {
		return fmt.Errorf("%w: request %d has %d prepared or submitted branches", ErrRequestState, id, r.branches)
	}
	return fn(&r.state)
}

// Enqueue appends one transition to a request's queue.
func (s *Scheduler[W, S, B, O]) Enqueue(id RequestID, work W) (WorkID, error) {
	return s.EnqueueWithDeadline(id, work, time.Time{})
}

// EnqueueWithDeadline appends one transition that must be submitted by
// deadline (the zero time: none). A request whose queued or prepared work
// misses its deadline is cancelled with status RequestDeadlineExceeded.
func (s *Scheduler[W, S, B, O]) EnqueueWithDeadline(id RequestID, work W, deadline time.Time) (WorkID, error) {
	r, err := s.admit(id, 1)
	if err != nil {
		return WorkID{}, err
	}
	return s.accept(r, work, deadline), nil
}

// EnqueueBatch appends transitions in order, all or none: if the queue
// cannot take every one, none is accepted.
func (s *Scheduler[W, S, B, O]) EnqueueBatch(id RequestID, works []W) ([]WorkID, error) {
	r, err := s.admit(id, len(works))
	if err != nil {
		return nil, err
	}
	ids := make([]WorkID, len(works))
	for i, w := range works {
		ids[i] = s.accept(r, w, time.Time{})
	}
	return ids, nil
}

// admit checks that n transitions can be accepted for request id.
func (s *Scheduler[W, S, B, O]) admit(id RequestID, n int) (*fairRequest[W, S, B, O], error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if n < 0 || n > s.limits.MaxQueuedWork-s.live {
		return nil, fmt.Errorf("%w: queue capacity %d cannot accept %d transitions for request %d with %d outstanding",
			ErrCapacity, s.limits.MaxQueuedWork, n, id, s.live)
	}
	r := s.reqs[id]
	if r == nil || r.status != RequestActive {
		return nil, fmt.Errorf("%w: request %d", ErrUnknownRequest, id)
	}
	if uint64(n) > math.MaxUint64-r.next {
		return nil, fmt.Errorf("%w: work identity space of request %d exhausted", ErrCapacity, id)
	}
	return r, nil
}

func (s *Scheduler[W, S, B, O]) accept(r *fairRequest[W, S, B, O], work W, deadline time.Time) WorkID {
	var it *fairItem[W, S, B, O]
	if n := len(s.pool); n > 0 {
		it = s.pool[n-1]
		s.pool[n-1] = nil
		s.pool = s.pool[:n-1]
	} else {
		it = new(fairItem[W, S, B, O])
	}
	it.id = WorkID{Request: r.id, Sequence: r.next}
	it.req, it.work, it.life, it.disp = r, work, WorkQueued, dispPublish
	if !deadline.IsZero() {
		it.deadline, it.hasDeadline = deadline, true
		if s.deadlined == 0 || deadline.Before(s.earliest) {
			s.earliest = deadline
		}
		s.deadlined++
	}
	r.next++
	if r.pending.len() == 0 {
		s.ready.pushBack(r)
	}
	r.pending.pushBack(it)
	s.queued++
	s.live++
	s.accepted++
	s.peakLive = max(s.peakLive, s.live)
	return it.id
}

// retire ends a live item: it records a lifecycle other than committed in
// its request, and returns the item to the pool.
func (s *Scheduler[W, S, B, O]) retire(it *fairItem[W, S, B, O]) {
	if it.life != WorkCommitted {
		it.req.setFinal(it.id.Sequence, it.life)
	}
	s.dropDeadline(it)
	var zeroW W
	var zeroB B
	var zeroO O
	it.req, it.work, it.branch, it.out = nil, zeroW, zeroB, zeroO
	it.deadline, it.cancelledAt = time.Time{}, time.Time{}
	it.desc = it.desc[:0]
	s.live--
	s.pool = append(s.pool, it)
}

func (s *Scheduler[W, S, B, O]) dropDeadline(it *fairItem[W, S, B, O]) {
	if it.hasDeadline {
		it.hasDeadline = false
		s.deadlined--
	}
}

// retireSubmitted retires submitted work, which no longer holds a branch.
func (s *Scheduler[W, S, B, O]) retireSubmitted(it *fairItem[W, S, B, O]) {
	if it.disp == dispAbandon {
		s.abandoned--
	}
	it.req.branches--
	it.req.submitted--
	s.retire(it)
}

// abandon marks submitted work of a request that is no longer active.
func (s *Scheduler[W, S, B, O]) abandon(it *fairItem[W, S, B, O], now time.Time) {
	it.disp, it.cancelledAt, it.life = dispAbandon, now, WorkAbandoned
	s.abandoned++
}

// Prepare takes branches for up to limit queued transitions, visiting
// requests round-robin: each visit prepares one transition of one request
// and sends the request to the back of the line. A request is skipped
// while it has as many branches as MaxInFlightPerRequest, or any branch
// when its state does not allow parallel branches. Expired deadlines are
// applied first.
func (s *Scheduler[W, S, B, O]) Prepare(limit int, now time.Time) (int, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, fmt.Errorf("%w: preparation bound %d must be positive", ErrCapacity, limit)
	}
	if err := s.expireDeadlines(now); err != nil {
		return 0, err
	}
	return s.prepare(limit, now)
}

func (s *Scheduler[W, S, B, O]) prepare(limit int, now time.Time) (int, error) {
	count, stalled := 0, 0
	for count < limit && s.ready.len() > 0 {
		r := s.ready.popFront()
		if r.branches >= s.limits.MaxInFlightPerRequest || r.branches > 0 && !r.state.ParallelBranches() {
			s.ready.pushBack(r)
			stalled++
			if stalled >= s.ready.len() {
				break // every waiting request is blocked on its branches
			}
			continue
		}
		stalled = 0
		it := r.pending.popFront()
		s.queued--
		if r.pending.len() > 0 {
			s.ready.pushBack(r)
		}
		if slice := it.work.ExecutionSlice(); slice <= 0 || slice > s.limits.ExecutionSlice {
			s.failUnsubmitted(it, now)
			return count, fmt.Errorf("%w: work %v: execution slice %d outside [1, %d]", ErrDescriptor, it.id, slice, s.limits.ExecutionSlice)
		}
		desc, err := it.work.AppendDescriptor(it.desc[:0])
		if err != nil {
			s.failUnsubmitted(it, now)
			return count, fmt.Errorf("%w: work %v: %w", ErrDescriptor, it.id, err)
		}
		it.desc = desc
		branch, err := r.state.Branch()
		if err != nil {
			s.failUnsubmitted(it, now)
			return count, fmt.Errorf("%w: work %v: branch: %w", ErrStateTransaction, it.id, err)
		}
		it.branch, it.life = branch, WorkPrepared
		r.branches++
		s.prepared.pushBack(it)
		count++
	}
	return count, nil
}

// failUnsubmitted fails work taken off its request's queue before it got a
// branch, and with it the request.
func (s *Scheduler[W, S, B, O]) failUnsubmitted(it *fairItem[W, S, B, O], now time.Time) {
	r := it.req
	it.life = WorkFailed
	s.failed++
	s.retire(it)
	s.failRequest(r, now)
}

// submitCapacity is how many transitions a turn may submit now.
func (s *Scheduler[W, S, B, O]) submitCapacity() int {
	return max(0, min(s.limits.MaxInFlightGlobal-len(s.submitted), s.limits.MaxNewSubmissionsPerTurn))
}

// Submit hands a bounded prefix of prepared work, in preparation order, to
// backend: at most MaxNewSubmissionsPerTurn, and no more than keeps
// submitted work within MaxInFlightGlobal. A submission error fails the
// work and its request and stops the turn.
func (s *Scheduler[W, S, B, O]) Submit(now time.Time, backend Backend[W, B, O]) (int, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	if err := s.expireDeadlines(now); err != nil {
		return 0, err
	}
	capacity := s.submitCapacity()
	count := 0
	for count < capacity && s.prepared.len() > 0 {
		it := s.prepared.front()
		if it.hasDeadline && !it.deadline.After(now) {
			if err := s.cancel(it.req, causeDeadline, now); err != nil {
				return count, err
			}
			continue
		}
		s.prepared.popFront()
		out, err := backend.Submit(it.id, it.work, &it.branch)
		if err != nil {
			r, id := it.req, it.id
			derr := r.state.Discard(it.branch)
			it.life = WorkFailed
			s.failed++
			r.branches--
			s.retire(it)
			s.failRequest(r, now)
			if derr != nil {
				return count, fmt.Errorf("%w: work %v: %w; branch discard also failed: %v", ErrSubmission, id, err, derr)
			}
			return count, fmt.Errorf("%w: work %v: %w", ErrSubmission, id, err)
		}
		if name := out.Backend(); name != "" && name != s.lastBackend {
			if i, found := slices.BinarySearch(s.backends, name); !found {
				s.backends = slices.Insert(s.backends, i, name)
			}
			s.lastBackend = name
		}
		s.allPreemptible = s.allPreemptible && out.Preemptible()
		s.dropDeadline(it)
		it.out, it.life, it.disp = out, WorkSubmitted, dispPublish
		it.req.submitted++
		s.submitted = append(s.submitted, it)
		s.peakInFlight = max(s.peakInFlight, len(s.submitted))
		count++
	}
	if count != 0 {
		s.drainCycles++
	}
	s.updateAbandonedPeak()
	return count, nil
}

// Poll observes the exact completion of every submitted transition and
// resolves the completed ones: successful work of an active request is
// committed, abandoned work is released, failed work fails its request
// (whose other submitted work is then abandoned). Poll works on a poisoned
// scheduler too, so that retained work is released when it completes.
func (s *Scheduler[W, S, B, O]) Poll(now time.Time) Progress[W, O] {
	var p Progress[W, O]
	s.poll(now, &p)
	return p
}

// fairObservation is one local completion observation.
type fairObservation struct {
	status uint32 // obsIncomplete, obsComplete or obsFailed
	err    error
}

// observe asks every submitted output for its completion, once, into
// s.obs, and returns how many completed successfully.
func (s *Scheduler[W, S, B, O]) observe() int {
	s.obs = slices.Grow(s.obs[:0], len(s.submitted))[:len(s.submitted)]
	done := 0
	for i, it := range s.submitted {
		ok, err := it.out.Complete()
		switch {
		case err != nil:
			s.obs[i] = fairObservation{status: obsFailed, err: err}
		case ok:
			s.obs[i] = fairObservation{status: obsComplete}
			done++
		default:
			s.obs[i] = fairObservation{status: obsIncomplete}
		}
	}
	return done
}

func (s *Scheduler[W, S, B, O]) poll(now time.Time, p *Progress[W, O]) {
	p.Committed = slices.Grow(p.Committed, s.observe())
	items := s.beginResolve()
	for i, it := range items {
		switch o := s.obs[i]; o.status {
		case obsFailed:
			s.failObserved(it, fmt.Errorf("%w: work %v: %w", ErrCompletion, it.id, o.err), now, p)
		case obsComplete:
			s.resolve(it, now, p)
		default:
			s.submitted = append(s.submitted, it)
		}
	}
	clear(s.obs)
	s.endResolve(items, now)
}

// beginResolve moves the submitted list aside while completions are
// resolved, so that a request failing meanwhile does not abandon work
// whose completion this pass has yet to look at; endResolve does that for
// whatever is still in flight.
func (s *Scheduler[W, S, B, O]) beginResolve() []*fairItem[W, S, B, O] {
	items := s.submitted
	s.submitted = s.spare[:0]
	return items
}

func (s *Scheduler[W, S, B, O]) endResolve(items []*fairItem[W, S, B, O], now time.Time) {
	clear(items)
	s.spare = items[:0]
	for _, it := range s.submitted {
		if it.req.status != RequestActive && it.disp == dispPublish {
			s.abandon(it, now)
		}
	}
	s.updateAbandonedPeak()
}

// failObserved fails submitted work whose completion could not be observed
// (or reported failure).
func (s *Scheduler[W, S, B, O]) failObserved(it *fairItem[W, S, B, O], cause error, now time.Time, p *Progress[W, O]) {
	r, id := it.req, it.id
	if it.disp != dispFail {
		s.failed++
	}
	if derr := r.state.Discard(it.branch); derr != nil {
		cause = fmt.Errorf("%w; branch discard also failed: %v", cause, derr)
	}
	it.life = WorkFailed
	s.retireSubmitted(it)
	s.failRequest(r, now)
	p.Failed = append(p.Failed, Failure{ID: id, Err: cause})
}

// resolve settles completed work according to its disposition.
func (s *Scheduler[W, S, B, O]) resolve(it *fairItem[W, S, B, O], now time.Time, p *Progress[W, O]) {
	r, id := it.req, it.id
	switch it.disp {
	case dispAbandon:
		if err := r.state.Discard(it.branch); err != nil {
			it.life = WorkFailed
			s.failed++
			p.Failed = append(p.Failed, Failure{ID: id, Err: fmt.Errorf("%w: work %v: discarding the abandoned branch: %w", ErrStateTransaction, id, err)})
		}
		s.abandonReleased++
		latency := max(now.Sub(it.cancelledAt), 0)
		s.lastRelease, s.maxRelease = latency, max(s.maxRelease, latency)
		s.released = true
		s.retireSubmitted(it)
	case dispPublish:
		it.life = WorkCompleting
		if r.status != RequestActive {
			if err := r.state.Discard(it.branch); err != nil {
				it.life = WorkFailed
				s.failed++
				p.Failed = append(p.Failed, Failure{ID: id, Err: fmt.Errorf("%w: work %v: discarding the unpublished branch: %w", ErrStateTransaction, id, err)})
			} else {
				it.life = WorkAbandoned
			}
			s.retireSubmitted(it)
			return
		}
		if err := r.state.Commit(it.branch); err != nil {
			it.life = WorkFailed
			s.failed++
			s.retireSubmitted(it)
			s.failRequest(r, now)
			p.Failed = append(p.Failed, Failure{ID: id, Err: fmt.Errorf("%w: work %v: commit: %w", ErrStateTransaction, id, err)})
			return
		}
		it.life = WorkCommitted
		s.completed++
		p.Committed = append(p.Committed, Committed[W, O]{ID: id, Work: it.work, Output: it.out})
		s.retireSubmitted(it)
	case dispFail:
		cause := fmt.Errorf("%w: work %v: the backend failed on at least one participant", ErrDistributedFailure, id)
		if err := r.state.Discard(it.branch); err != nil {
			cause = fmt.Errorf("%w; branch discard also failed: %v", cause, err)
		}
		it.life = WorkFailed
		s.retireSubmitted(it)
		s.failRequest(r, now)
		p.Failed = append(p.Failed, Failure{ID: id, Err: cause})
	}
}

// RunLocalTurn runs one bounded turn: resolve completions, prepare and
// submit up to MaxNewSubmissionsPerTurn transitions, resolve again. The
// progress holds what was resolved even when an error stops the turn.
func (s *Scheduler[W, S, B, O]) RunLocalTurn(now time.Time, backend Backend[W, B, O]) (Progress[W, O], error) {
	if err := s.usable(); err != nil {
		return Progress[W, O]{}, err
	}
	var p Progress[W, O]
	s.poll(now, &p)
	if _, err := s.Prepare(s.limits.MaxNewSubmissionsPerTurn, now); err != nil {
		return p, err
	}
	n, err := s.Submit(now, backend)
	p.NewlySubmitted = n
	if err != nil {
		return p, err
	}
	s.poll(now, &p)
	return p, nil
}

// Cancel cancels an active request now: its queued and prepared work is
// discarded, its submitted work is abandoned and kept until its exact
// completion.
func (s *Scheduler[W, S, B, O]) Cancel(id RequestID) error {
	return s.CancelAt(id, time.Now())
}

// CancelAt is Cancel with the caller's clock reading, from which the
// cancellation-to-release latency of abandoned work is measured.
func (s *Scheduler[W, S, B, O]) CancelAt(id RequestID, now time.Time) error {
	if err := s.usable(); err != nil {
		return err
	}
	r, err := s.cancellable(id)
	if err != nil {
		return err
	}
	return s.cancel(r, causeExplicit, now)
}

func (s *Scheduler[W, S, B, O]) cancellable(id RequestID) (*fairRequest[W, S, B, O], error) {
	r := s.reqs[id]
	if r == nil {
		return nil, fmt.Errorf("%w: request %d", ErrUnknownRequest, id)
	}
	if r.status != RequestActive {
		return nil, fmt.Errorf("%w: request %d is already %s", ErrRequestState, id, r.status)
	}
	return r, nil
}

// cancel ends an active request for cause.
func (s *Scheduler[W, S, B, O]) cancel(r *fairRequest[W, S, B, O], cause cancelCause, now time.Time) error {
	queued := s.endRequest(r, WorkAbandoned)
	prepared, derr := s.discardPrepared(r)
	before := uint64(queued + prepared)
	s.discarded += before
	s.cancelBefore += before
	for _, it := range s.submitted {
		if it.req == r && it.disp == dispPublish {
			s.abandon(it, now)
			s.cancelAfter++
		}
	}
	switch cause {
	case causeDeadline:
		r.status = RequestDeadlineExceeded
		s.expiredReqs++
	default:
		r.status = RequestCancelled
		s.cancelledReqs++
	}
	if derr != nil {
		r.status = RequestFailed
	}
	s.updateAbandonedPeak()
	if derr != nil {
		return fmt.Errorf("%w: cancelling request %d: %w", ErrStateTransaction, r.id, derr)
	}
	return nil
}

// endRequest takes an active request out of service: its queued work ends
// with lifecycle l. It returns how many were queued. The caller sets the
// terminal status.
func (s *Scheduler[W, S, B, O]) endRequest(r *fairRequest[W, S, B, O], l WorkLifecycle) int {
	n := r.pending.len()
	for r.pending.len() > 0 {
		it := r.pending.popFront()
		it.life = l
		s.retire(it)
	}
	s.queued -= n
	if n > 0 {
		s.ready.retain(func(c *fairRequest[W, S, B, O]) bool { return c != r })
	}
	r.status = RequestFailed // provisional: not active any more
	s.active--
	return n
}

// discardPrepared discards the prepared branches of a request.
func (s *Scheduler[W, S, B, O]) discardPrepared(r *fairRequest[W, S, B, O]) (int, error) {
	if r.branches == r.submitted {
		return 0, nil
	}
	n := 0
	var errs []error
	s.prepared.retain(func(it *fairItem[W, S, B, O]) bool {
		if it.req != r {
			return true
		}
		n++
		if err := r.state.Discard(it.branch); err != nil {
			it.life = WorkFailed
			s.failed++
			errs = append(errs, fmt.Errorf("work %v: %w", it.id, err))
		} else {
			it.life = WorkAbandoned
		}
		r.branches--
		s.retire(it)
		return false
	})
	return n, errors.Join(errs...)
}

// failRequest ends an active request as failed: queued and prepared work
// fails or is discarded, submitted work is abandoned.
func (s *Scheduler[W, S, B, O]) failRequest(r *fairRequest[W, S, B, O], now time.Time) {
	if r.status != RequestActive {
		return
	}
	queued := s.endRequest(r, WorkFailed)
	prepared, _ := s.discardPrepared(r)
	s.discarded += uint64(queued + prepared)
	for _, it := range s.submitted {
		if it.req == r && it.disp == dispPublish {
			s.abandon(it, now)
		}
	}
	r.status = RequestFailed
}

// Finish ends a request normally. Its queued and prepared work is
// discarded; it must have no submitted work.
func (s *Scheduler[W, S, B, O]) Finish(id RequestID) error {
	if err := s.usable(); err != nil {
		return err
	}
	r := s.reqs[id]
	if r != nil && r.submitted > 0 {
		return fmt.Errorf("%w: request %d still has %d submitted transitions", ErrRequestState, id, r.submitted)
	}
	if r == nil || r.status != RequestActive {
		return fmt.Errorf("%w: request %d", ErrUnknownRequest, id)
	}
	queued := s.endRequest(r, WorkAbandoned)
	prepared, derr := s.discardPrepared(r)
	s.discarded += uint64(queued + prepared)
	s.finishedReqs++
	if derr != nil {
		r.status = RequestFailed
		return fmt.Errorf("%w: finishing request %d: %w", ErrStateTransaction, id, derr)
	}
	r.status = RequestFinished
	return nil
}

// Release removes an idle active request (nothing queued, no branch) and
// returns its state. Unlike a terminal request, its id is free at once.
func (s *Scheduler[W, S, B, O]) Release(id RequestID) (S, error) {
	var zero S
	if err := s.usable(); err != nil {
		return zero, err
	}
	r := s.reqs[id]
	if r == nil || r.status != RequestActive {
		return zero, fmt.Errorf("%w: request %d", ErrUnknownRequest, id)
	}
	if r.pending.len() != 0 || r.branches != 0 {
		return zero, fmt.Errorf("%w: request %d still owns %d queued and %d unpublished transitions", ErrRequestState, id, r.pending.len(), r.branches)
	}
	delete(s.reqs, id)
	s.active--
	return r.state, nil
}

// ForgetTerminal removes a terminal request so that its id can be
// registered again, and returns its final status. Work it submitted must
// have been released first. The lifecycle of its work is forgotten too.
func (s *Scheduler[W, S, B, O]) ForgetTerminal(id RequestID) (RequestStatus, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	r := s.reqs[id]
	if r != nil && r.submitted > 0 {
		return 0, fmt.Errorf("%w: request %d still has %d retained abandoned transitions", ErrRequestState, id, r.submitted)
	}
	if r == nil || r.status == RequestActive {
		return 0, fmt.Errorf("%w: request %d is not terminal", ErrUnknownRequest, id)
	}
	delete(s.reqs, id)
	return r.status, nil
}

// Status returns a request's status, active or terminal.
func (s *Scheduler[W, S, B, O]) Status(id RequestID) (RequestStatus, bool) {
	r := s.reqs[id]
	if r == nil {
		return 0, false
	}
	return r.status, true
}

// Lifecycle returns where a transition is in its life. It answers for
// work of registered requests, active or terminal; a released or
// forgotten request's work is unknown.
func (s *Scheduler[W, S, B, O]) Lifecycle(id WorkID) (WorkLifecycle, bool) {
	r := s.reqs[id.Request]
	if r == nil || id.Sequence >= r.next {
		return 0, false
	}
	if l, ok := r.final[id.Sequence]; ok {
		return l, true
	}
	if r.pending.len() > 0 && id.Sequence >= r.pending.front().id.Sequence {
		return WorkQueued, true
	}
	if r.branches > 0 {
		for i := 0; i < s.prepared.len(); i++ {
			if it := s.prepared.at(i); it.id == id {
				return it.life, true
			}
		}
		for _, it := range s.submitted {
			if it.id == id {
				return it.life, true
			}
		}
	}
	return WorkCommitted, true
}

// QueuedFor returns how many transitions an active request has queued.
func (s *Scheduler[W, S, B, O]) QueuedFor(id RequestID) int {
	r := s.reqs[id]
	if r == nil || r.status != RequestActive {
		return 0
	}
	return r.pending.len()
}

// PoisonReason returns why the scheduler was poisoned, if it was.
func (s *Scheduler[W, S, B, O]) PoisonReason() (string, bool) {
	return s.poisonReason, s.poisoned
}

// Capabilities returns the configured bounds and what the backends of
// submitted work have shown they can do.
func (s *Scheduler[W, S, B, O]) Capabilities() Capabilities {
	return Capabilities{
		Limits:                             s.limits,
		ObservedBackends:                   append([]string{}, s.backends...),
		ExecutingWorkPhysicallyPreemptible: len(s.backends) > 0 && s.allPreemptible,
		NonPreemptibleInterval:             "from exact backend submission until that transition's completion resolves",
	}
}

// Report returns current occupancy and cumulative telemetry.
func (s *Scheduler[W, S, B, O]) Report() Report {
	failing := 0
	for _, it := range s.submitted {
		if it.disp == dispFail {
			failing++
		}
	}
	r := Report{
		ActiveRequests:                 s.active,
		QueuedWork:                     s.queued,
		PreparedWork:                   s.prepared.len(),
		SubmittedInFlightWork:          len(s.submitted) - s.abandoned - failing,
		AbandonedInFlightWork:          s.abandoned,
		FailedInFlightWork:             failing,
		CurrentInFlightWork:            len(s.submitted),
		PeakInFlightWork:               s.peakInFlight,
		PeakQueuedWork:                 s.peakLive,
		SubmittedWork:                  s.accepted,
		CompletedWork:                  s.completed,
		FailedWork:                     s.failed,
		DiscardedWork:                  s.discarded,
		CancellationBeforeSubmission:   s.cancelBefore,
		CancellationAfterSubmission:    s.cancelAfter,
		AbandonedReleasedWork:          s.abandonReleased,
		AbandonedRetainedResources:     s.abandonedResources(),
		PeakAbandonedRetainedResources: s.peakAbandonedResources,
		FinishedRequests:               s.finishedReqs,
		CancelledRequests:              s.cancelledReqs,
		DeadlineExpiredRequests:        s.expiredReqs,
		DrainCycles:                    s.drainCycles,
		ConfiguredSubmissionBound:      s.limits.MaxNewSubmissionsPerTurn,
		ConfiguredSliceBound:           s.limits.ExecutionSlice,
		Poisoned:                       s.poisoned,
	}
	if s.released {
		last, peak := s.lastRelease, s.maxRelease
		r.LastCancellationToRelease, r.MaxCancellationToRelease = &last, &peak
	}
	return r
}

func (s *Scheduler[W, S, B, O]) abandonedResources() int {
	if s.abandoned == 0 {
		return 0
	}
	n := 0
	for _, it := range s.submitted {
		if it.disp == dispAbandon {
			n += it.out.RetainedResources()
		}
	}
	return n
}

func (s *Scheduler[W, S, B, O]) updateAbandonedPeak() {
	s.peakAbandonedResources = max(s.peakAbandonedResources, s.abandonedResources())
}

// expireDeadlines cancels, in request id order, every active request with
// queued or prepared work whose deadline is at or before now.
func (s *Scheduler[W, S, B, O]) expireDeadlines(now time.Time) error {
	for _, id := range s.expiredRequests(now) {
		if err := s.cancel(s.reqs[id], causeDeadline, now); err != nil {
			return err
		}
	}
	return nil
}

// expiredRequests lists, sorted, the active requests with queued or
// prepared work due at or before now. It also tightens the lower bound of
// the remaining deadlines. The result is valid until the next call.
func (s *Scheduler[W, S, B, O]) expiredRequests(now time.Time) []RequestID {
	if s.deadlined == 0 || now.Before(s.earliest) {
		return nil
	}
	ids := s.expiredIDs[:0]
	var earliest time.Time
	consider := func(it *fairItem[W, S, B, O]) bool {
		if !it.hasDeadline {
			return false
		}
		if !it.deadline.After(now) {
			return true
		}
		if earliest.IsZero() || it.deadline.Before(earliest) {
			earliest = it.deadline
		}
		return false
	}
	for i := 0; i < s.ready.len(); i++ {
		r := s.ready.at(i)
		hit := false
		for j := 0; j < r.pending.len(); j++ {
			if consider(r.pending.at(j)) {
				hit = true
			}
		}
		if hit {
			ids = append(ids, r.id)
		}
	}
	for i := 0; i < s.prepared.len(); i++ {
		if it := s.prepared.at(i); consider(it) {
			ids = append(ids, it.req.id)
		}
	}
	s.earliest = earliest
	slices.Sort(ids)
	ids = slices.Compact(ids)
	s.expiredIDs = ids
	return ids
}

// poison stops the scheduler after a distributed disagreement. Every
// active request fails; queued and prepared work fails; submitted work is
// abandoned and stays retained until its exact local completion.
func (s *Scheduler[W, S, B, O]) poison(reason string, now time.Time) {
	if s.poisoned {
		return
	}
	discarded := 0
	for _, r := range s.reqs {
		if r.status == RequestActive {
			discarded += s.endRequest(r, WorkFailed)
			r.status = RequestFailed
		}
	}
	var cleanup []string
	for s.prepared.len() > 0 {
		it := s.prepared.popFront()
		r := it.req
		if err := r.state.Discard(it.branch); err != nil {
			cleanup = append(cleanup, fmt.Sprintf("work %v: %v", it.id, err))
			s.failed++
		}
		it.life = WorkFailed
		r.branches--
		s.retire(it)
		discarded++
	}
	s.discarded += uint64(discarded)
	for _, it := range s.submitted {
		if it.disp == dispPublish {
			s.abandon(it, now)
		}
	}
	if len(cleanup) > 0 {
		reason += "; prepared branch cleanup failed: " + strings.Join(cleanup, "; ")
	}
	s.poisoned, s.poisonReason = true, reason
	s.updateAbandonedPeak()
}
