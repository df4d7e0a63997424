package gather

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/shmkit/shmkit/sched/fair"
)

// TestFairSchedulerRefusesTooSmallFile: a scheduler built for a file whose
// buffers cannot carry the rounds its limits allow is refused with
// ErrFairCapacity naming the file and both word counts (a 256-word file
// and the default limits, which need 324 words, used to poison at turn
// 51). A file sized by FairConfig, or created with the default size, is
// accepted.
func TestFairSchedulerRefusesTooSmallFile(t *testing.T) {
	limits := fair.DefaultLimits()
	need := limits.ConsensusWords(0)
	small := newGatherFile(t, 2, 256)
	m := joinGather(t, small, 0)
	s, err := NewFairScheduler[fairStep, *fairCounter, uint32, fairTurnOutput](m, limits, 0)
	if !errors.Is(err, ErrFairCapacity) || s != nil {
		t.Fatalf("NewFairScheduler on a 256-word file: %v, %v; want ErrFairCapacity", s, err)
	}
	for _, part := range []string{small.Path(), "hold 256 words", fmt.Sprintf("need %d", need)} {
		if !strings.Contains(err.Error(), part) {
			t.Fatalf("error does not say %q: %v", part, err)
		}
	}
	if _, err := NewFairScheduler[fairStep, *fairCounter, uint32, fairTurnOutput](m, fair.Limits{}, 0); !errors.Is(err, fair.ErrInvalidLimits) {
		t.Fatalf("invalid limits: %v", err)
	}

	// Descriptors of 400 words make the schedule round (6 + 5 + 400) the
	// largest.
	sized := newGatherFile(t, 2, FairConfig(2, limits, 400).MaxWords)
	if sized.MaxWords() != 411 {
		t.Fatalf("FairConfig sized %d words, limits need 411", sized.MaxWords())
	}
	if _, err := NewFairScheduler[fairStep, *fairCounter, uint32, fairTurnOutput](joinGather(t, sized, 0), limits, 400); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFairScheduler[fairStep, *fairCounter, uint32, fairTurnOutput](joinGather(t, sized, 1), limits, 401); !errors.Is(err, ErrFairCapacity) {
		t.Fatalf("one descriptor word more than the file was sized for: %v", err)
	}

	def := newGatherFile(t, 2, 0)
	if def.MaxWords() != need {
		t.Fatalf("default file holds %d words, default limits need %d", def.MaxWords(), need)
	}
	if _, err := NewFairScheduler[fairStep, *fairCounter, uint32, fairTurnOutput](joinGather(t, def, 0), limits, 0); err != nil {
		t.Fatal(err)
	}
}

// TestFairTurnThroughTooSmallFileFailsBeforeAnyRound: a scheduler built
// with fair.New (no check) and driven through a member of a file too small
// for its limits fails its first distributed turn with
// fair.ErrTransportCapacity and ErrFairCapacity, before any round: the
// member has published nothing, the group is not aborted, and the
// scheduler is not poisoned.
func TestFairTurnThroughTooSmallFileFailsBeforeAnyRound(t *testing.T) {
	ag := newGatherFile(t, 1, 256)
	m := joinGather(t, ag, 0)
	s, err := fair.New[fairStep, *fairCounter, uint32, fairTurnOutput](fair.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	turn := 0
	backend := fair.BackendFunc[fairStep, uint32, fairTurnOutput](func(fair.WorkID, fairStep, *uint32) (fairTurnOutput, error) {
		return fairTurnOutput{turn: &turn, at: 1}, nil
	})
	_, err = s.RunDistributedTurn(1, m, fairTurnTime(0), backend)
	if !errors.Is(err, fair.ErrTransportCapacity) || !errors.Is(err, ErrFairCapacity) || !strings.Contains(err.Error(), ag.Path()) {
		t.Fatalf("turn through a 256-word file: %v", err)
	}
	if _, aborted := ag.Aborted(); aborted || m.Rounds() != 0 {
		t.Fatalf("a refused turn ran rounds: %d, aborted %v", m.Rounds(), aborted)
	}
	if reason, poisoned := s.PoisonReason(); poisoned {
		t.Fatalf("poisoned: %s", reason)
	}
}

// TestFairDefaultsRunPastTheOldPoisonTurn: two participants with the
// default limits on a file of the default size fill all 64 in-flight
// places (the completions round then needs 324 words; a 256-word default
// poisoned at turn 51) and every transition commits everywhere.
func TestFairDefaultsRunPastTheOldPoisonTurn(t *testing.T) {
	const participants, requests, release = 2, 64, 70
	ag := newGatherFile(t, participants, 0)
	reports := make([]fair.Report, participants)
	errs := make([]error, participants)
	var wg sync.WaitGroup
	for rank := 0; rank < participants; rank++ {
		m := joinGather(t, ag, rank)
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[rank], errs[rank] = fairDefaultsStream(m, requests, release)
		}()
	}
	wg.Wait()
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("participant %d: %v", rank, err)
		}
	}
	for rank, r := range reports {
		if r.PeakInFlightWork != requests || r.CompletedWork != requests || r.Poisoned {
			t.Fatalf("participant %d: report %+v; want %d in flight at the peak, all committed", rank, r, requests)
		}
	}
}

// fairDefaultsStream registers requests requests of one transition each
// and runs turns until all committed; every transition completes at turn
// release.
func fairDefaultsStream(m *Member, requests, release int) (fair.Report, error) {
	s, err := NewFairScheduler[fairStep, *fairCounter, uint32, fairTurnOutput](m, fair.DefaultLimits(), 1)
	if err != nil {
		return fair.Report{}, err
	}
	for id := fair.RequestID(0); id < fair.RequestID(requests); id++ {
		if err := s.Register(id, &fairCounter{}); err != nil {
			return fair.Report{}, err
		}
		if _, err := s.Enqueue(id, 1); err != nil {
			return fair.Report{}, err
		}
	}
	turn := 0
	backend := fair.BackendFunc[fairStep, uint32, fairTurnOutput](func(fair.WorkID, fairStep, *uint32) (fairTurnOutput, error) {
		return fairTurnOutput{turn: &turn, at: release}, nil
	})
	for ; turn < 2*release; turn++ {
		if _, err := s.RunDistributedTurn(0xDEF, m, fairTurnTime(turn), backend); err != nil {
			return s.Report(), fmt.Errorf("turn %d: %w", turn, err)
		}
		if r := s.Report(); r.QueuedWork+r.PreparedWork+r.CurrentInFlightWork == 0 {
			return r, nil
		}
	}
	return s.Report(), fmt.Errorf("work left after %d turns: %+v", turn, s.Report())
}
