package transport

import (
	"context"

	"github.com/shmkit/shmkit/transport/check"
)

// Queue is the push/pop/lease interface that schedulers ride on. The ring
// implements it; so must any other transport that carries passes.
type Queue interface {
	TryPush(msg []byte) error
	Push(ctx context.Context, msg []byte) error
	TryPop(buf []byte) (int, error)
	Pop(ctx context.Context, buf []byte) (int, error)
	TryClaim() (Lease, error)
	Claim(ctx context.Context) (Lease, error)
	Ack(l Lease) error
	Release(l Lease) error
	NextID() uint64  // ring-wide unique ids (correlation tokens)
	MaxPayload() int // largest message
	ID() uint64      // layout.FileID of the file
	Path() string    // the file's path
	Repair() (check.RepairReport, error)
	Close() error
}

var _ Queue = (*Ring)(nil)
