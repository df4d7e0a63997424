package bridge

import (
	"context"
	"fmt"

	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// Source is what the out direction needs of a ring: leases in batches,
// each carrying its message id (Lease.ID), and the file's id.
type Source interface {
	ClaimBatch(ctx context.Context, leases []transport.Lease) (int, error)
	AckBatch(leases []transport.Lease) error
	Repair() (check.RepairReport, error)
	FileID() uint64
	Path() string
	Close() error
}

// Sink is what the in direction needs of a ring: a push carrying an id,
// and how much room is left (so that a full ring stops the fetching).
type Sink interface {
	PushID(ctx context.Context, msg []byte, id uint64) error
	MaxPayload() int
	Room() int
	Repair() (check.RepairReport, error)
	ID() uint64
	Path() string
	Close() error
}

// ringSink is a Ring as a Sink (PushID is the Ring's).
type ringSink struct{ *transport.Ring }

// Room is the free slots, from counters read without stopping anyone:
// a hint (others push and pop meanwhile), which only sizes the next fetch;
// a push that finds the ring full still waits.
func (s ringSink) Room() int {
	c := s.Ring.Counters()
	d := c.Depth()
	if capacity := s.Capacity(); d < capacity {
		return int(capacity - d)
	}
	return 0
}

// OpenSource opens the ring at path for the out direction, repairs what
// dead participants left (the library's repair: only on proof of death),
// and refuses a ring without message ids.
func OpenSource(path string, opts ...shm.Option) (Source, check.RepairReport, error) {
	r, err := transport.OpenRing(path, opts...)
	if err != nil {
		return nil, check.RepairReport{}, err
	}
	if !r.MessageIDs() {
		r.Close()
		return nil, check.RepairReport{}, fmt.Errorf("%s: %w", path, ErrNoMessageIDs)
	}
	rep, err := r.Repair()
	if err != nil {
		r.Close()
		return nil, rep, fmt.Errorf("%s: repair: %w", path, err)
	}
	return r, rep, nil
}

// OpenSink opens the ring at path for the in direction, as OpenSource.
func OpenSink(path string, opts ...shm.Option) (Sink, check.RepairReport, error) {
	r, err := transport.OpenRing(path, opts...)
	if err != nil {
		return nil, check.RepairReport{}, err
	}
	if !r.MessageIDs() {
		r.Close()
		return nil, check.RepairReport{}, fmt.Errorf("%s: %w", path, ErrNoMessageIDs)
	}
	rep, err := r.Repair()
	if err != nil {
		r.Close()
		return nil, rep, fmt.Errorf("%s: repair: %w", path, err)
	}
	return ringSink{r}, rep, nil
}
