package pass

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// Shared is what a Pool and a Client both name: the files of one submit
// queue. Every process on the queue gives the same paths.
type Shared struct {
	SubmitPath    string // the submit queue (opened, or created with Ring); reply rings and the cancel board are named after it
	HeartbeatPath string // the heartbeat table (opened, or created with Heartbeat)

	// Submit is the submit queue's workload shape; the zero value is a
	// stream (a ring). A work-stealing shape picks a deque, which only its
	// owner pushes: then one Client (its owner, started first) submits and
	// the pools steal. A key-value shape is refused (*UnsupportedFamilyError).
	Submit transport.Shape

	Ring          transport.RingConfig // geometry for a submit queue this process creates (default capacity 1024, 64-byte slots)
	Heartbeat     heartbeat.Config     // geometry for a table this process creates (default 64 slots)
	CancelEntries int                  // entries of a cancel board this process creates (default 256)

	Label        string        // shown by hbdump
	BeatInterval time.Duration // default 100 ms
}

func (c *Shared) defaults() {
	if c.Ring.Capacity == 0 {
		c.Ring.Capacity = 1024
	}
	if c.Heartbeat.Capacity == 0 {
		c.Heartbeat.Capacity = 64
	}
	if c.BeatInterval <= 0 {
		c.BeatInterval = 100 * time.Millisecond
	}
}

// seat is one process's place on a submit queue: the queue, the table it
// is registered in, and the cancel board.
type seat struct {
	submit transport.Queue
	hb     *heartbeat.Table
	member *heartbeat.Member
	board  *board
}

// family picks the submit queue's family from its shape.
func (c *Shared) family() (transport.Family, error) {
	if c.Submit == (transport.Shape{}) {
		return transport.FamilyRing, nil
	}
	f, _, err := transport.Pick(c.Submit)
	if err != nil {
		return 0, fmt.Errorf("%w: submit side: %w", heartbeat.ErrInvalidConfig, err)
	}
	if !f.IsQueue() {
		return 0, &UnsupportedFamilyError{Side: "submit", Shape: c.Submit, Family: f}
	}
	return f, nil
}

// openSubmit opens the submit queue. pushes says whether this process
// submits (a client): a submit deque is pushed only by its owner, so a
// client must own it (creating it, or adopting it when its owner is dead),
// and a pool never creates one and opens it as a thief (transport.OpenDeque
// never adopts), refused (ErrSubmitDequeOwner) when the file is missing.
func (c *Shared) openSubmit(pushes bool) (transport.Queue, error) {
	f, err := c.family()
	if err != nil {
		return nil, err
	}
	if f != transport.FamilyDeque {
		q, _, err := transport.OpenQueue(f, c.SubmitPath, c.Ring)
		return q, err
	}
	if !pushes {
		d, err := transport.OpenDeque(c.SubmitPath)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w: %s does not exist, and a pool does not create a submit deque, since only its creator could push passes (start the client first)",
				heartbeat.ErrInvalidConfig, ErrSubmitDequeOwner, c.SubmitPath)
		}
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	q, _, err := transport.OpenQueue(f, c.SubmitPath, c.Ring)
	if err != nil {
		return nil, err
	}
	if d, ok := q.(interface{ IsOwner() bool }); ok && !d.IsOwner() {
		q.Close()
		return nil, fmt.Errorf("%w: %w: %s: another live process owns it, so Submit here could never push (one client per submit deque: start it before the pools, which then only steal)",
			heartbeat.ErrInvalidConfig, ErrSubmitDequeOwner, c.SubmitPath)
	}
	return q, nil
}

// take opens the shared files and registers this process. The submit
// queue is given to Register, so a table full of dead members' slots
// recovers itself (their leases are in it).
func (c *Shared) take(pushes bool) (*seat, error) {
	if c.SubmitPath == "" || c.HeartbeatPath == "" {
		return nil, fmt.Errorf("%w: SubmitPath and HeartbeatPath are required", heartbeat.ErrInvalidConfig)
	}
	submit, err := c.openSubmit(pushes)
	if err != nil {
		return nil, err
	}
	s := &seat{submit: submit}
	if s.board, err = openBoard(c.SubmitPath, c.CancelEntries); err != nil {
		s.close()
		return nil, err
	}
	if s.hb, _, err = heartbeat.OpenOrCreate(c.HeartbeatPath, c.Heartbeat); err != nil {
		s.close()
		return nil, err
	}
	if s.member, err = s.hb.Register(c.Label, submit); err != nil {
		s.close()
		return nil, err
	}
	if s.member.Ticket().Slot > 0xffff {
		s.close()
		return nil, fmt.Errorf("%w: %s: heartbeat slot %d does not fit a pass's 16-bit reply slot", heartbeat.ErrInvalidConfig, c.HeartbeatPath, s.member.Slot())
	}
	return s, nil
}

// leave unregisters, wakes every pool's cancel watcher (so that closures
// still running for this registration are cancelled: it has ended) and
// closes what take opened.
func (s *seat) leave() error {
	var err error
	if s.member != nil {
		err = s.member.Unregister()
		s.member = nil
		s.board.wake()
	}
	return errors.Join(err, s.close())
}

// close unregisters and closes what take opened.
func (s *seat) close() error {
	var errs []error
	if s.member != nil {
		errs = append(errs, s.member.Unregister())
	}
	if s.hb != nil {
		errs = append(errs, s.hb.Close())
	}
	if s.board != nil {
		errs = append(errs, s.board.close())
	}
	if s.submit != nil {
		errs = append(errs, s.submit.Close())
	}
	return errors.Join(errs...)
}
