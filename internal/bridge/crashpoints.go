package bridge

// Crash points of the bridge (shm.CrashPoint names, armed with
// SHMKIT_CRASHPOINT): each step where a SIGKILL changes what the next
// bridge must do. docs/design.md ("The bridge", crash windows) has a row
// for each; cmd/shmbridge's kill tests die at every one.
const (
	// Out: leases held, nothing journaled or published.
	crashOutAfterClaim = "bridge.out.after-claim"
	// Out: the batch's ids journaled, nothing published.
	crashOutAfterJournal = "bridge.out.after-journal"
	// Out: the batch published, its PubAcks not yet awaited.
	crashOutAfterPublish = "bridge.out.after-publish"
	// Out: every PubAck of the batch received, the leases not acked.
	crashOutAfterPubAck = "bridge.out.after-puback"
	// Out: the leases acked, the journal's ack record not written.
	crashOutAfterLeaseAck = "bridge.out.after-lease-ack"
	// In: a batch fetched from the consumer, nothing pushed.
	crashInAfterFetch = "bridge.in.after-fetch"
	// In: a message pushed to the ring, not acked to JetStream.
	crashInAfterPush = "bridge.in.after-push"
	// In: a message acked to JetStream (ack sent, not confirmed).
	crashInAfterAck = "bridge.in.after-ack"
	// In: a too-large message's dead letter stored, the message not
	// terminated.
	crashInAfterDeadLetter = "bridge.in.after-dead-letter"
)
