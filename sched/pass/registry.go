package pass

import (
	"context"
	"fmt"
	"sync"
)

// Closure is the code a pass runs: argument bytes in, result bytes out.
// The result must fit the result slot (MaxResult of the ring's payload).
// args is valid until the closure returns (copy what must outlive it).
//
// ctx is cancelled when the scheduler's Stop gives up waiting (its own
// context ended): the pass has then been released to another worker, and
// whatever the closure returns is dropped. A closure that can run long
// should watch ctx; Stop does not wait for one that does not. Since a
// released pass runs again, a closure can run twice for one pass (as it
// can after a worker crash): make its effects idempotent.
type Closure func(ctx context.Context, args []byte) ([]byte, error)

// Registry maps closure ids to closures. Every process that executes
// passes registers the same ids; an id nobody registered produces an
// error result, never a crash.
type Registry struct {
	mu       sync.RWMutex
	closures map[uint32]Closure
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{closures: map[uint32]Closure{}} }

// Register binds id to fn, replacing any earlier binding.
func (r *Registry) Register(id uint32, fn Closure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closures[id] = fn
}

// Lookup returns the closure for id.
func (r *Registry) Lookup(id uint32) (Closure, error) {
	r.mu.RLock()
	fn, ok := r.closures[id]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownClosure, id)
	}
	return fn, nil
}
