package fair

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Errors of the fair scheduler. Every error it returns wraps exactly one of
// them, with the request or work id in the message.
var (
	ErrInvalidLimits      = errors.New("fair: scheduler limits must be positive")
	ErrDuplicateRequest   = errors.New("fair: request already registered")
	ErrUnknownRequest     = errors.New("fair: request not active")
	ErrCapacity           = errors.New("fair: scheduler capacity exhausted")
	ErrRequestState       = errors.New("fair: request still owns work for this operation")
	ErrDescriptor         = errors.New("fair: work descriptor failed")
	ErrStateTransaction   = errors.New("fair: state transaction failed")
	ErrSubmission         = errors.New("fair: backend submission failed")
	ErrCompletion         = errors.New("fair: completion observation failed")
	ErrConsensus          = errors.New("fair: distributed consensus failed")
	ErrDistributedFailure = errors.New("fair: backend failed on at least one participant")
	ErrSchedulerPoisoned  = errors.New("fair: scheduler poisoned by a distributed disagreement")
	ErrTransportCapacity  = errors.New("fair: consensus transport too small for the limits")
)

// RequestID is a caller-assigned request identity. Zero is valid.
type RequestID uint64

// WorkID names one transition: the request it updates and its zero-based
// position in that request's sequence, assigned by the scheduler when the
// work is enqueued.
type WorkID struct {
	Request  RequestID `json:"request"`
	Sequence uint64    `json:"sequence"`
}

func (w WorkID) String() string {
	return strconv.FormatUint(uint64(w.Request), 10) + "/" + strconv.FormatUint(w.Sequence, 10)
}

// WorkLifecycle is where one transition is in its life.
type WorkLifecycle uint8

// Work lifecycle states.
const (
	// WorkQueued: accepted, no branch yet.
	WorkQueued WorkLifecycle = iota + 1
	// WorkPrepared: a branch of the request's state exists; not submitted.
	WorkPrepared
	// WorkSubmitted: handed to the backend; its exact completion is pending.
	WorkSubmitted
	// WorkCompleting: completed successfully, the commit is resolving
	// (only observable from inside State.Commit).
	WorkCompleting
	// WorkCommitted: its branch was published into the request's state.
	WorkCommitted
	// WorkAbandoned: cancelled or discarded; if it had been submitted, its
	// backend resources were kept until its exact completion.
	WorkAbandoned
	// WorkFailed: preparation, submission, execution or commit failed.
	WorkFailed
)

var workLifecycleNames = [...]string{"", "queued", "prepared", "submitted", "completing", "committed", "abandoned", "failed"}

func (l WorkLifecycle) String() string {
	if l != 0 && int(l) < len(workLifecycleNames) {
		return workLifecycleNames[l]
	}
	return "lifecycle(" + strconv.Itoa(int(l)) + ")"
}

// MarshalText encodes the lifecycle as its snake_case name.
func (l WorkLifecycle) MarshalText() ([]byte, error) {
	if l == 0 || int(l) >= len(workLifecycleNames) {
		return nil, fmt.Errorf("fair: invalid work lifecycle %d", uint8(l))
	}
	return []byte(workLifecycleNames[l]), nil
}

// UnmarshalText decodes a name written by MarshalText.
func (l *WorkLifecycle) UnmarshalText(b []byte) error {
	for i := 1; i < len(workLifecycleNames); i++ {
		if string(b) == workLifecycleNames[i] {
			*l = WorkLifecycle(i)
			return nil
		}
	}
	return fmt.Errorf("fair: unknown work lifecycle %q", b)
}

// RequestStatus is where a request is in its life.
type RequestStatus uint8

// Request statuses. Every status but RequestActive is terminal: the id stays
// taken (Register refuses it) until ForgetTerminal.
const (
	RequestActive RequestStatus = iota + 1
	RequestFinished
	RequestCancelled
	RequestDeadlineExceeded
	RequestFailed
)

var requestStatusNames = [...]string{"", "active", "finished", "cancelled", "deadline_exceeded", "failed"}

func (s RequestStatus) String() string {
	if s != 0 && int(s) < len(requestStatusNames) {
		return requestStatusNames[s]
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText encodes the status as its snake_case name.
func (s RequestStatus) MarshalText() ([]byte, error) {
	if s == 0 || int(s) >= len(requestStatusNames) {
		return nil, fmt.Errorf("fair: invalid request status %d", uint8(s))
	}
	return []byte(requestStatusNames[s]), nil
}

// UnmarshalText decodes a name written by MarshalText.
func (s *RequestStatus) UnmarshalText(b []byte) error {
	for i := 1; i < len(requestStatusNames); i++ {
		if string(b) == requestStatusNames[i] {
			*s = RequestStatus(i)
			return nil
		}
	}
	return fmt.Errorf("fair: unknown request status %q", b)
}

// cancelCause says why a request is being cancelled; it is part of the
// distributed disposition message.
type cancelCause uint32

const (
	causeExplicit cancelCause = 1
	causeDeadline cancelCause = 2
)

// Limits bounds a Scheduler. Every limit must be positive.
type Limits struct {
	// MaxActiveRequests bounds registered, non-terminal requests.
	MaxActiveRequests int `json:"max_active_requests"`
	// MaxQueuedWork bounds accepted work that is not yet terminal
	// (queued, prepared and submitted, abandoned submissions included).
	MaxQueuedWork int `json:"max_queued_work"`
	// MaxNewSubmissionsPerTurn bounds the transitions one turn prepares
	// and submits.
	MaxNewSubmissionsPerTurn int `json:"max_new_submissions_per_turn"`
	// MaxInFlightGlobal bounds submitted work whose completion is pending.
	MaxInFlightGlobal int `json:"max_in_flight_global"`
	// MaxInFlightPerRequest bounds one request's branches (prepared and
	// submitted work).
	MaxInFlightPerRequest int `json:"max_in_flight_per_request"`
	// ExecutionSlice bounds the operations one transition may run without
	// a preemption point (Work.ExecutionSlice).
	ExecutionSlice int `json:"execution_slice"`
}

// DefaultLimits returns the default limits: 64 active requests, 256
// queued transitions, one new submission per turn, 64 in flight, one branch
// per request, unbounded execution slices.
func DefaultLimits() Limits {
	return Limits{
		MaxActiveRequests:        64,
		MaxQueuedWork:            256,
		MaxNewSubmissionsPerTurn: 1,
		MaxInFlightGlobal:        64,
		MaxInFlightPerRequest:    1,
		ExecutionSlice:           math.MaxInt,
	}
}

// NewLimits returns conservative limits for the given request and queue
// capacities: one submission per turn, as many in flight as active
// requests, one branch per request, unbounded execution slices.
func NewLimits(maxActiveRequests, maxQueuedWork int) (Limits, error) {
	l := Limits{
		MaxActiveRequests:        maxActiveRequests,
		MaxQueuedWork:            maxQueuedWork,
		MaxNewSubmissionsPerTurn: 1,
		MaxInFlightGlobal:        maxActiveRequests,
		MaxInFlightPerRequest:    1,
		ExecutionSlice:           math.MaxInt,
	}
	return l, l.Validate()
}

// Validate reports ErrInvalidLimits if any limit is zero or negative.
func (l Limits) Validate() error {
	for _, v := range [...]int{l.MaxActiveRequests, l.MaxQueuedWork, l.MaxNewSubmissionsPerTurn,
		l.MaxInFlightGlobal, l.MaxInFlightPerRequest, l.ExecutionSlice} {
		if v <= 0 {
			return fmt.Errorf("%w: %+v", ErrInvalidLimits, l)
		}
	}
	return nil
}

// Work is one transition of a request's state.
type Work interface {
	// AppendDescriptor appends every semantic field of the work, in a
	// stable wire order, to dst. Participants of a distributed turn
	// compare these words before anyone submits.
	AppendDescriptor(dst []uint32) ([]uint32, error)
	// ExecutionSlice is the number of program-defined operations the
	// transition runs without a preemption point; 1 for most work. It must
	// be positive and at most Limits.ExecutionSlice.
	ExecutionSlice() int
}

// State is a request's canonical state, changed only through branches:
// a transition works on a branch, and the branch is published by Commit
// only once the transition's exact completion succeeded. A state that also
// implements Cloner can be read, as a copy, through Scheduler.State.
type State[B any] interface {
	// Branch creates an unpublished branch of the current state.
	Branch() (B, error)
	// Commit publishes a completed branch.
	Commit(B) error
	// Discard drops an unpublished branch. It may be called after the
	// request has ended (on abandoned work), and must not need the
	// canonical state to be unchanged.
	Discard(B) error
	// ParallelBranches reports whether independent branches may share the
	// current canonical base (more than one transition of the request in
	// flight at once).
	ParallelBranches() bool
}

// Cloner is implemented by a state that Scheduler.State can hand out:
// Clone returns a copy that shares nothing mutable with the original.
type Cloner[S any] interface {
	Clone() S
}

// Output is a submitted transition's handle on its backend: it keeps
// the backend's resources until the exact completion is observed.
type Output interface {
	// Complete observes the exact completion without blocking: true once
	// the transition finished successfully. A non-nil error means it
	// failed (or its completion cannot be observed); the work fails.
	Complete() (bool, error)
	// Backend names the backend, for capability telemetry ("" for none).
	Backend() string
	// Preemptible reports whether already executing work can be
	// interrupted physically.
	Preemptible() bool
	// RetainedResources counts the backend resources the output holds.
	RetainedResources() int
}

// Backend submits prepared transitions. Submit must not block on the
// transition's execution: it starts it and returns an output whose
// Complete reports the outcome later.
//
// branch points at the transition's branch and stays valid, and untouched
// by the scheduler, until output.Complete has reported completion or
// failure: an asynchronous backend may write the transition's results into
// it, from any goroutine, before it reports completion (the report must
// happen-after those writes, as it does through AsyncOutput).
type Backend[W, B, O any] interface {
	Submit(id WorkID, work W, branch *B) (O, error)
}

// BackendFunc adapts a function to Backend.
type BackendFunc[W, B, O any] func(id WorkID, work W, branch *B) (O, error)

// Submit calls f.
func (f BackendFunc[W, B, O]) Submit(id WorkID, work W, branch *B) (O, error) {
	return f(id, work, branch)
}

// Progress is what one call resolved.
type Progress[W, O any] struct {
	// NewlySubmitted counts transitions submitted by this turn.
	NewlySubmitted int
	// Committed lists work whose branch was published, with its output.
	Committed []Committed[W, O]
	// Failed lists work that failed, each with its cause.
	Failed []Failure
}

// Committed is one committed transition.
type Committed[W, O any] struct {
	ID     WorkID
	Work   W
	Output O
}

// Failure is one failed transition and why it failed.
type Failure struct {
	ID  WorkID
	Err error
}

// Capabilities describes the configured bounds and what the backends
// seen so far can do. It round-trips through encoding/json unchanged.
type Capabilities struct {
	Limits Limits `json:"limits"`
	// ObservedBackends lists, sorted, the backends of submitted work.
	ObservedBackends []string `json:"observed_backends"`
	// ExecutingWorkPhysicallyPreemptible is true when backends have been
	// observed and every output seen was preemptible.
	ExecutingWorkPhysicallyPreemptible bool `json:"executing_work_physically_preemptible"`
	// NonPreemptibleInterval describes the interval cancellation cannot cut.
	NonPreemptibleInterval string `json:"non_preemptible_interval"`
}

// Report is a snapshot of occupancy and cumulative telemetry. It
// round-trips through encoding/json unchanged.
type Report struct {
	ActiveRequests                 int            `json:"active_requests"`
	QueuedWork                     int            `json:"queued_work"`
	PreparedWork                   int            `json:"prepared_work"`
	SubmittedInFlightWork          int            `json:"submitted_in_flight_work"` // submitted, still eligible to publish
	CompletingWork                 int            `json:"completing_work"`          // resolving publication (0 between calls)
	AbandonedInFlightWork          int            `json:"abandoned_in_flight_work"` // cancelled after submission, awaiting exact completion
	FailedInFlightWork             int            `json:"failed_in_flight_work"`    // failed somewhere, awaiting completion everywhere
	CurrentInFlightWork            int            `json:"current_in_flight_work"`   // all submitted work, abandoned included
	PeakInFlightWork               int            `json:"peak_in_flight_work"`
	PeakQueuedWork                 int            `json:"peak_queued_work"` // peak accepted non-terminal work
	SubmittedWork                  uint64         `json:"submitted_work"`   // total accepted work
	CompletedWork                  uint64         `json:"completed_work"`   // total committed
	FailedWork                     uint64         `json:"failed_work"`
	DiscardedWork                  uint64         `json:"discarded_work"` // dropped before submission
	CancellationBeforeSubmission   uint64         `json:"cancellation_before_submission"`
	CancellationAfterSubmission    uint64         `json:"cancellation_after_submission"`
	AbandonedReleasedWork          uint64         `json:"abandoned_released_work"` // abandoned work released at exact completion
	AbandonedRetainedResources     int            `json:"abandoned_retained_resources"`
	PeakAbandonedRetainedResources int            `json:"peak_abandoned_retained_resources"`
	LastCancellationToRelease      *time.Duration `json:"last_cancellation_to_release_ns"` // nil until an abandoned transition is released
	MaxCancellationToRelease       *time.Duration `json:"max_cancellation_to_release_ns"`
	FinishedRequests               uint64         `json:"finished_requests"`
	CancelledRequests              uint64         `json:"cancelled_requests"`
	DeadlineExpiredRequests        uint64         `json:"deadline_expired_requests"`
	DrainCycles                    uint64         `json:"drain_cycles"` // turns that submitted something
	ConfiguredSubmissionBound      int            `json:"configured_submission_bound"`
	ConfiguredSliceBound           int            `json:"configured_slice_bound"`
	Poisoned                       bool           `json:"poisoned"`
}
