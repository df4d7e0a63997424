package pass

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/shmkit/shmkit/sched/fair"
)

type passSum struct{ total uint32 }

func (s *passSum) Branch() (uint32, error) { return s.total, nil }
func (s *passSum) Commit(b uint32) error   { s.total = b; return nil }
func (s *passSum) Discard(uint32) error    { return nil }
func (s *passSum) ParallelBranches() bool  { return false }

type passAdd uint32

func (a passAdd) AppendDescriptor(dst []uint32) ([]uint32, error) { return append(dst, uint32(a)), nil }
func (a passAdd) ExecutionSlice() int                             { return 1 }

// TestFairOverPassWorkers: three requests scheduled fairly, each
// transition executed as a pass by worker processes through a Client (the
// echo closure returns the encoded sum, which apply writes into the
// branch): every request's transitions all commit, in order.
func TestFairOverPassWorkers(t *testing.T) {
	f := newSchedFiles(t)
	c := startClient(t, f.client())
	startWorkers(t, f, 2)
	backend := NewFairBackend(c, "pass", closureEcho,
		func(_ fair.WorkID, a passAdd, branch *uint32) ([]byte, error) {
			return binary.LittleEndian.AppendUint32(nil, *branch+uint32(a)), nil
		},
		func(branch *uint32, result []byte) error {
			*branch = binary.LittleEndian.Uint32(result)
			return nil
		}, 0)
	limits := fair.DefaultLimits()
	limits.MaxNewSubmissionsPerTurn = 3
	s, err := fair.New[passAdd, *passSum, uint32, *fair.AsyncOutput](limits)
	if err != nil {
		t.Fatal(err)
	}
	sums := []*passSum{{}, {}, {}}
	for i, st := range sums {
		if err := s.Register(fair.RequestID(i+1), st); err != nil {
			t.Fatal(err)
		}
		if _, err := s.EnqueueBatch(fair.RequestID(i+1), []passAdd{1, 2, 3, 4}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute) // a hang guard
	for s.Report().CompletedWork < 12 {
		if time.Now().After(deadline) {
			t.Fatalf("report %+v", s.Report())
		}
		if _, err := s.RunLocalTurn(time.Now(), backend); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	for i, st := range sums {
		if st.total != 10 {
			t.Fatalf("request %d total %d, want 10", i+1, st.total)
		}
	}
	if st := c.Stats(); st.Submitted != 12 || st.Resolved != 12 {
		t.Fatalf("client stats %+v: want the 12 transitions submitted and resolved as passes", st)
	}
}
