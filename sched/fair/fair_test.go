package fair

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fairCounter is the test state: a number; a branch is the number plus one,
// and committing a branch stores it.
type fairCounter struct {
	v           uint32
	serial      bool // refuses parallel branches
	discards    int
	failBranch  error
	failCommit  error
	failDiscard error
}

func (c *fairCounter) Branch() (uint32, error) {
	if c.failBranch != nil {
		return 0, c.failBranch
	}
	return c.v + 1, nil
}

func (c *fairCounter) Commit(b uint32) error {
	if c.failCommit != nil {
		return c.failCommit
	}
	c.v = b
	return nil
}

func (c *fairCounter) Discard(uint32) error {
	c.discards++
	return c.failDiscard
}

func (c *fairCounter) ParallelBranches() bool { return !c.serial }

// Clone makes the counter readable through Scheduler.State.
func (c *fairCounter) Clone() *fairCounter { d := *c; return &d }

// fairStep is the test work: one descriptor word.
type fairStep uint32

func (w fairStep) AppendDescriptor(dst []uint32) ([]uint32, error) {
	return append(dst, uint32(w)), nil
}
func (w fairStep) ExecutionSlice() int { return 1 }

// fairMock is the test output: complete when *done, failing when fail,
// holding two resources.
type fairMock struct {
	done *bool
	fail bool
}

func (o fairMock) Complete() (bool, error) {
	if o.fail {
		return false, errors.New("mock failure")
	}
	return *o.done, nil
}
func (o fairMock) Backend() string        { return "mock" }
func (o fairMock) Preemptible() bool      { return false }
func (o fairMock) RetainedResources() int { return 2 }

type fairTestSched = Scheduler[fairStep, *fairCounter, uint32, fairMock]

type fairMockBackend = BackendFunc[fairStep, uint32, fairMock]

func newFairTest(t testing.TB, limits Limits) *fairTestSched {
	t.Helper()
	s, err := New[fairStep, *fairCounter, uint32, fairMock](limits)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mockBackend returns outputs sharing the done flag.
func fairMockOf(done *bool) fairMockBackend {
	return func(WorkID, fairStep, *uint32) (fairMock, error) { return fairMock{done: done}, nil }
}

func fairDoneFlag() *bool { b := true; return &b }

func fairMust(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fairMustN(t)(f()) fails the test if f returns an error, else returns its count.
func fairMustN(t testing.TB) func(int, error) int {
	return func(n int, err error) int {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

func fairWantLife(t testing.TB, s *fairTestSched, id WorkID, want WorkLifecycle) {
	t.Helper()
	if got, ok := s.Lifecycle(id); !ok || got != want {
		t.Fatalf("work %v: lifecycle %v (known %v), want %v", id, got, ok, want)
	}
}

func fairWantStatus(t testing.TB, s *fairTestSched, id RequestID, want RequestStatus) {
	t.Helper()
	if got, ok := s.Status(id); !ok || got != want {
		t.Fatalf("request %d: status %v (known %v), want %v", id, got, ok, want)
	}
}

// Seed: scheduler_construction_revalidates_public_limit_fields.
func TestFairLimitsValidatedOnConstruction(t *testing.T) {
	d := DefaultLimits()
	if d != (Limits{64, 256, 1, 64, 1, math.MaxInt}) {
		t.Fatalf("defaults %+v", d)
	}
	if _, err := New[fairStep, *fairCounter, uint32, fairMock](d); err != nil {
		t.Fatal(err)
	}
	fields := []func(*Limits) *int{
		func(l *Limits) *int { return &l.MaxActiveRequests },
		func(l *Limits) *int { return &l.MaxQueuedWork },
		func(l *Limits) *int { return &l.MaxNewSubmissionsPerTurn },
		func(l *Limits) *int { return &l.MaxInFlightGlobal },
		func(l *Limits) *int { return &l.MaxInFlightPerRequest },
		func(l *Limits) *int { return &l.ExecutionSlice },
	}
	for i, f := range fields {
		for _, bad := range []int{0, -1} {
			l := DefaultLimits()
			*f(&l) = bad
			if _, err := New[fairStep, *fairCounter, uint32, fairMock](l); !errors.Is(err, ErrInvalidLimits) {
				t.Errorf("field %d = %d: %v", i, bad, err)
			}
		}
	}
	l, err := NewLimits(8, 32)
	if err != nil || l != (Limits{8, 32, 1, 8, 1, math.MaxInt}) {
		t.Fatalf("NewLimits: %+v %v", l, err)
	}
	if _, err := NewLimits(0, 32); !errors.Is(err, ErrInvalidLimits) {
		t.Fatalf("NewLimits(0, 32): %v", err)
	}
}

// Seed: queued_prepared_submitted_committed_exactly.
func TestFairLifecycleQueuedPreparedSubmittedCommitted(t *testing.T) {
	done := new(bool)
	s := newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(1, &fairCounter{}))
	id, err := s.Enqueue(1, 7)
	fairMust(t, err)
	if id != (WorkID{Request: 1, Sequence: 0}) || id.String() != "1/0" {
		t.Fatalf("work id %v", id)
	}
	fairWantLife(t, s, id, WorkQueued)
	if fairMustN(t)(s.Prepare(1, time.Now())) != 1 {
		t.Fatal("nothing prepared")
	}
	fairWantLife(t, s, id, WorkPrepared)
	if fairMustN(t)(s.Submit(time.Now(), fairMockOf(done))) != 1 {
		t.Fatal("nothing submitted")
	}
	fairWantLife(t, s, id, WorkSubmitted)
	if p := s.Poll(time.Now()); len(p.Committed) != 0 {
		t.Fatalf("committed before completion: %+v", p)
	}
	*done = true
	p := s.Poll(time.Now())
	if len(p.Committed) != 1 || p.Committed[0].ID != id || p.Committed[0].Work != 7 {
		t.Fatalf("progress %+v", p)
	}
	fairWantLife(t, s, id, WorkCommitted)
	if st, _ := s.State(1); st.v != 1 {
		t.Fatalf("state %d, want 1", st.v)
	}
	if r := s.Report(); r.CompletedWork != 1 || r.CurrentInFlightWork != 0 || r.DrainCycles != 1 || r.SubmittedWork != 1 {
		t.Fatalf("report %+v", r)
	}
}

// Seed: cancellation_retains_submitted_resources_until_completion.
func TestFairCancelRetainsSubmittedUntilCompletion(t *testing.T) {
	done := new(bool)
	s := newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(2, &fairCounter{}))
	id, _ := s.Enqueue(2, 1)
	fairMustN(t)(s.Prepare(1, time.Now()))
	fairMustN(t)(s.Submit(time.Now(), fairMockOf(done)))
	cancelled := time.Now()
	fairMust(t, s.CancelAt(2, cancelled))
	fairWantLife(t, s, id, WorkAbandoned)
	fairWantStatus(t, s, 2, RequestCancelled)
	r := s.Report()
	if r.AbandonedRetainedResources != 2 || r.AbandonedInFlightWork != 1 || r.CancellationAfterSubmission != 1 || r.CancelledRequests != 1 {
		t.Fatalf("report %+v", r)
	}
	if _, err := s.ForgetTerminal(2); !errors.Is(err, ErrRequestState) {
		t.Fatalf("forget with retained work: %v", err)
	}
	*done = true
	if p := s.Poll(cancelled.Add(5 * time.Millisecond)); len(p.Committed) != 0 || len(p.Failed) != 0 {
		t.Fatalf("abandoned work published: %+v", p)
	}
	r = s.Report()
	if r.CurrentInFlightWork != 0 || r.AbandonedReleasedWork != 1 || r.AbandonedRetainedResources != 0 || r.PeakAbandonedRetainedResources != 2 {
		t.Fatalf("report %+v", r)
	}
	if r.LastCancellationToRelease == nil || *r.LastCancellationToRelease != 5*time.Millisecond || *r.MaxCancellationToRelease != 5*time.Millisecond {
		t.Fatalf("latency %v %v", r.LastCancellationToRelease, r.MaxCancellationToRelease)
	}
	fairWantLife(t, s, id, WorkAbandoned)
	if st, err := s.ForgetTerminal(2); err != nil || st != RequestCancelled {
		t.Fatalf("forget: %v %v", st, err)
	}
	if _, ok := s.Status(2); ok {
		t.Fatal("forgotten request still known")
	}
	fairMust(t, s.Register(2, &fairCounter{})) // the id is free again
}

// Seed: exact_completion_failure_does_not_commit.
func TestFairCompletionFailureDoesNotCommit(t *testing.T) {
	s := newFairTest(t, DefaultLimits())
	c := &fairCounter{}
	fairMust(t, s.Register(3, c))
	id, _ := s.Enqueue(3, 1)
	fairMustN(t)(s.Prepare(1, time.Now()))
	fairMustN(t)(s.Submit(time.Now(), fairMockBackend(func(WorkID, fairStep, *uint32) (fairMock, error) {
		return fairMock{done: fairDoneFlag(), fail: true}, nil
	})))
	p := s.Poll(time.Now())
	if len(p.Failed) != 1 || len(p.Committed) != 0 || !errors.Is(p.Failed[0].Err, ErrCompletion) || !strings.Contains(p.Failed[0].Err.Error(), "mock failure") {
		t.Fatalf("progress %+v", p)
	}
	fairWantLife(t, s, id, WorkFailed)
	fairWantStatus(t, s, 3, RequestFailed)
	if c.v != 0 || c.discards != 1 {
		t.Fatalf("state %d discards %d: the failed branch must be discarded, not committed", c.v, c.discards)
	}
	if r := s.Report(); r.FailedWork != 1 || r.CurrentInFlightWork != 0 || r.ActiveRequests != 0 {
		t.Fatalf("report %+v", r)
	}
}

// Seed: request_failure_abandons_incomplete_sibling_until_exact_completion.
func TestFairFailureAbandonsIncompleteSibling(t *testing.T) {
	waiting := new(bool)
	limits := Limits{MaxActiveRequests: 1, MaxQueuedWork: 2, MaxNewSubmissionsPerTurn: 2, MaxInFlightGlobal: 2, MaxInFlightPerRequest: 2, ExecutionSlice: 1}
	s := newFairTest(t, limits)
	fairMust(t, s.Register(31, &fairCounter{}))
	ids, err := s.EnqueueBatch(31, []fairStep{1, 2})
	fairMust(t, err)
	if fairMustN(t)(s.Prepare(2, time.Now())) != 2 {
		t.Fatal("want both prepared (parallel branches)")
	}
	fairMustN(t)(s.Submit(time.Now(), fairMockBackend(func(id WorkID, _ fairStep, _ *uint32) (fairMock, error) {
		if id.Sequence == 0 {
			return fairMock{done: fairDoneFlag(), fail: true}, nil
		}
		return fairMock{done: waiting}, nil
	})))
	p := s.Poll(time.Now())
	if len(p.Failed) != 1 || p.Failed[0].ID != ids[0] {
		t.Fatalf("progress %+v", p)
	}
	fairWantLife(t, s, ids[0], WorkFailed)
	fairWantLife(t, s, ids[1], WorkAbandoned)
	if r := s.Report(); r.AbandonedRetainedResources != 2 || r.CurrentInFlightWork != 1 {
		t.Fatalf("report %+v", r)
	}
	if err := s.Finish(31); !errors.Is(err, ErrRequestState) {
		t.Fatalf("finish with retained work: %v", err)
	}
	*waiting = true
	if p := s.Poll(time.Now()); len(p.Committed) != 0 {
		t.Fatalf("abandoned sibling published: %+v", p)
	}
	if r := s.Report(); r.CurrentInFlightWork != 0 || r.AbandonedReleasedWork != 1 {
		t.Fatalf("report %+v", r)
	}
	fairWantLife(t, s, ids[1], WorkAbandoned)
}

// A sibling that completes in the same poll as the failure is not
// published either, and is not counted as a released abandonment.
func TestFairFailureSiblingCompletingInSamePoll(t *testing.T) {
	limits := Limits{MaxActiveRequests: 1, MaxQueuedWork: 2, MaxNewSubmissionsPerTurn: 2, MaxInFlightGlobal: 2, MaxInFlightPerRequest: 2, ExecutionSlice: 1}
	s := newFairTest(t, limits)
	c := &fairCounter{}
	fairMust(t, s.Register(1, c))
	ids, _ := s.EnqueueBatch(1, []fairStep{1, 2})
	fairMustN(t)(s.Prepare(2, time.Now()))
	fairMustN(t)(s.Submit(time.Now(), fairMockBackend(func(id WorkID, _ fairStep, _ *uint32) (fairMock, error) {
		return fairMock{done: fairDoneFlag(), fail: id.Sequence == 0}, nil
	})))
	p := s.Poll(time.Now())
	if len(p.Failed) != 1 || len(p.Committed) != 0 || c.v != 0 {
		t.Fatalf("progress %+v, state %d", p, c.v)
	}
	fairWantLife(t, s, ids[1], WorkAbandoned)
	if r := s.Report(); r.CurrentInFlightWork != 0 || r.AbandonedReleasedWork != 0 {
		t.Fatalf("report %+v", r)
	}
}

// Seed: submission_failure_marks_work_and_request_failed.
func TestFairSubmissionFailure(t *testing.T) {
	s := newFairTest(t, DefaultLimits())
	c := &fairCounter{}
	fairMust(t, s.Register(4, c))
	id, _ := s.Enqueue(4, 1)
	later, _ := s.Enqueue(4, 2)
	fairMustN(t)(s.Prepare(1, time.Now()))
	boom := errors.New("mock submit")
	_, err := s.Submit(time.Now(), fairMockBackend(func(WorkID, fairStep, *uint32) (fairMock, error) {
		return fairMock{}, boom
	}))
	if !errors.Is(err, ErrSubmission) || !errors.Is(err, boom) || !strings.Contains(err.Error(), "4/0") {
		t.Fatalf("submit: %v", err)
	}
	fairWantLife(t, s, id, WorkFailed)
	fairWantLife(t, s, later, WorkFailed)
	fairWantStatus(t, s, 4, RequestFailed)
	if c.discards != 1 {
		t.Fatalf("%d discards, want the failed branch discarded", c.discards)
	}
	if r := s.Report(); r.FailedWork != 1 || r.DiscardedWork != 1 || r.QueuedWork != 0 || r.ActiveRequests != 0 {
		t.Fatalf("report %+v", r)
	}
}

// Seed: deadlines_batches_and_fairness_are_backend_neutral.
func TestFairDeadlinesBatchesAndFairness(t *testing.T) {
	s := newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(10, &fairCounter{}))
	fairMust(t, s.Register(20, &fairCounter{}))
	_, err := s.EnqueueBatch(10, []fairStep{1, 2})
	fairMust(t, err)
	_, err = s.Enqueue(20, 3)
	fairMust(t, err)
	fairMustN(t)(s.Prepare(3, time.Now()))
	var order []RequestID
	fairMustN(t)(s.Submit(time.Now(), fairMockBackend(func(id WorkID, _ fairStep, _ *uint32) (fairMock, error) {
		order = append(order, id.Request)
		return fairMock{done: fairDoneFlag()}, nil
	})))
	if len(order) != 1 || order[0] != 10 {
		t.Fatalf("submitted %v, want [10]: one submission per turn by default", order)
	}

	now := time.Now()
	fairMust(t, s.Register(30, &fairCounter{}))
	id, err := s.EnqueueWithDeadline(30, 4, now.Add(-time.Second))
	fairMust(t, err)
	fairMustN(t)(s.Prepare(1, now))
	fairWantStatus(t, s, 30, RequestDeadlineExceeded)
	fairWantLife(t, s, id, WorkAbandoned)
	if r := s.Report(); r.DeadlineExpiredRequests != 1 || r.CancellationBeforeSubmission != 1 || r.DiscardedWork != 1 {
		t.Fatalf("report %+v", r)
	}
}

// Fairness across more than two requests: whatever their queue lengths,
// requests are served one transition each in turn, so a request with a
// long queue cannot starve the others.
func TestFairRoundRobinThreeRequests(t *testing.T) {
	limits := Limits{MaxActiveRequests: 4, MaxQueuedWork: 256, MaxNewSubmissionsPerTurn: 3, MaxInFlightGlobal: 64, MaxInFlightPerRequest: 1, ExecutionSlice: 1}
	s := newFairTest(t, limits)
	for id := RequestID(1); id <= 4; id++ {
		fairMust(t, s.Register(id, &fairCounter{}))
	}
	// Request 1 floods the queue first; 2, 3 and 4 arrive later, smaller.
	flood := make([]fairStep, 100)
	_, err := s.EnqueueBatch(1, flood)
	fairMust(t, err)
	for id := RequestID(2); id <= 4; id++ {
		_, err := s.EnqueueBatch(id, make([]fairStep, 5))
		fairMust(t, err)
	}
	var order []RequestID
	backend := fairMockBackend(func(id WorkID, _ fairStep, _ *uint32) (fairMock, error) {
		order = append(order, id.Request)
		return fairMock{done: fairDoneFlag()}, nil
	})
	for turn := 0; turn < 10; turn++ {
		p, err := s.RunLocalTurn(time.Now(), backend)
		fairMust(t, err)
		// Three per turn while several requests wait; once only request 1
		// is left, its one-branch limit allows one.
		want := 3
		if turn >= 7 {
			want = 1
		}
		if p.NewlySubmitted != want || len(p.Committed) != want {
			t.Fatalf("turn %d: progress %+v", turn, p)
		}
	}
	// The first 20 submissions cycle through all four requests.
	for i := 0; i < 20; i++ {
		if want := RequestID(i%4 + 1); order[i] != want {
			t.Fatalf("submission %d went to request %d, want %d (order %v)", i, order[i], want, order)
		}
	}
	counts := map[RequestID]int{}
	for _, id := range order {
		counts[id]++
	}
	if counts[2] != 5 || counts[3] != 5 || counts[4] != 5 || counts[1] != len(order)-15 {
		t.Fatalf("per-request submissions %v", counts)
	}
	// The small requests finished within 7 turns.
	for _, id := range []RequestID{2, 3, 4} {
		if st, _ := s.State(id); st.v != 5 {
			t.Fatalf("request %d committed %d of 5", id, st.v)
		}
	}
}

// A request blocked on its branches (serial state, or its per-request
// limit) is skipped without stalling the others; when every waiting
// request is blocked, preparation stops.
func TestFairBlockedRequestsAreSkipped(t *testing.T) {
	limits := Limits{MaxActiveRequests: 3, MaxQueuedWork: 64, MaxNewSubmissionsPerTurn: 8, MaxInFlightGlobal: 64, MaxInFlightPerRequest: 2, ExecutionSlice: 1}
	s := newFairTest(t, limits)
	fairMust(t, s.Register(1, &fairCounter{serial: true}))
	fairMust(t, s.Register(2, &fairCounter{}))
	_, _ = s.EnqueueBatch(1, make([]fairStep, 4))
	_, _ = s.EnqueueBatch(2, make([]fairStep, 4))
	// Request 1 takes one branch (serial), request 2 two (its limit).
	if n := fairMustN(t)(s.Prepare(8, time.Now())); n != 3 {
		t.Fatalf("prepared %d, want 3", n)
	}
	if r := s.Report(); r.PreparedWork != 3 || r.QueuedWork != 5 {
		t.Fatalf("report %+v", r)
	}
	if n := fairMustN(t)(s.Prepare(8, time.Now())); n != 0 {
		t.Fatalf("prepared %d more while every request is blocked", n)
	}
	if err := s.UpdateState(1, func(**fairCounter) error { return nil }); !errors.Is(err, ErrRequestState) {
		t.Fatalf("update with a branch: %v", err)
	}
	if _, err := s.Release(2); !errors.Is(err, ErrRequestState) {
		t.Fatalf("release with work: %v", err)
	}
}

// The global in-flight bound and the per-turn bound cap submissions; the
// rest stays prepared for later turns.
func TestFairSubmissionBounds(t *testing.T) {
	limits := Limits{MaxActiveRequests: 8, MaxQueuedWork: 64, MaxNewSubmissionsPerTurn: 3, MaxInFlightGlobal: 4, MaxInFlightPerRequest: 1, ExecutionSlice: 1}
	s := newFairTest(t, limits)
	for id := RequestID(0); id < 8; id++ {
		fairMust(t, s.Register(id, &fairCounter{}))
		_, err := s.Enqueue(id, fairStep(id))
		fairMust(t, err)
	}
	done := new(bool)
	fairMustN(t)(s.Prepare(8, time.Now()))
	if n := fairMustN(t)(s.Submit(time.Now(), fairMockOf(done))); n != 3 {
		t.Fatalf("submitted %d, want the per-turn bound 3", n)
	}
	if n := fairMustN(t)(s.Submit(time.Now(), fairMockOf(done))); n != 1 {
		t.Fatalf("submitted %d, want 1 more (global bound 4)", n)
	}
	if n := fairMustN(t)(s.Submit(time.Now(), fairMockOf(done))); n != 0 {
		t.Fatalf("submitted %d beyond the global bound", n)
	}
	if r := s.Report(); r.CurrentInFlightWork != 4 || r.PeakInFlightWork != 4 || r.PreparedWork != 4 || r.DrainCycles != 2 {
		t.Fatalf("report %+v", r)
	}
}

// An atomic batch is all or nothing: at capacity, none of it is accepted,
// and smaller enqueues still fit afterwards.
func TestFairBatchAtomicAtCapacity(t *testing.T) {
	limits := Limits{MaxActiveRequests: 2, MaxQueuedWork: 5, MaxNewSubmissionsPerTurn: 1, MaxInFlightGlobal: 2, MaxInFlightPerRequest: 1, ExecutionSlice: 1}
	s := newFairTest(t, limits)
	fairMust(t, s.Register(1, &fairCounter{}))
	fairMust(t, s.Register(2, &fairCounter{}))
	if _, err := s.Enqueue(9, 1); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("enqueue to unknown: %v", err)
	}
	_, err := s.EnqueueBatch(1, []fairStep{1, 2, 3})
	fairMust(t, err)
	ids, err := s.EnqueueBatch(2, []fairStep{4, 5, 6})
	if !errors.Is(err, ErrCapacity) || ids != nil {
		t.Fatalf("over-capacity batch: %v %v", ids, err)
	}
	if s.QueuedFor(2) != 0 || s.Report().QueuedWork != 3 || s.Report().SubmittedWork != 3 {
		t.Fatalf("a rejected batch left work behind: %+v", s.Report())
	}
	if _, ok := s.Lifecycle(WorkID{Request: 2, Sequence: 0}); ok {
		t.Fatal("a rejected batch consumed work ids")
	}
	ids, err = s.EnqueueBatch(2, []fairStep{4, 5})
	if err != nil || len(ids) != 2 || ids[0] != (WorkID{2, 0}) || ids[1] != (WorkID{2, 1}) {
		t.Fatalf("fitting batch: %v %v", ids, err)
	}
	if _, err := s.Enqueue(1, 9); !errors.Is(err, ErrCapacity) {
		t.Fatalf("enqueue at capacity: %v", err)
	}
	if r := s.Report(); r.PeakQueuedWork != 5 {
		t.Fatalf("peak %d", r.PeakQueuedWork)
	}
	// Registration capacity.
	if err := s.Register(3, &fairCounter{}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("register over capacity: %v", err)
	}
	if err := s.Register(1, &fairCounter{}); !errors.Is(err, ErrDuplicateRequest) {
		t.Fatalf("duplicate register: %v", err)
	}
}

// Descriptor, execution-slice and branch failures fail the work and its
// request before anything is submitted.
func TestFairPreparationFailures(t *testing.T) {
	limits := DefaultLimits()
	limits.ExecutionSlice = 4
	s, err := New[fairWideStep, *fairCounter, uint32, fairMock](limits)
	fairMust(t, err)
	fairMust(t, s.Register(1, &fairCounter{}))
	id, _ := s.Enqueue(1, fairWideStep{slice: 5})
	if _, err := s.Prepare(1, time.Now()); !errors.Is(err, ErrDescriptor) {
		t.Fatalf("slice over bound: %v", err)
	}
	if l, _ := s.Lifecycle(id); l != WorkFailed {
		t.Fatalf("lifecycle %v", l)
	}
	fairMust(t, s.Register(2, &fairCounter{}))
	_, _ = s.Enqueue(2, fairWideStep{slice: 1, err: errors.New("no words")})
	if _, err := s.Prepare(1, time.Now()); !errors.Is(err, ErrDescriptor) {
		t.Fatalf("descriptor error: %v", err)
	}
	fairMust(t, s.Register(3, &fairCounter{failBranch: errors.New("no branch")}))
	_, _ = s.Enqueue(3, fairWideStep{slice: 1})
	if _, err := s.Prepare(1, time.Now()); !errors.Is(err, ErrStateTransaction) {
		t.Fatalf("branch error: %v", err)
	}
	for id := RequestID(1); id <= 3; id++ {
		if st, _ := s.Status(id); st != RequestFailed {
			t.Fatalf("request %d: %v", id, st)
		}
	}
	if r := s.Report(); r.FailedWork != 3 || r.ActiveRequests != 0 {
		t.Fatalf("report %+v", r)
	}
	if _, err := s.Prepare(0, time.Now()); !errors.Is(err, ErrCapacity) {
		t.Fatalf("zero bound: %v", err)
	}
}

type fairWideStep struct {
	slice int
	err   error
}

func (w fairWideStep) AppendDescriptor(dst []uint32) ([]uint32, error) {
	return append(dst, uint32(w.slice)), w.err
}
func (w fairWideStep) ExecutionSlice() int { return w.slice }

// A failing commit fails the work and the request.
func TestFairCommitFailure(t *testing.T) {
	s := newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(1, &fairCounter{failCommit: errors.New("disk full")}))
	id, _ := s.Enqueue(1, 1)
	fairMustN(t)(s.Prepare(1, time.Now()))
	fairMustN(t)(s.Submit(time.Now(), fairMockOf(fairDoneFlag())))
	p := s.Poll(time.Now())
	if len(p.Failed) != 1 || !errors.Is(p.Failed[0].Err, ErrStateTransaction) {
		t.Fatalf("progress %+v", p)
	}
	fairWantLife(t, s, id, WorkFailed)
	fairWantStatus(t, s, 1, RequestFailed)
}

// Finish, Release and ForgetTerminal enforce the seed's preconditions.
func TestFairFinishReleaseForget(t *testing.T) {
	s := newFairTest(t, DefaultLimits())
	c := &fairCounter{}
	fairMust(t, s.Register(1, c))
	q1, _ := s.Enqueue(1, 1)
	q2, _ := s.Enqueue(1, 2)
	fairMustN(t)(s.Prepare(1, time.Now()))
	fairMust(t, s.Finish(1))
	fairWantStatus(t, s, 1, RequestFinished)
	fairWantLife(t, s, q1, WorkAbandoned) // prepared, discarded
	fairWantLife(t, s, q2, WorkAbandoned) // queued, discarded
	if c.discards != 1 {
		t.Fatalf("%d discards", c.discards)
	}
	if r := s.Report(); r.FinishedRequests != 1 || r.DiscardedWork != 2 || r.CancellationBeforeSubmission != 0 {
		t.Fatalf("report %+v", r)
	}
	if err := s.Finish(1); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("finish twice: %v", err)
	}
	if err := s.Cancel(1); !errors.Is(err, ErrRequestState) {
		t.Fatalf("cancel a finished request: %v", err)
	}
	if err := s.Register(1, &fairCounter{}); !errors.Is(err, ErrDuplicateRequest) {
		t.Fatalf("reuse a terminal id: %v", err)
	}
	if st, err := s.ForgetTerminal(1); err != nil || st != RequestFinished {
		t.Fatalf("forget: %v %v", st, err)
	}
	if _, err := s.ForgetTerminal(1); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("forget twice: %v", err)
	}

	// Release: only an idle active request; its id is free at once.
	fairMust(t, s.Register(2, &fairCounter{v: 41}))
	if _, err := s.ForgetTerminal(2); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("forget an active request: %v", err)
	}
	fairMust(t, s.UpdateState(2, func(c **fairCounter) error { (*c).v++; return nil }))
	st, err := s.Release(2)
	if err != nil || st.v != 42 {
		t.Fatalf("release: %v %v", st, err)
	}
	if _, ok := s.Status(2); ok {
		t.Fatal("released request still known")
	}
	fairMust(t, s.Register(2, &fairCounter{}))
	if _, err := s.Release(99); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("release unknown: %v", err)
	}
	if err := s.Cancel(99); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("cancel unknown: %v", err)
	}
}

// Cancelling with a failing discard ends the request failed and says so.
func TestFairCancelDiscardFailure(t *testing.T) {
	s := newFairTest(t, DefaultLimits())
	boom := errors.New("discard boom")
	fairMust(t, s.Register(1, &fairCounter{failDiscard: boom}))
	id, _ := s.Enqueue(1, 1)
	fairMustN(t)(s.Prepare(1, time.Now()))
	err := s.Cancel(1)
	if !errors.Is(err, ErrStateTransaction) || !errors.Is(err, boom) {
		t.Fatalf("cancel: %v", err)
	}
	fairWantStatus(t, s, 1, RequestFailed)
	fairWantLife(t, s, id, WorkFailed)
}

// Deadlines are checked on queued and prepared work; submitted work is
// past its deadline's reach. A deadline that has not passed does nothing.
func TestFairDeadlineOnPreparedWork(t *testing.T) {
	limits := DefaultLimits()
	limits.MaxInFlightPerRequest = 2
	s := newFairTest(t, limits)
	base := time.Unix(1000, 0)
	fairMust(t, s.Register(1, &fairCounter{}))
	a, _ := s.EnqueueWithDeadline(1, 1, base.Add(10*time.Millisecond))
	b, _ := s.EnqueueWithDeadline(1, 2, base.Add(20*time.Millisecond))
	fairMustN(t)(s.Prepare(2, base))
	fairMustN(t)(s.Submit(base, fairMockOf(new(bool)))) // a submitted, b prepared
	fairWantLife(t, s, a, WorkSubmitted)
	fairWantLife(t, s, b, WorkPrepared)
	fairMustN(t)(s.Prepare(1, base.Add(15*time.Millisecond)))
	fairWantStatus(t, s, 1, RequestActive) // a's deadline passed, but a is submitted
	fairMustN(t)(s.Prepare(1, base.Add(20*time.Millisecond)))
	fairWantStatus(t, s, 1, RequestDeadlineExceeded)
	fairWantLife(t, s, a, WorkAbandoned)
	fairWantLife(t, s, b, WorkAbandoned)
	if r := s.Report(); r.CancellationBeforeSubmission != 1 || r.CancellationAfterSubmission != 1 || r.DeadlineExpiredRequests != 1 {
		t.Fatalf("report %+v", r)
	}
}

// Seed: production_telemetry_round_trips_without_backend_types.
func TestFairTelemetryJSONRoundTrip(t *testing.T) {
	s := newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(40, &fairCounter{}))
	_, _ = s.Enqueue(40, 1)
	fairMustN(t)(s.Prepare(1, time.Now()))
	fairMustN(t)(s.Submit(time.Now(), fairMockOf(new(bool))))

	report := s.Report()
	fairRoundTrip(t, report)
	caps := s.Capabilities()
	if !cmp.Equal(caps.ObservedBackends, []string{"mock"}) || caps.ExecutingWorkPhysicallyPreemptible {
		t.Fatalf("capabilities %+v", caps)
	}
	fairRoundTrip(t, caps)

	// With latencies and every counter moving.
	done := new(bool)
	fairMust(t, s.Register(41, &fairCounter{}))
	_, _ = s.Enqueue(41, 1)
	fairMustN(t)(s.Prepare(1, time.Now()))
	fairMustN(t)(s.Submit(time.Now(), fairMockOf(done)))
	fairMust(t, s.Cancel(41))
	*done = true
	s.Poll(time.Now())
	r := s.Report()
	if r.LastCancellationToRelease == nil {
		t.Fatal("no latency recorded")
	}
	fairRoundTrip(t, r)
	b, _ := json.Marshal(r)
	for _, key := range []string{`"last_cancellation_to_release_ns":`, `"abandoned_retained_resources":0`, `"poisoned":false`, `"configured_slice_bound":9223372036854775807`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("report JSON lacks %s: %s", key, b)
		}
	}
	// A fresh scheduler's capabilities: no backends, not preemptible.
	empty := newFairTest(t, DefaultLimits()).Capabilities()
	if empty.ObservedBackends == nil || len(empty.ObservedBackends) != 0 {
		t.Fatalf("capabilities %+v", empty)
	}
	fairRoundTrip(t, empty)
	for _, l := range []WorkLifecycle{WorkQueued, WorkPrepared, WorkSubmitted, WorkCompleting, WorkCommitted, WorkAbandoned, WorkFailed} {
		fairRoundTrip(t, l)
	}
	for _, st := range []RequestStatus{RequestActive, RequestFinished, RequestCancelled, RequestDeadlineExceeded, RequestFailed} {
		fairRoundTrip(t, st)
	}
	if b, _ := json.Marshal(RequestDeadlineExceeded); string(b) != `"deadline_exceeded"` {
		t.Fatalf("status JSON %s", b)
	}
	var bad WorkLifecycle
	if json.Unmarshal([]byte(`"nonsense"`), &bad) == nil {
		t.Fatal("unknown lifecycle decoded")
	}
	if _, err := json.Marshal(WorkLifecycle(0)); err == nil {
		t.Fatal("invalid lifecycle encoded")
	}
}

func fairRoundTrip[T any](t *testing.T, v T) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back T
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(v, back); d != "" {
		t.Fatalf("JSON round trip of %T changed it (-before +after):\n%s\n%s", v, d, b)
	}
}

// Lifecycle tracking keeps no record of committed work: memory follows
// live work and the non-committed endings of registered requests.
func TestFairLifecycleMemoryBounded(t *testing.T) {
	limits := DefaultLimits()
	s := newFairTest(t, limits)
	fairMust(t, s.Register(1, &fairCounter{}))
	backend := fairMockOf(fairDoneFlag())
	for i := 0; i < 1000; i++ {
		if _, err := s.Enqueue(1, fairStep(i)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RunLocalTurn(time.Now(), backend); err != nil {
			t.Fatal(err)
		}
	}
	if r := s.reqs[1]; len(r.final) != 0 || r.next != 1000 {
		t.Fatalf("final %d entries, next %d", len(r.final), r.next)
	}
	fairWantLife(t, s, WorkID{1, 500}, WorkCommitted)
	if _, ok := s.Lifecycle(WorkID{1, 1000}); ok {
		t.Fatal("future work known")
	}
	if st, _ := s.State(1); st.v != 1000 {
		t.Fatalf("state %d", st.v)
	}
	if len(s.pool) == 0 || len(s.pool) > 2 {
		t.Fatalf("item pool %d: items not recycled", len(s.pool))
	}
}

// GoBackend runs transitions asynchronously; completion is observed only
// after the run returned, and a panic fails the transition.
func TestFairGoBackend(t *testing.T) {
	limits := Limits{MaxActiveRequests: 4, MaxQueuedWork: 64, MaxNewSubmissionsPerTurn: 4, MaxInFlightGlobal: 8, MaxInFlightPerRequest: 1, ExecutionSlice: 1}
	s, err := New[fairStep, *fairCounter, uint32, *AsyncOutput](limits)
	fairMust(t, err)
	release := make(chan struct{})
	backend := NewGoBackend("goroutines", 2, func(id WorkID, w fairStep, branch *uint32) ([]byte, error) {
		<-release
		if w == 13 {
			panic("unlucky")
		}
		*branch += 100 // results written into the branch before completion
		return []byte{byte(w)}, nil
	})
	defer backend.Wait()
	for id := RequestID(1); id <= 3; id++ {
		fairMust(t, s.Register(id, &fairCounter{}))
		_, err := s.Enqueue(id, fairStep(id))
		fairMust(t, err)
	}
	_, err = s.Enqueue(2, 13)
	fairMust(t, err)
	p, err := s.RunLocalTurn(time.Now(), backend)
	fairMust(t, err)
	if p.NewlySubmitted != 3 || len(p.Committed) != 0 {
		t.Fatalf("progress %+v", p)
	}
	close(release)
	var committed []Committed[fairStep, *AsyncOutput]
	var failed []Failure
	for deadline := time.Now().Add(10 * time.Second); s.Report().CurrentInFlightWork > 0 || s.Report().QueuedWork > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("not drained: %+v", s.Report())
		}
		p, err := s.RunLocalTurn(time.Now(), backend)
		fairMust(t, err)
		committed = append(committed, p.Committed...)
		failed = append(failed, p.Failed...)
		time.Sleep(time.Millisecond)
	}
	if len(committed) != 3 || len(failed) != 1 || !strings.Contains(failed[0].Err.Error(), "unlucky") || failed[0].ID != (WorkID{2, 1}) {
		t.Fatalf("committed %d, failed %+v", len(committed), failed)
	}
	for _, c := range committed {
		if res, err := c.Output.Result(); err != nil || len(res) != 1 || res[0] != byte(c.Work) {
			t.Fatalf("output of %v: %v %v", c.ID, res, err)
		}
		if st, _ := s.State(c.ID.Request); c.ID.Request != 2 && st.v != 101 {
			t.Fatalf("request %d state %d, want the branch the backend wrote", c.ID.Request, st.v)
		}
	}
	if caps := s.Capabilities(); !cmp.Equal(caps.ObservedBackends, []string{"goroutines"}) {
		t.Fatalf("capabilities %+v", caps)
	}
}

func TestFairAsyncOutput(t *testing.T) {
	o := NewAsyncOutput("x", 3)
	if done, err := o.Complete(); done || err != nil {
		t.Fatal("complete before finish")
	}
	if res, err := o.Result(); res != nil || err != nil {
		t.Fatal("result before finish")
	}
	boom := errors.New("boom")
	if !o.Finish([]byte("r"), boom) || o.Finish(nil, nil) {
		t.Fatal("only the first Finish counts")
	}
	<-o.Done()
	if done, err := o.Complete(); done || err != boom {
		t.Fatalf("complete after failure: %v %v", done, err)
	}
	if o.Backend() != "x" || o.RetainedResources() != 3 || o.Preemptible() {
		t.Fatal("accessors")
	}
	var g GoBackend[fairStep, uint32]
	if _, err := g.Submit(WorkID{}, 0, new(uint32)); err == nil {
		t.Fatal("GoBackend without run submitted")
	}
}
