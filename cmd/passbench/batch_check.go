package main

import "github.com/shmkit/shmkit/internal/cliutil"

// maxRunBatch bounds run --batch.
const maxRunBatch = 1024

// checkBatchLoan validates run --batch and --loan: the ring's batch calls
// and loans (the deque has neither yet), one consumer with batches (a
// batching consumer could take the end markers meant for another), and
// neither with leased consumers, which take one message at a time.
func (s *runSpec) checkBatchLoan(tr *transportInfo) error {
	switch {
	case s.Batch < 0 || s.Batch > maxRunBatch:
		return cliutil.Usage("--batch must be in [0, %d], got %d", maxRunBatch, s.Batch)
	case s.Batch <= 1 && !s.Loan:
		return nil
	case tr.Name != "ring":
		return cliutil.Usage("--batch and --loan need the ring (transport %s has no batch calls or loans here)", tr.Name)
	case s.Lease:
		return cliutil.Usage("--batch and --loan do not go with --lease or --chaos")
	case s.Batch > 1 && s.Consumers != 1:
		return cliutil.Usage("--batch takes one consumer (a batching consumer could take another's end marker), got --consumers %d", s.Consumers)
	}
	return nil
}
