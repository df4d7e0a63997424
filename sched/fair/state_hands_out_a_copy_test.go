package fair

import (
	"errors"
	"testing"
	"time"
)

// TestStateHandsOutACopy: State returns a copy of the canonical state, so
// a change to what it returns, made while a branch exists (which
// UpdateState refuses), reaches neither the canonical state nor the
// branch's Commit: the committed value is the branch's, and a second
// State sees it, not the change.
func TestStateHandsOutACopy(t *testing.T) {
	done := new(bool)
	s := newFairTest(t, DefaultLimits())
	canonical := &fairCounter{v: 10}
	fairMust(t, s.Register(1, canonical))
	_, err := s.Enqueue(1, 1)
	fairMust(t, err)
	fairMustN(t)(s.Prepare(1, time.Now()))
	fairMustN(t)(s.Submit(time.Now(), fairMockOf(done)))

	view, err := s.State(1)
	fairMust(t, err)
	if view == canonical || view.v != 10 {
		t.Fatalf("State returned %p (v %d), the canonical state is %p: want a copy holding 10", view, view.v, canonical)
	}
	view.v = 99 // beside the branch: must change nothing
	if err := s.UpdateState(1, func(st **fairCounter) error { (*st).v = 99; return nil }); !errors.Is(err, ErrRequestState) {
		t.Fatalf("UpdateState with a branch: %v, want ErrRequestState", err)
	}
	if canonical.v != 10 {
		t.Fatalf("canonical state %d after changing the copy, want 10", canonical.v)
	}
	*done = true
	if p := s.Poll(time.Now()); len(p.Committed) != 1 {
		t.Fatalf("progress %+v", p)
	}
	again, err := s.State(1)
	fairMust(t, err)
	if canonical.v != 11 || again.v != 11 || view.v != 99 {
		t.Fatalf("after the commit: canonical %d, new copy %d, old copy %d; want 11, 11, 99", canonical.v, again.v, view.v)
	}
	if _, err := s.State(2); !errors.Is(err, ErrUnknownRequest) {
		t.Fatalf("State of an unknown request: %v", err)
	}
}

// fairPlain is a state without Clone: State cannot copy it.
type fairPlain struct{ v uint32 }

func (c *fairPlain) Branch() (uint32, error) { return c.v + 1, nil }
func (c *fairPlain) Commit(b uint32) error   { c.v = b; return nil }
func (c *fairPlain) Discard(uint32) error    { return nil }
func (c *fairPlain) ParallelBranches() bool  { return true }

// TestStateWithoutCloneRefused: State refuses, rather than hands out, a
// state it cannot copy; UpdateState still reads it (guarded).
func TestStateWithoutCloneRefused(t *testing.T) {
	s, err := New[fairStep, *fairPlain, uint32, fairMock](DefaultLimits())
	fairMust(t, err)
	fairMust(t, s.Register(1, &fairPlain{v: 3}))
	if st, err := s.State(1); !errors.Is(err, ErrStateTransaction) || st != nil {
		t.Fatalf("State of a state without Clone: %v, %v; want nil, ErrStateTransaction", st, err)
	}
	var seen uint32
	fairMust(t, s.UpdateState(1, func(st **fairPlain) error { seen = (*st).v; return nil }))
	if seen != 3 {
		t.Fatalf("UpdateState saw %d, want 3", seen)
	}
}
