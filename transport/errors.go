package transport

import "errors"

// Errors of package transport. Errors about a particular file wrap one of
// these together with the path, so errors.Is works and users see the file.
var (
	ErrFull            = errors.New("transport: ring full")
	ErrEmpty           = errors.New("transport: ring empty")
	ErrTooLarge        = errors.New("transport: message larger than the slot payload")
	ErrShortBuffer     = errors.New("transport: buffer shorter than the message")
	ErrCorrupt         = errors.New("transport: ring memory corrupt")
	ErrTooManyPeers    = errors.New("transport: participant table full")
	ErrNotAttached     = errors.New("transport: ring opened read-only or closed")
	ErrLeaseLost       = errors.New("transport: lease no longer held by this participant")
	ErrRepairBusy      = errors.New("transport: another live process is repairing the ring")
	ErrInvalidConfig   = errors.New("transport: invalid ring configuration")
	ErrDeadlineOrClose = errors.New("transport: wait ended")
)
