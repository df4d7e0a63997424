package main

import "github.com/shmkit/shmkit/internal/cliutil"

// maxRunBatch bounds run --batch.
const maxRunBatch = 1024

// checkBatchLoan validates run --batch and --loan: batch calls on the
// ring and the deque, loans on the ring alone (the deque has no loans),
// not both at once (a loan publishes one message: the ring has no batch
// of loans, and a batching sender would leave --loan unused), and
// neither with leased consumers, which take one message at a time. Any
// number of consumers may batch: the parent sends their end markers one
// at a time (end_markers.go).
func (s *runSpec) checkBatchLoan(tr *transportInfo) error {
	switch {
	case s.Batch < 0 || s.Batch > maxRunBatch:
		return cliutil.Usage("--batch must be in [0, %d], got %d", maxRunBatch, s.Batch)
	case s.Batch <= 1 && !s.Loan:
		return nil
	case s.Loan && tr.Name == "deque":
		return cliutil.Usage("--loan needs the ring: the deque has no loans (it has batch calls: --batch)")
	case s.Loan && tr.Name != "ring":
		return cliutil.Usage("--loan needs the ring: transport %s has no loans", tr.Name)
	case s.Batch > 1 && tr.Name != "ring" && tr.Name != "deque":
		return cliutil.Usage("--batch needs the ring or the deque: transport %s has no batch calls", tr.Name)
	case s.Batch > 1 && s.Loan:
		return cliutil.Usage("--batch and --loan do not go together: a loan publishes one message, and the ring has no batch of loans")
	case s.Lease:
		return cliutil.Usage("--batch and --loan do not go with --lease or --chaos (leased consumers take one message at a time)")
	}
	return nil
}
