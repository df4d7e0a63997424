package fair_test

import (
	"fmt"
	"time"

	"github.com/shmkit/shmkit/sched/fair"
)

// Tally is a request's state: a running total. A branch is a copy the
// transition adds to; committing it replaces the total.
type Tally struct{ Total int }

func (t *Tally) Branch() (int, error)   { return t.Total, nil }
func (t *Tally) Commit(b int) error     { t.Total = b; return nil }
func (t *Tally) Discard(int) error      { return nil }
func (t *Tally) ParallelBranches() bool { return false }

// Add is a transition: add N to the total.
type Add int

func (a Add) AppendDescriptor(dst []uint32) ([]uint32, error) { return append(dst, uint32(a)), nil }
func (a Add) ExecutionSlice() int                             { return 1 }

// Two requests share a backend; turns serve them alternately, and each
// transition's result is written into its branch before it completes.
// (RunLocalTurn does Poll, Prepare, Submit and Poll in one call.)
func ExampleScheduler() {
	limits := fair.DefaultLimits()
	limits.MaxNewSubmissionsPerTurn = 2
	s, err := fair.New[Add, *Tally, int, *fair.AsyncOutput](limits)
	if err != nil {
		panic(err)
	}
	backend := fair.NewGoBackend("adder", 2, func(id fair.WorkID, a Add, branch *int) ([]byte, error) {
		*branch += int(a)
		return nil, nil
	})
	alice, bob := &Tally{}, &Tally{}
	_ = s.Register(1, alice)
	_ = s.Register(2, bob)
	_, _ = s.EnqueueBatch(1, []Add{1, 2, 3})
	_, _ = s.EnqueueBatch(2, []Add{10, 20})

	var order []fair.WorkID
	for s.Report().CompletedWork < 5 {
		now := time.Now()
		if _, err := s.Prepare(limits.MaxNewSubmissionsPerTurn, now); err != nil {
			panic(err)
		}
		if _, err := s.Submit(now, backend); err != nil {
			panic(err)
		}
		backend.Wait() // let this turn's transitions finish
		for _, c := range s.Poll(time.Now()).Committed {
			order = append(order, c.ID)
		}
	}
	fmt.Println("committed:", order)
	fmt.Println("totals:", alice.Total, bob.Total)
	// Output:
	// committed: [1/0 2/0 1/1 2/1 1/2]
	// totals: 6 30
}
