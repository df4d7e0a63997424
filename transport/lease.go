package transport

// Lease is a message handed to this participant by Claim (a Ring's or a
// Deque's). Its payload stays in its slot, untouched, until Ack or
// Release: Data is a view of it (zero-copy), valid until then. If the
// process dies first, a repair delivers the message again.
type Lease struct {
	slot       uint64
	lap        uint32
	data       []byte
	id         uint64
	Deliveries int // times this message has been handed out, this one included
}

// ID returns the message's id (see Ring.MessageIDs), 0 in a file without
// message ids. A message redelivered after a repair requeued it keeps its
// id: the same message, delivered again.
func (l *Lease) ID() uint64 { return l.id }

// Data returns the leased message. It aliases the mapping: copy what must
// outlive Ack.
func (l *Lease) Data() []byte { return l.data }

// Slot returns the index of the slot holding the message.
func (l *Lease) Slot() uint64 { return l.slot }

// Lap returns the lap at which the message was claimed.
func (l *Lease) Lap() uint32 { return l.lap }
