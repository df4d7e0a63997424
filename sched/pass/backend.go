package pass

import (
	"context"
	"fmt"
	"time"

	"github.com/shmkit/shmkit/sched/fair"
)

// FairBackend is a fair.Backend that runs each prepared transition as a
// pass in worker processes: the transition is encoded into the closure's
// argument bytes, submitted through a Client, and its fair.AsyncOutput
// finishes when the pass's result arrives. Fair scheduling of many
// requests can so sit on top of any number of worker processes.
type FairBackend[W, B any] struct {
	name    string
	closure uint32
	client  *Client
	encode  func(id fair.WorkID, work W, branch *B) ([]byte, error)
	apply   func(branch *B, result []byte) error
	timeout time.Duration
}

// NewFairBackend returns a backend that submits through client to closure.
// encode turns a transition (and its branch) into the pass's arguments;
// apply, if not nil, writes the pass's result into the branch before the
// transition completes. A full submit ring is waited on for at most
// timeout (<= 0: one second); after that the submission fails.
func NewFairBackend[W, B any](client *Client, name string, closure uint32,
	encode func(id fair.WorkID, work W, branch *B) ([]byte, error),
	apply func(branch *B, result []byte) error, timeout time.Duration) *FairBackend[W, B] {
	if timeout <= 0 {
		timeout = time.Second
	}
	return &FairBackend[W, B]{name: name, closure: closure, client: client, encode: encode, apply: apply, timeout: timeout}
}

// Submit encodes and submits the transition and returns its output.
func (p *FairBackend[W, B]) Submit(id fair.WorkID, work W, branch *B) (*fair.AsyncOutput, error) {
	args, err := p.encode(id, work, branch)
	if err != nil {
		return nil, fmt.Errorf("pass: work %v: encode: %w", id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	h, err := p.client.Submit(ctx, p.closure, args)
	if err != nil {
		return nil, fmt.Errorf("pass: work %v: %w", id, err)
	}
	out := fair.NewAsyncOutput(p.name, 1)
	go func() {
		result, err := h.Wait(context.Background())
		if err == nil && p.apply != nil {
			err = p.apply(branch, result)
		}
		out.Finish(result, err)
	}()
	return out, nil
}
