package pass

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// ReplyPath is the reply ring of the client registered in heartbeat slot
// slot on the submit queue at submitPath. A client creates it (or reuses
// the one its slot's previous client left) when it starts; workers open it
// when a pass first names it, and push that client's results to it only.
func ReplyPath(submitPath string, slot int) string {
	return fmt.Sprintf("%s.reply-%d", submitPath, slot)
}

// replies is a pool's view of its clients' reply rings: one open handle
// per heartbeat slot, for the registration (generation) that last named
// it. A new client in the slot replaces the handle (the file is the same
// unless someone recreated it; reopening picks that up too).
type replies struct {
	submitPath string
	mu         sync.Mutex // serialises opens and replacements
	rings      []atomic.Pointer[replyRing]
	closed     bool
	retired    []*transport.Ring // handles on files since replaced at the same path
}

type replyRing struct {
	gen  uint32
	ring *transport.Ring
}

func newReplies(submitPath string, slots int) *replies {
	return &replies{submitPath: submitPath, rings: make([]atomic.Pointer[replyRing], slots)}
}

var errRepliesClosed = errors.New("pass: pool stopped")

// get returns the reply ring of registration t: a load when it is open.
func (rs *replies) get(t heartbeat.Ticket) (*transport.Ring, error) {
	if int(t.Slot) >= len(rs.rings) {
		return nil, fmt.Errorf("%w: reply slot %d outside the heartbeat table's %d", ErrMalformed, t.Slot, len(rs.rings))
	}
	if r := rs.rings[t.Slot].Load(); r != nil && r.gen == t.Gen {
		return r.ring, nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return nil, errRepliesClosed
	}
	old := rs.rings[t.Slot].Load()
	if old != nil && old.gen == t.Gen {
		return old.ring, nil
	}
	ring, err := transport.OpenRing(ReplyPath(rs.submitPath, int(t.Slot)))
	if err != nil {
		return nil, err
	}
	if MaxResult(ring.MaxPayload()) <= 0 {
		ring.Close()
		return nil, fmt.Errorf("%w: %s: a %d-byte payload cannot carry a result header", heartbeat.ErrInvalidConfig, ring.Path(), ring.MaxPayload())
	}
	if old != nil && old.ring.ID() == ring.ID() {
		// The slot's new client kept the file (the usual case): keep the
		// handle workers may be pushing through, under the new generation.
		ring.Close()
		rs.rings[t.Slot].Store(&replyRing{gen: t.Gen, ring: old.ring})
		return old.ring, nil
	}
	rs.rings[t.Slot].Store(&replyRing{gen: t.Gen, ring: ring})
	if old != nil {
		// The file was recreated. A worker may still be pushing through
		// the old handle (to a file nobody reads: that registration has
		// ended), so it is closed only at Stop, when no worker runs.
		rs.retired = append(rs.retired, old.ring)
	}
	return ring, nil
}

// close closes every handle; the pool's workers have stopped.
func (rs *replies) close() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.closed = true
	var errs []error
	for i := range rs.rings {
		if r := rs.rings[i].Swap(nil); r != nil {
			errs = append(errs, r.ring.Close())
		}
	}
	for _, r := range rs.retired {
		errs = append(errs, r.Close())
	}
	rs.retired = nil
	return errors.Join(errs...)
}
