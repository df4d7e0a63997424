package transport

import (
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/internal/peers"
)

// fileHandle is what a Ring and a Deque handle each hold the same way: the
// mapping, the file's id, this handle's view of the participant table (its
// entry is tab.Self) and the slot geometry, with the methods that only
// read them. Each kind embeds it; what Close releases before unmapping is
// the kind's.
type fileHandle struct {
	reg *shm.Region
	id  uint64 // layout.FileID of the file
	tab peers.Table
	geo *layout.SlotGeometry // the kind's layout's
}

// ID identifies the file (layout.FileID): heartbeat tables record leases
// by it.
func (f *fileHandle) ID() uint64 { return f.id }

// Path returns the file's path.
func (f *fileHandle) Path() string { return f.reg.Path() }

// Header returns the file's decoded common header.
func (f *fileHandle) Header() layout.Header { return f.reg.Header() }

// Participant returns this handle's participant index, or -1 if it is not
// attached (read-only or closed).
func (f *fileHandle) Participant() int { return int(f.tab.Self) - 1 }

// Peers reports every participant entry.
func (f *fileHandle) Peers() []check.Peer { return f.tab.All() }

// Capacity returns the number of slots.
func (f *fileHandle) Capacity() uint64 { return f.geo.Capacity }

// SlotSize returns the bytes per slot.
func (f *fileHandle) SlotSize() uint32 { return uint32(f.geo.SlotSize) }

// MaxPayload returns the largest message the file carries.
func (f *fileHandle) MaxPayload() int { return int(f.geo.PayloadMax()) }

// DeliveryLimit returns how many deliveries a message gets before it is
// set aside as poison.
func (f *fileHandle) DeliveryLimit() int { return int(f.geo.DeliveryLimit) }

// CheckFile reports whether the file is still whole: not truncated under
// the mapping, not grown, without holes (see shm.Region.CheckFile). One
// fstat: for long waits and watch views, not for every message.
func (f *fileHandle) CheckFile() error { return f.reg.CheckFile() }

// Sync flushes the file; see shm.Region.Sync.
func (f *fileHandle) Sync() error { return f.reg.Sync() }

// guarded runs fn, a slow path that touches the mapping (a check, scan,
// repair or detach), under the region's fault guard; see shm.Region.Guard.
func guarded[T any](reg *shm.Region, op string, fn func() (T, error)) (T, error) {
	var t T
	var err error
	if gerr := reg.Guard(op, func() error { t, err = fn(); return nil }); gerr != nil {
		var zero T
		return zero, gerr
	}
	return t, err
}

// unmap is Close's last step: it unmaps the file and returns err, or the
// unmapping's error if err is nil.
func (f *fileHandle) unmap(err error) error {
	if cerr := f.reg.Close(); err == nil {
		err = cerr
	}
	return err
}
