package fair

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// fairSized is a scripted transport that says how many words its rounds
// carry (ConsensusCapacity).
type fairSized struct {
	fairScript
	words int
}

var errFairSizedSmall = errors.New("transport too small")

func (t *fairSized) CheckLimits(l Limits, maxDescriptor int) error {
	if need := l.ConsensusWords(maxDescriptor); t.words < need {
		return fmt.Errorf("%w: %d words, need %d", errFairSizedSmall, t.words, need)
	}
	return nil
}

// TestTransportTooSmallFailsBeforeAnyRound: a transport whose rounds
// cannot carry the turns the limits allow fails RunDistributedTurn and
// CancelDistributed with ErrTransportCapacity, wrapping its own error,
// before any round and without poisoning; the same scheduler runs turns
// through a transport large enough. (Default limits need 324 words: a
// 256-word transport used to fail, and poison, only at turn 51.)
func TestTransportTooSmallFailsBeforeAnyRound(t *testing.T) {
	limits := DefaultLimits()
	need := limits.ConsensusWords(0)
	if need != 324 {
		t.Fatalf("default limits need %d words, want 324", need)
	}
	s := newFairTest(t, limits)
	fairMust(t, s.Register(1, &fairCounter{}))
	_, err := s.Enqueue(1, 1)
	fairMust(t, err)
	small := &fairSized{fairScript: fairScript{participants: 2}, words: 256}
	_, err = s.RunDistributedTurn(7, small, fairTurn0, fairMockOf(new(bool)))
	if !errors.Is(err, ErrTransportCapacity) || !errors.Is(err, errFairSizedSmall) {
		t.Fatalf("turn through a 256-word transport: %v; want ErrTransportCapacity wrapping the transport's error", err)
	}
	if err := s.CancelDistributed(7, 1, small, fairTurn0); !errors.Is(err, ErrTransportCapacity) {
		t.Fatalf("cancel through a 256-word transport: %v", err)
	}
	if small.calls != 0 {
		t.Fatalf("%d rounds through a transport too small for the limits", small.calls)
	}
	if reason, poisoned := s.PoisonReason(); poisoned {
		t.Fatalf("poisoned by a capacity check: %s", reason)
	}
	large := &fairSized{fairScript: fairScript{participants: 2}, words: need}
	p, err := s.RunDistributedTurn(7, large, fairTurn0, fairMockOf(new(bool)))
	if err != nil || p.NewlySubmitted != 1 || large.calls != 2 {
		t.Fatalf("turn through a %d-word transport: %+v, %v, %d rounds", need, p, err, large.calls)
	}
}

var fairTurn0 = time.Unix(1_700_000_000, 0)
