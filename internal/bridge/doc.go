// Package bridge carries messages between shmkit rings and NATS JetStream,
// crash-safely: the engine of cmd/shmbridge.
//
// Out (ring → JetStream) claims messages as leases, publishes each with a
// Nats-Msg-Id made of the ring's file id and the message's id (stable
// across redelivery and requeue), waits for the PubAcks, and only then acks
// the leases: a bridge killed anywhere republishes at most what it had
// leased, and the stream's duplicate window drops the copies. In (JetStream
// → ring) fetches from a durable pull consumer with explicit acks, pushes
// each message with its stream sequence as its id, and acks it to JetStream
// only after the push returned: at-least-once, a redelivered copy carrying
// the same id. docs/design.md ("The bridge") gives the guarantees, the
// duplicate window's limits and the crash-window table.
//
// It is not a general NATS client, and nothing in layout, shm, transport
// or sched imports it (or NATS): only this package, cmd/shmbridge and
// their tests do.
package bridge
