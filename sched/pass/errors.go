package pass

import (
	"errors"
	"fmt"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// ErrUnsupportedFamily marks a transport family the Pass scheduler cannot
// ride: its wire format is push/pop, so the hash map (key/value) is not a
// transport for it. The error is an *UnsupportedFamilyError, which names
// the side and the family refused.
var ErrUnsupportedFamily = errors.New("pass: transport family cannot carry passes")

// UnsupportedFamilyError is the refusal of a submit shape that picks a
// family that is not a queue. errors.Is(err, ErrUnsupportedFamily) and
// errors.Is(err, heartbeat.ErrInvalidConfig) hold for it.
type UnsupportedFamilyError struct {
	Side   string           // "submit"
	Shape  transport.Shape  // the shape given for that side
	Family transport.Family // the family it picks (transport.FamilyHashMap)
}

func (e *UnsupportedFamilyError) Error() string {
	return fmt.Sprintf("%v: %s side: %v picks the %v, which is not a queue", ErrUnsupportedFamily, e.Side, e.Shape, e.Family)
}

// Unwrap returns ErrUnsupportedFamily and heartbeat.ErrInvalidConfig.
func (e *UnsupportedFamilyError) Unwrap() []error {
	return []error{ErrUnsupportedFamily, heartbeat.ErrInvalidConfig}
}

// ErrSubmitDequeOwner: a submit side that is a deque pushes only from its
// owner, so the one client must own it and no pool may: a client that
// finds it owned by another live process is refused at start, and so is a
// pool that finds no deque to open (it would have to create it, and own
// it); a pool opens an existing one as a thief.
var ErrSubmitDequeOwner = errors.New("pass: only the submit deque's owner can submit")

// ErrClosed is returned by a Client's calls after Close, and is the cause
// of the passes Close cancelled.
var ErrClosed = errors.New("pass: client closed")

// ErrSubmitterGone is the cause a closure's context is cancelled with when
// the client that submitted its pass has left (closed, or reclaimed on
// proof of death): nobody awaits its result.
var ErrSubmitterGone = errors.New("pass: the pass's submitter has left")

// ErrForeignHandle: a join was given a handle of another Client.
var ErrForeignHandle = errors.New("pass: handle of another client")
