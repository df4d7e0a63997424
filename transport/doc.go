// Package transport holds shmkit's shared transports, each a file kind
// laid out by package layout and mapped by package shm, and the
// dispatcher that picks among them:
//
//   - Ring (kind 2): a bounded multi-producer multi-consumer queue of
//     fixed-size slots. Plain pushes and pops; zero-copy sends (TryLoan or
//     Loan a position, write the message into its slot, Publish or Abort
//     it); leased consumption (Claim, Ack, Release) with redelivery and
//     poison. Producers pass held leases; a loan holds its position, and
//     consumers wait at it, until it is published or aborted (a dead
//     loaner's is rolled back by Repair like any half-written slot).
//     Pushes, pops, claims and acks have a batch form (TryPushBatch,
//     PushBatch, TryPopBatch, PopBatch, TryClaimBatch, ClaimBatch,
//     AckBatch; see Batch calls).
//   - Deque (kind 3): a work-stealing deque. One owner pushes and pops its
//     newest work at the bottom; thieves in any process steal the oldest
//     at the top, plainly or leased. A dead owner's deque is adopted.
//     Pushes, pops, steals, claims and acks have a batch form
//     (TryPushBatch, PushBatch, TryPopBatch, PopBatch, TryStealBatch,
//     StealBatch, TryClaimBatch, ClaimBatch, AckBatch; see Batch calls).
//
// The hash map (kind 4) is in package transport/hashmap: it is not a
// Queue, but the dispatcher names it (FamilyHashMap) for key-value
// shapes, and it shares this package's error values.
//
// Ring and Deque satisfy Queue, the push/pop interface the Pass scheduler
// (package sched/pass) rides on. Pick chooses a family from a workload's
// shape and OpenQueue opens one.
//
// Check and Repair speak the vocabulary of package transport/check
// (check.Report, check.Finding, check.RepairReport). What the kinds share
// lives in files of its own: the wait engine (wait.go), slot
// classification for rings and deques (slots.go), Lease (lease.go), the
// file handle Ring and Deque embed (file.go), and the participant table
// (package transport/internal/peers).
//
// All of them are crash-safe in the same way: every slot or bucket an
// operation takes is stamped, in the same atomic step, with the taker's
// entry in the file's participant table (pid, start time, boot), so what
// a SIGKILLed process leaves behind is found by Scan and undone or
// finished by Repair on proof of death only, never on a timeout. The
// proof is the lock each participant holds on its table entry, an
// open-file-description lock the kernel drops only when the last
// descriptor of that open file closes, so a participant whose descriptor
// a child inherited (a fork without exec, or a file handed over with
// exec.Cmd.ExtraFiles, see shm.Region.InheritableFile) stays alive, with
// everything it holds, until that child has closed it or exited too. Go
// opens files close-on-exec, so children started by os/exec inherit
// nothing unless handed the file. Shared memory is untrusted: every word read from a mapping is validated before
// use, and corruption is reported as ErrCorrupt, never a panic. The state
// machines, the ordering arguments and a crash-window table per kind are
// in docs/design.md; the byte layouts in docs/format.md.
//
// # Batch calls
//
// A ring's or deque's batch call pushes, pops, steals, claims or acks many
// messages for one counter add and one wake check. It returns how many it did, n, and the
// rest was not done: msgs[:n] are pushed and msgs[n:] are not; bufs[:n]
// and lens[:n] hold n messages; leases[:n] are held. Its error says why it
// stopped:
//
//   - nil: it did all it was asked, or as many as fitted (a push) or were
//     waiting (a pop or claim): perhaps fewer than asked;
//   - ErrFull or ErrEmpty: none fitted, or none was waiting, and n is 0;
//   - anything else (ErrShortBuffer for a message longer than its
//     buffer, ErrCorrupt for a slot word no ring operation writes): n
//     were done before the call met it, and what it stopped at is left
//     as it was (a message too long for its buffer stays in the ring).
//
// A push batch with a message larger than MaxPayload is refused up front
// with ErrTooLarge naming its index: nothing is pushed. AckBatch acks
// every lease it still holds, and its error names the first it did not.
//
// The blocking forms (PushBatch, PopBatch, ClaimBatch) wait only while
// they can do nothing: once they have done at least one they return at
// once with the count, never waiting for room or messages for the rest.
// A blocking batch call whose context ends mid-batch returns what it did
// and the context's error, and since it only ever waits before its first,
// what it did is then nothing: it returns either n > 0 and no context
// error, or 0 and ctx's error (the context ended while it waited for the
// first).
//
// A ring's batch takes consecutive positions while it can (a held lease,
// poison, or another producer or consumer taking a position first splits
// it in runs), so its messages keep their order, though others' may come
// between two runs. A deque's batch takes what the single call takes, one
// after another: the owner's TryPopBatch the newest first from the
// bottom, a thief's (and every TryStealBatch and TryClaimBatch) the
// oldest first from the top; the owner's side moves bottom once per run,
// the thieves' side still moves top once per message (docs/design.md,
// "The deque", "Batch calls", says why). Each position is taken as a
// single call takes it, by a CAS that stamps the taker's entry in the
// slot word: a batch call interrupted by a SIGKILL is recovered position
// by position, exactly as single calls are (docs/design.md, "Batch
// calls", and the deque's).
//
// # Message ids
//
// A ring or deque created with RingConfig.MessageIDs (DequeConfig is the
// same type; ringctl create --msg-ids) gives every message a 64-bit id,
// kept in the last 8 bytes of its slot, so a slot carries 8 bytes less
// payload (48 of a 64-byte slot). Without it (the default) nothing
// changes, and the id calls refuse with ErrNoMessageIDs. A ring's plain
// push (TryPush, Push, a batch, a loan) stamps its position+1; TryPushID,
// PushID, TryPushBatchID, PushBatchID (and Loan.SetID) stamp the
// caller's, which must not be 0 (ErrZeroID). A deque numbers its pushes from a counter in the file (its
// positions are reused when the owner pops back). TryPopID, PopID,
// Lease.ID (TryClaim, Claim, the claim batches) and Peek report the id;
// the plain pop batches do not (claim instead). A message that is
// redelivered (a repair requeues a dead holder's message, or a Release)
// keeps its id: with the file's id (FileID) it names the message across
// crashes, repairs and re-creations of the file, which is what a consumer
// or a bridge needs to drop a duplicate. Ids are unique within a file
// only as far as callers of TryPushID keep theirs apart from position
// ids; a deque push killed after taking its number leaves a gap.
//
// What transport is not: it does not schedule (sched/* does), does not lay
// bytes out (layout does), and has no notion of processes beyond the
// participant table (shm proves deaths).
package transport
