package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// Source is what the out direction needs of a ring or deque: leases in batches,
// each carrying its message id (Lease.ID), and the file's id.
type Source interface {
	ClaimBatch(ctx context.Context, leases []transport.Lease) (int, error)
	AckBatch(leases []transport.Lease) error
	Pending() uint64 // messages waiting to be claimed (a hint: the out direction's lag)
	MaxPayload() int // the largest message (checked against the server's max_payload at start)
	Repair() (check.RepairReport, error)
	FileID() uint64
	Path() string
	Close() error
}

// Sink is what the in direction needs of a ring or deque: a push carrying an id,
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

// ringSource and dequeSource are a Ring and a Deque as Sources.
type ringSource struct{ *transport.Ring }

func (s ringSource) Pending() uint64 { return s.Counters().Depth() }

type dequeSource struct{ *transport.Deque }

func (s dequeSource) Pending() uint64 { return uint64(max(s.Len(), 0)) }

// dequeSink is a Deque, owned by the bridge, as a Sink.
type dequeSink struct{ *transport.Deque }

func (s dequeSink) Room() int {
	if n := int(s.Capacity()) - s.Len(); n > 0 {
		return n
	}
	return 0
}

// queueFile is what opening either kind gives.
type queueFile interface {
	MessageIDs() bool
	Repair() (check.RepairReport, error)
	Close() error
}

// openQueue opens the ring or deque at path (a ring first; a file of
// another kind is tried as a deque), refuses one without message ids and
// repairs it (the library's repair: only on proof of death).
func openQueue(path string, opts []shm.Option) (*transport.Ring, *transport.Deque, check.RepairReport, error) {
	var q queueFile
	r, err := transport.OpenRing(path, opts...)
	var d *transport.Deque
	if errors.Is(err, layout.ErrWrongKind) {
		d, err = transport.OpenDeque(path, opts...)
		if errors.Is(err, layout.ErrWrongKind) {
			err = fmt.Errorf("%w: %s: neither a ring nor a deque", layout.ErrWrongKind, path)
		}
	}
	if err != nil {
		return nil, nil, check.RepairReport{}, err
	}
	if r != nil {
		q = r
	} else {
		q = d
	}
	if !q.MessageIDs() {
		q.Close()
		return nil, nil, check.RepairReport{}, fmt.Errorf("%s: %w", path, ErrNoMessageIDs)
	}
	rep, err := q.Repair()
	if err != nil {
		q.Close()
		return nil, nil, rep, fmt.Errorf("%s: repair: %w", path, err)
	}
	return r, d, rep, nil
}

// OpenSource opens the ring or deque at path for the out direction (a
// deque's messages are claimed from the top, as a thief claims them),
// after repairing it, and refuses one without message ids.
func OpenSource(path string, opts ...shm.Option) (Source, check.RepairReport, error) {
	r, d, rep, err := openQueue(path, opts)
	switch {
	case err != nil:
		return nil, rep, err
	case r != nil:
		return ringSource{r}, rep, nil
	}
	return dequeSource{d}, rep, nil
}

// OpenSink opens the ring or deque at path for the in direction, as
// OpenSource. A deque is pushed by its owner only: the bridge adopts it,
// which it may only when the deque has no live owner (ErrOwnerAlive).
func OpenSink(path string, opts ...shm.Option) (Sink, check.RepairReport, error) {
	r, d, rep, err := openQueue(path, opts)
	switch {
	case err != nil:
		return nil, rep, err
	case r != nil:
		return ringSink{r}, rep, nil
	}
	more, err := d.Adopt()
	if err != nil {
		d.Close()
		return nil, rep, fmt.Errorf("%s: take the deque's owner role: %w", path, err)
	}
	rep.DeadPeers = append(rep.DeadPeers, more.DeadPeers...)
	rep.Done = append(rep.Done, more.Done...)
	return dequeSink{d}, rep, nil
}
