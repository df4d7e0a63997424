package fair

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// fairScript is a scripted ConsensusTransport: every participant appears
// to send the local words, except where the step for this call replaces a
// word of some participant.
type fairScript struct {
	participants int
	steps        [][]fairReplace
	calls        int
	err          error // returned by every call when set
}

type fairReplace struct {
	rank, offset int
	value        uint32
}

func (t *fairScript) Participants() int { return t.participants }

func (t *fairScript) AllGather(dst, local []uint32) ([]uint32, error) {
	if t.err != nil {
		return dst, t.err
	}
	start := len(dst)
	for p := 0; p < t.participants; p++ {
		dst = append(dst, local...)
	}
	if t.calls < len(t.steps) {
		for _, r := range t.steps[t.calls] {
			dst[start+r.rank*len(local)+r.offset] = r.value
		}
	}
	t.calls++
	return dst, nil
}

// Offsets in the consensus messages the scenarios tamper with.
const (
	fairOffDescLen   = fairScheduleHeader + 4                         // first scheduled transition's descriptor length
	fairOffDrainHi   = 4                                              // schedule: high word of the drain-cycle count
	fairOffStatus0   = fairCompletionHeader + fairCompletionEntry - 1 // first completion's status
	fairOffDispCause = 5                                              // disposition: cause
)

func fairDone(v bool) *bool { return &v }

// Seed: distributed_schedule_mismatch_poisons_the_canonical_machine.
func TestFairDistributedScheduleMismatchPoisons(t *testing.T) {
	tr := &fairScript{participants: 2, steps: [][]fairReplace{
		nil, // completions
		{{rank: 1, offset: fairOffDescLen, value: 99}}, // schedule
	}}
	s := newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(50, &fairCounter{}))
	work, _ := s.Enqueue(50, 7)
	submitted := 0
	_, err := s.RunDistributedTurn(0xAA, tr, time.Now(), fairMockBackend(func(WorkID, fairStep, *uint32) (fairMock, error) {
		submitted++
		return fairMock{done: fairDone(false)}, nil
	}))
	if !errors.Is(err, ErrConsensus) || !strings.Contains(err.Error(), "participant 1 word 10") {
		t.Fatalf("turn: %v", err)
	}
	if submitted != 0 {
		t.Fatal("submitted despite the disagreement")
	}
	reason, poisoned := s.PoisonReason()
	if !poisoned || !strings.Contains(reason, "schedule mismatch") || !s.Report().Poisoned {
		t.Fatalf("poison %q %v", reason, poisoned)
	}
	fairWantStatus(t, s, 50, RequestFailed)
	fairWantLife(t, s, work, WorkFailed)
	if _, err := s.Enqueue(50, 8); !errors.Is(err, ErrSchedulerPoisoned) {
		t.Fatalf("enqueue after poison: %v", err)
	}
	// Every mutation is refused.
	checks := map[string]error{
		"register":     s.Register(51, &fairCounter{}),
		"cancel":       s.Cancel(50),
		"finish":       s.Finish(50),
		"update state": s.UpdateState(50, func(**fairCounter) error { return nil }),
	}
	_, checks["prepare"] = s.Prepare(1, time.Now())
	_, checks["submit"] = s.Submit(time.Now(), fairMockOf(new(bool)))
	_, checks["local turn"] = s.RunLocalTurn(time.Now(), fairMockOf(new(bool)))
	_, checks["distributed turn"] = s.RunDistributedTurn(0xAA, tr, time.Now(), fairMockOf(new(bool)))
	_, checks["batch"] = s.EnqueueBatch(50, []fairStep{1})
	_, checks["release"] = s.Release(50)
	_, checks["forget"] = s.ForgetTerminal(50)
	checks["cancel distributed"] = s.CancelDistributed(0xAA, 50, tr, time.Now())
	for name, err := range checks {
		if !errors.Is(err, ErrSchedulerPoisoned) {
			t.Errorf("%s after poison: %v", name, err)
		}
	}
}

// Seed: poisoned_submissions_remain_retained_until_local_exact_completion.
func TestFairPoisonedSubmissionsRetained(t *testing.T) {
	tr := &fairScript{participants: 2, steps: [][]fairReplace{
		nil, nil, // turn 1: completions, schedule
		nil, {{rank: 1, offset: fairOffDrainHi, value: 99}}, // turn 2: completions, schedule
	}}
	done := new(bool)
	s := newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(54, &fairCounter{}))
	_, _ = s.Enqueue(54, 1)
	if p, err := s.RunDistributedTurn(0xEE, tr, time.Now(), fairMockOf(done)); err != nil || p.NewlySubmitted != 1 {
		t.Fatalf("turn 1: %+v %v", p, err)
	}
	_, err := s.RunDistributedTurn(0xEE, tr, time.Now(), fairMockOf(done))
	if !errors.Is(err, ErrConsensus) {
		t.Fatalf("turn 2: %v", err)
	}
	if r := s.Report(); r.AbandonedInFlightWork != 1 || r.AbandonedRetainedResources != 2 {
		t.Fatalf("report %+v", r)
	}
	if p := s.Poll(time.Now()); len(p.Committed) != 0 {
		t.Fatalf("published after poison: %+v", p)
	}
	if r := s.Report(); r.CurrentInFlightWork != 1 {
		t.Fatalf("released before completion: %+v", r)
	}
	*done = true
	if p := s.Poll(time.Now()); len(p.Committed) != 0 {
		t.Fatalf("published after poison: %+v", p)
	}
	if r := s.Report(); r.CurrentInFlightWork != 0 || r.AbandonedReleasedWork != 1 {
		t.Fatalf("report %+v", r)
	}
}

// Seed: distributed_failure_retains_output_until_every_rank_is_terminal.
func TestFairDistributedFailureRetainedUntilTerminalEverywhere(t *testing.T) {
	tr := &fairScript{participants: 3, steps: [][]fairReplace{
		nil, nil, // turn 1
		{{1, fairOffStatus0, obsFailed}, {2, fairOffStatus0, obsIncomplete}}, nil, // turn 2
		{{1, fairOffStatus0, obsFailed}, {2, fairOffStatus0, obsComplete}}, nil, // turn 3
	}}
	s := newFairTest(t, DefaultLimits())
	c := &fairCounter{}
	fairMust(t, s.Register(51, c))
	id, _ := s.Enqueue(51, 1)
	backend := fairMockOf(fairDone(true)) // complete here at once
	if _, err := s.RunDistributedTurn(0xBB, tr, time.Now(), backend); err != nil {
		t.Fatal(err)
	}
	pending, err := s.RunDistributedTurn(0xBB, tr, time.Now(), backend)
	if err != nil || len(pending.Failed) != 0 || len(pending.Committed) != 0 {
		t.Fatalf("turn 2: %+v %v", pending, err)
	}
	if r := s.Report(); r.FailedInFlightWork != 1 || r.CurrentInFlightWork != 1 || r.FailedWork != 1 {
		t.Fatalf("report %+v", r)
	}
	fairWantLife(t, s, id, WorkFailed)
	terminal, err := s.RunDistributedTurn(0xBB, tr, time.Now(), backend)
	if err != nil || len(terminal.Failed) != 1 || !errors.Is(terminal.Failed[0].Err, ErrDistributedFailure) {
		t.Fatalf("turn 3: %+v %v", terminal, err)
	}
	if r := s.Report(); r.CurrentInFlightWork != 0 || r.FailedWork != 1 {
		t.Fatalf("report %+v", r)
	}
	fairWantStatus(t, s, 51, RequestFailed)
	if c.v != 0 || c.discards != 1 {
		t.Fatalf("state %d, %d discards: failed work must not commit", c.v, c.discards)
	}
}

// Work completes only once it completed on every participant.
func TestFairDistributedCommitWaitsForEveryone(t *testing.T) {
	tr := &fairScript{participants: 3, steps: [][]fairReplace{
		nil, nil, // turn 1
		{{2, fairOffStatus0, obsIncomplete}}, nil, // turn 2: participant 2 not done
		nil, nil, // turn 3: everyone done
	}}
	s := newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(1, &fairCounter{}))
	_, _ = s.Enqueue(1, 1)
	backend := fairMockOf(fairDone(true))
	for turn, want := range []int{0, 0, 1} {
		p, err := s.RunDistributedTurn(1, tr, time.Now(), backend)
		if err != nil || len(p.Committed) != want {
			t.Fatalf("turn %d: %+v %v", turn+1, p, err)
		}
	}
}

// Disagreement on the set of submitted work, an invalid status word, a
// transport error or a mis-shaped result all poison.
func TestFairDistributedCompletionDisagreements(t *testing.T) {
	cases := []struct {
		name string
		tr   *fairScript
		want string
	}{
		{"other work", &fairScript{participants: 2, steps: [][]fairReplace{nil, nil, {{1, fairCompletionHeader, 77}}}}, "completions mismatch"},
		{"bad status", &fairScript{participants: 2, steps: [][]fairReplace{nil, nil, {{1, fairOffStatus0, 9}}}}, "status 9"},
		{"other count", &fairScript{participants: 2, steps: [][]fairReplace{nil, nil, {{1, 3, 2}}}}, "completions mismatch"},
		{"other protocol", &fairScript{participants: 2, steps: [][]fairReplace{nil, nil, {{1, 1, 5}}}}, "completions mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newFairTest(t, DefaultLimits())
			fairMust(t, s.Register(1, &fairCounter{}))
			_, _ = s.Enqueue(1, 1)
			if _, err := s.RunDistributedTurn(1, tc.tr, time.Now(), fairMockOf(new(bool))); err != nil {
				t.Fatal(err)
			}
			_, err := s.RunDistributedTurn(1, tc.tr, time.Now(), fairMockOf(new(bool)))
			if !errors.Is(err, ErrConsensus) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if _, poisoned := s.PoisonReason(); !poisoned {
				t.Fatal("not poisoned")
			}
		})
	}
	boom := errors.New("wire cut")
	s := newFairTest(t, DefaultLimits())
	if _, err := s.RunDistributedTurn(1, &fairScript{participants: 2, err: boom}, time.Now(), fairMockOf(new(bool))); !errors.Is(err, ErrConsensus) || !errors.Is(err, boom) {
		t.Fatalf("transport error: %v", err)
	}
	s = newFairTest(t, DefaultLimits())
	if _, err := s.RunDistributedTurn(1, fairShortTransport{}, time.Now(), fairMockOf(new(bool))); !errors.Is(err, ErrConsensus) || !strings.Contains(err.Error(), "returned") {
		t.Fatalf("short result: %v", err)
	}
	s = newFairTest(t, DefaultLimits())
	if _, err := s.RunDistributedTurn(1, &fairScript{participants: 0}, time.Now(), fairMockOf(new(bool))); !errors.Is(err, ErrConsensus) {
		t.Fatalf("no participants: %v", err)
	}
}

// fairShortTransport returns one participant's words fewer than it claims.
type fairShortTransport struct{}

func (fairShortTransport) Participants() int { return 3 }
func (fairShortTransport) AllGather(dst, local []uint32) ([]uint32, error) {
	return append(append(dst, local...), local...), nil
}

// A submission error in a distributed turn poisons: the other participants
// did submit.
func TestFairDistributedSubmissionErrorPoisons(t *testing.T) {
	s := newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(1, &fairCounter{}))
	_, _ = s.Enqueue(1, 1)
	_, err := s.RunDistributedTurn(1, &fairScript{participants: 2}, time.Now(), fairMockBackend(func(WorkID, fairStep, *uint32) (fairMock, error) {
		return fairMock{}, errors.New("no room")
	}))
	if !errors.Is(err, ErrSubmission) {
		t.Fatalf("turn: %v", err)
	}
	if reason, poisoned := s.PoisonReason(); !poisoned || !strings.Contains(reason, "no room") {
		t.Fatalf("poison %q %v", reason, poisoned)
	}
}

// Seed: distributed_cancellation_and_deadline_use_the_same_core_lifecycle.
func TestFairDistributedCancelAndDeadline(t *testing.T) {
	cancelled := newFairTest(t, DefaultLimits())
	fairMust(t, cancelled.Register(52, &fairCounter{}))
	_, _ = cancelled.Enqueue(52, 1)
	fairMust(t, cancelled.CancelDistributed(0xCC, 52, &fairScript{participants: 2}, time.Now()))
	if st, _ := cancelled.Status(52); st != RequestCancelled {
		t.Fatalf("status %v", st)
	}
	if r := cancelled.Report(); r.CancelledRequests != 1 || r.CancellationBeforeSubmission != 1 {
		t.Fatalf("report %+v", r)
	}

	tr := &fairScript{participants: 2, steps: [][]fairReplace{nil, nil, nil}}
	s := newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(53, &fairCounter{}))
	_, _ = s.EnqueueWithDeadline(53, 1, time.Now().Add(-time.Second))
	if _, err := s.RunDistributedTurn(0xDD, tr, time.Now(), fairMockOf(fairDone(true))); err != nil {
		t.Fatal(err)
	}
	fairWantStatus(t, s, 53, RequestDeadlineExceeded)
	if tr.calls != 3 {
		t.Fatalf("%d rounds, want disposition, completions, schedule", tr.calls)
	}

	// A participant that disagrees about a cancellation poisons everyone.
	s = newFairTest(t, DefaultLimits())
	fairMust(t, s.Register(55, &fairCounter{}))
	err := s.CancelDistributed(0xCC, 55, &fairScript{participants: 3, steps: [][]fairReplace{{{2, fairOffDispCause, uint32(causeDeadline)}}}}, time.Now())
	if !errors.Is(err, ErrConsensus) || !strings.Contains(err.Error(), "disposition of request 55") {
		t.Fatalf("cancel: %v", err)
	}
	fairWantStatus(t, s, 55, RequestFailed)
	// Cancelling an unknown request everyone agrees on is an error, not poison.
	s = newFairTest(t, DefaultLimits())
	if err := s.CancelDistributed(0xCC, 56, &fairScript{participants: 2}, time.Now()); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("cancel unknown: %v", err)
	}
	if _, poisoned := s.PoisonReason(); poisoned {
		t.Fatal("poisoned by an agreed error")
	}
}

// fairRecorder is a one-participant transport that records the largest
// message.
type fairRecorder struct{ most int }

func (r *fairRecorder) Participants() int { return 1 }
func (r *fairRecorder) AllGather(dst, local []uint32) ([]uint32, error) {
	r.most = max(r.most, len(local))
	return append(dst, local...), nil
}

// ConsensusWords bounds every message of a distributed turn.
func TestFairConsensusWords(t *testing.T) {
	limits := Limits{MaxActiveRequests: 8, MaxQueuedWork: 64, MaxNewSubmissionsPerTurn: 3, MaxInFlightGlobal: 5, MaxInFlightPerRequest: 1, ExecutionSlice: 1}
	s := newFairTest(t, limits)
	for id := RequestID(0); id < 8; id++ {
		fairMust(t, s.Register(id, &fairCounter{}))
		_, err := s.EnqueueBatch(id, []fairStep{1, 2})
		fairMust(t, err)
	}
	rec := &fairRecorder{}
	for turn := 0; turn < 6; turn++ {
		if _, err := s.RunDistributedTurn(1, rec, time.Now(), fairMockOf(new(bool))); err != nil {
			t.Fatal(err)
		}
	}
	want := limits.ConsensusWords(1)
	if rec.most != want || want != fairCompletionHeader+5*fairCompletionEntry {
		t.Fatalf("largest message %d words, ConsensusWords %d", rec.most, want)
	}
	if got := DefaultLimits().ConsensusWords(4); got != fairCompletionHeader+64*fairCompletionEntry {
		t.Fatalf("default limits: %d", got)
	}
	huge := DefaultLimits()
	huge.MaxNewSubmissionsPerTurn, huge.MaxInFlightGlobal = math.MaxInt, math.MaxInt
	if got := huge.ConsensusWords(math.MaxInt - 3); got != math.MaxInt {
		t.Fatalf("saturation: %d", got)
	}
}
