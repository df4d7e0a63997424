package bridge

import (
	"errors"

	"github.com/shmkit/shmkit/internal/bridge/journal"
)

// Sentinel errors (errors.Is), wrapped with the file, stream or server
// they are about.
var (
	// ErrNoMessageIDs: the ring was created without message ids
	// (ringctl create --msg-ids), so nothing stable can name its
	// messages to the duplicate window.
	ErrNoMessageIDs = errors.New("bridge: ring has no message ids (create it with ringctl create --msg-ids)")
	// ErrConnect: the first connection to the server failed.
	ErrConnect = errors.New("bridge: cannot connect to the NATS server")
	// ErrNoStream, ErrNoConsumer: the stream or consumer does not exist
	// and --create was not given.
	ErrNoStream   = errors.New("bridge: stream does not exist (create it, or pass --create)")
	ErrNoConsumer = errors.New("bridge: consumer does not exist (create it, or pass --create)")
	// ErrStreamConfig: the stream exists but cannot carry the bridge's
	// guarantees (not Limits retention, no duplicate window, subject not
	// bound, window longer than MaxAge).
	ErrStreamConfig = errors.New("bridge: stream unfit for the bridge")
	// ErrInvalidConfig: options that cannot work together.
	ErrInvalidConfig = errors.New("bridge: invalid configuration")
	// ErrDrainTimeout: a stop could not finish what was in flight in time
	// (the leases left are requeued when the ring handle closes).
	ErrDrainTimeout = errors.New("bridge: in-flight messages not finished before the drain timeout")
	// ErrIDCollision: a duplicate PubAck names a stored message other
	// than the one published under that Nats-Msg-Id: two messages of the
	// ring share an id (docs/design.md, "Message ids"). The out bridge
	// stops without acking the lease.
	ErrIDCollision = errors.New("bridge: message id collision")
	// ErrBridgeRunning: another bridge of the same direction holds the
	// ring (its side lock file).
	ErrBridgeRunning = errors.New("bridge: another bridge runs on this ring")
	// ErrMaxPayload: the ring's messages (with the bridge's headers) can
	// be larger than the server's max_payload: such a message would be
	// refused at every publish.
	ErrMaxPayload = errors.New("bridge: ring messages larger than the server's max_payload")
	// ErrJournal: the out bridge's publish journal cannot be read or
	// written (the journal package's sentinel).
	ErrJournal = journal.ErrJournal
)
