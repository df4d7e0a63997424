package gather

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shmkit/shmkit/sched/fair"
)

// fairCounter and fairStep are the request state and the work of the
// distributed tests (a minimal copy of package fair's test types): a branch
// is the number plus one, and committing a branch stores it.
type fairCounter struct{ v uint32 }

func (c *fairCounter) Branch() (uint32, error) { return c.v + 1, nil }
func (c *fairCounter) Commit(b uint32) error   { c.v = b; return nil }
func (c *fairCounter) Discard(uint32) error    { return nil }
func (c *fairCounter) ParallelBranches() bool  { return true }

type fairStep uint32

func (w fairStep) AppendDescriptor(dst []uint32) ([]uint32, error) {
	return append(dst, uint32(w)), nil
}
func (w fairStep) ExecutionSlice() int { return 1 }

// fairTurnOutput completes once its participant's turn counter reaches at.
type fairTurnOutput struct {
	turn *int
	at   int
}

func (o fairTurnOutput) Complete() (bool, error) { return *o.turn >= o.at, nil }
func (o fairTurnOutput) Backend() string         { return "turns" }
func (o fairTurnOutput) Preemptible() bool       { return false }
func (o fairTurnOutput) RetainedResources() int  { return 1 }

// fairTurnBase is the shared logical clock of distributed tests: turn k
// happens at fairTurnBase + k ms on every participant.
var fairTurnBase = time.Unix(1_700_000_000, 0)

func fairTurnTime(k int) time.Time { return fairTurnBase.Add(time.Duration(k) * time.Millisecond) }

// fairOutcome is where a participant's run ended.
type fairOutcome struct {
	Statuses map[fair.RequestID]fair.RequestStatus `json:"statuses"`
	Values   map[fair.RequestID]uint32             `json:"values"`
	Report   fair.Report                           `json:"report"`
	Turns    int                                   `json:"turns"`
	Rounds   uint64                                `json:"rounds"`
	Poison   string                                `json:"poison,omitempty"`
}

// TestFairDeadlineExpiryDuringDistributedTurn: three participants on
// goroutines, joined through a shared-memory all-gather file, run the same
// stream. A deadline passes while one request has work submitted and work
// queued: every participant cancels it in the same turn (after agreeing
// on it), discards its queued work, keeps the submitted transition until
// it completed everywhere, and all end in the same state.
func TestFairDeadlineExpiryDuringDistributedTurn(t *testing.T) {
	const participants = 3
	ag := newGatherFile(t, participants, 64)
	outcomes := make([]fairOutcome, participants)
	var wg sync.WaitGroup
	errs := make(chan error, participants)
	for rank := 0; rank < participants; rank++ {
		m := joinGather(t, ag, rank)
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := fairDeadlineStream(m, rank)
			if err != nil {
				errs <- fmt.Errorf("participant %d: %w", rank, err)
			}
			outcomes[rank] = o
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	o := outcomes[0]
	if o.Statuses[2] != fair.RequestDeadlineExceeded || o.Values[2] != 0 || o.Statuses[1] != fair.RequestActive || o.Values[1] != 3 || o.Values[3] != 2 {
		t.Fatalf("outcome %+v", o)
	}
	r := o.Report
	if r.DeadlineExpiredRequests != 1 || r.CancellationBeforeSubmission != 2 || r.CancellationAfterSubmission != 1 ||
		r.AbandonedReleasedWork != 1 || r.CompletedWork != 5 || r.CurrentInFlightWork != 0 {
		t.Fatalf("report %+v", r)
	}
	// Cancelled at turn 3, released at turn 8, when the slowest
	// participant (rank 2: 6 + 2 turns after submission at turn 0)
	// completed it: the latency is measured on the shared logical clock.
	if r.LastCancellationToRelease == nil || *r.LastCancellationToRelease != 5*time.Millisecond {
		t.Fatalf("cancellation-to-release %v", r.LastCancellationToRelease)
	}
	for rank := 1; rank < participants; rank++ {
		if d := cmp.Diff(outcomes[0], outcomes[rank]); d != "" {
			t.Fatalf("participant %d disagrees with participant 0 (-0 +%d):\n%s", rank, rank, d)
		}
	}
}

func fairDeadlineStream(m *Member, rank int) (fairOutcome, error) {
	limits := fair.Limits{MaxActiveRequests: 4, MaxQueuedWork: 32, MaxNewSubmissionsPerTurn: 3, MaxInFlightGlobal: 8, MaxInFlightPerRequest: 1, ExecutionSlice: 8}
	s, err := fair.New[fairStep, *fairCounter, uint32, fairTurnOutput](limits)
	if err != nil {
		return fairOutcome{}, err
	}
	counters := map[fair.RequestID]*fairCounter{}
	for id := fair.RequestID(1); id <= 3; id++ {
		counters[id] = &fairCounter{}
		if err := s.Register(id, counters[id]); err != nil {
			return fairOutcome{}, err
		}
	}
	if _, err := s.EnqueueBatch(1, []fairStep{1, 1, 1}); err != nil {
		return fairOutcome{}, err
	}
	for _, w := range []fairStep{6, 1, 1} {
		if _, err := s.EnqueueWithDeadline(2, w, fairTurnTime(3)); err != nil {
			return fairOutcome{}, err
		}
	}
	if _, err := s.EnqueueBatch(3, []fairStep{1, 1}); err != nil {
		return fairOutcome{}, err
	}
	turn := 0
	// Each participant completes a transition w + rank turns after
	// submitting it: participants finish at different times.
	backend := fair.BackendFunc[fairStep, uint32, fairTurnOutput](func(_ fair.WorkID, w fairStep, _ *uint32) (fairTurnOutput, error) {
		return fairTurnOutput{turn: &turn, at: turn + int(w) + rank}, nil
	})
	for ; turn < 100; turn++ {
		if _, err := s.RunDistributedTurn(0xDEAD, m, fairTurnTime(turn), backend); err != nil {
			return fairOutcome{}, fmt.Errorf("turn %d: %w", turn, err)
		}
		if r := s.Report(); r.QueuedWork+r.PreparedWork+r.CurrentInFlightWork == 0 {
			break
		}
	}
	return fairCollect(s, counters, turn, m.Rounds()), nil
}

func fairCollect[O fair.Output](s *fair.Scheduler[fairStep, *fairCounter, uint32, O], counters map[fair.RequestID]*fairCounter, turns int, rounds uint64) fairOutcome {
	o := fairOutcome{Statuses: map[fair.RequestID]fair.RequestStatus{}, Values: map[fair.RequestID]uint32{}, Report: s.Report(), Turns: turns, Rounds: rounds}
	for id, c := range counters {
		o.Statuses[id], _ = s.Status(id)
		o.Values[id] = c.v
	}
	o.Poison, _ = s.PoisonReason()
	return o
}

// fairProcLimits and fairProcStream are the request stream that the
// processes of the multi-process test run.
var fairProcLimits = fair.Limits{MaxActiveRequests: 8, MaxQueuedWork: 64, MaxNewSubmissionsPerTurn: 3, MaxInFlightGlobal: 4, MaxInFlightPerRequest: 1, ExecutionSlice: 16}

// fairProcStream runs the stream as participant rank of t. With diverge,
// this participant enqueues one transition with another descriptor. Work
// runs on goroutines for w * (rank+1) * 100 µs: completions arrive at
// different times in different processes, and only consensus lines them
// up.
func fairProcStream(t fair.ConsensusTransport, rank int, diverge bool) (fairOutcome, error) {
	s, err := fair.New[fairStep, *fairCounter, uint32, *fair.AsyncOutput](fairProcLimits)
	if err != nil {
		return fairOutcome{}, err
	}
	backend := fair.NewGoBackend("goroutines", 4, func(_ fair.WorkID, w fairStep, _ *uint32) ([]byte, error) {
		time.Sleep(time.Duration(w) * time.Duration(rank+1) * 100 * time.Microsecond)
		return nil, nil
	})
	defer backend.Wait()
	counters := map[fair.RequestID]*fairCounter{}
	for id := fair.RequestID(1); id <= 5; id++ {
		counters[id] = &fairCounter{}
		if err := s.Register(id, counters[id]); err != nil {
			return fairOutcome{}, err
		}
	}
	third := fairStep(1)
	if diverge {
		third = 9
	}
	enqueue := []struct {
		id       fair.RequestID
		work     []fairStep
		deadline time.Time
	}{
		{1, []fairStep{1, 2, 3, 4}, time.Time{}},
		{2, []fairStep{12, 1, 1}, fairTurnTime(6)},
		{3, []fairStep{1, third, 1}, time.Time{}},
		{4, []fairStep{2, 2}, time.Time{}},
		{5, []fairStep{1}, time.Time{}},
	}
	for _, e := range enqueue {
		for _, w := range e.work {
			if _, err := s.EnqueueWithDeadline(e.id, w, e.deadline); err != nil {
				return fairOutcome{}, err
			}
		}
	}
	turn := 0
	for ; turn < 200_000; turn++ {
		now := fairTurnTime(turn)
		if turn == 2 {
			if err := s.CancelDistributed(0xFA1, 5, t, now); err != nil && !errors.Is(err, fair.ErrRequestState) {
				return fairOutcome{}, fmt.Errorf("turn %d: cancel: %w", turn, err)
			}
		}
		p, err := s.RunDistributedTurn(0xFA1, t, now, backend)
		if errors.Is(err, fair.ErrConsensus) {
			break
		}
		if err != nil {
			return fairOutcome{}, fmt.Errorf("turn %d: %w", turn, err)
		}
		r := s.Report()
		if r.QueuedWork+r.PreparedWork+r.CurrentInFlightWork == 0 {
			break
		}
		if p.NewlySubmitted == 0 && len(p.Committed) == 0 && len(p.Failed) == 0 {
			time.Sleep(50 * time.Microsecond) // waiting for completions
		}
	}
	rounds := uint64(0)
	if m, ok := t.(*Member); ok {
		rounds = m.Rounds()
	}
	// A poisoned scheduler keeps its submitted work until it completes
	// here: drain it locally.
	if _, poisoned := s.PoisonReason(); poisoned {
		for deadline := time.Now().Add(20 * time.Second); s.Report().CurrentInFlightWork > 0; {
			if time.Now().After(deadline) {
				return fairOutcome{}, errors.New("poisoned scheduler never released its submitted work")
			}
			time.Sleep(time.Millisecond)
			s.Poll(time.Now())
		}
	}
	return fairCollect(s, counters, turn, rounds), nil
}
