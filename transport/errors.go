package transport

import (
	"errors"

	"github.com/shmkit/shmkit/transport/internal/peers"
)

// Errors of package transport, also the hash map's (package
// transport/hashmap). Errors about a particular file wrap one of these
// together with the path, so errors.Is works and users see the file.
var (
	ErrFull            = errors.New("transport: full")
	ErrEmpty           = errors.New("transport: empty")
	ErrTooLarge        = errors.New("transport: message, key or value larger than the file allows")
	ErrShortBuffer     = errors.New("transport: buffer shorter than the message")
	ErrCorrupt         = errors.New("transport: shared memory corrupt")
	ErrTooManyPeers    = peers.ErrTooManyPeers // "transport: participant table full"
	ErrNotAttached     = errors.New("transport: file opened read-only or closed")
	ErrLeaseLost       = errors.New("transport: lease no longer held by this participant")
	ErrRepairBusy      = peers.ErrRepairBusy // "transport: another live process is repairing the file"
	ErrInvalidConfig   = errors.New("transport: invalid configuration")
	ErrDeadlineOrClose = errors.New("transport: wait ended")
	ErrNotOwner        = errors.New("transport: only the deque's owner may do this")
	ErrOwnerAlive      = errors.New("transport: the deque's owner is alive")
	ErrNotFound        = errors.New("transport: key not found")
	ErrNoMessageIDs    = errors.New("transport: file created without message ids")
	ErrZeroID          = errors.New("transport: message id 0 is reserved (it means none)")
)
