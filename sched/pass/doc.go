// Package pass is the background Pass scheduler: closures registered by id
// in every process, passes submitted by clients in any number of processes
// to one submit queue, executed by worker pools in any processes, each
// result delivered to the client that submitted its pass and to no other.
//
// A Pool (NewPool) opens or creates the submit queue, a heartbeat table and
// the queue's cancel board, registers its process in the table and runs
// workers. Each worker claims a pass with a lease (recorded in its
// heartbeat slot), runs the closure the Registry holds under the pass's id
// (a panic or runtime.Goexit becomes an error result), pushes the result to
// the submitting client's reply ring and acks the pass. A worker killed
// mid-pass loses nothing: the pass stays leased until a watchdog (Pool's
// Config.Watchdog, or ScanNow) requeues it, so a pass runs at least once.
//
// A Client (NewClient) registers too: its heartbeat slot and the slot's
// generation are the reply address every pass it submits carries, and name
// its reply ring (ReplyPath), which only it reads. Submit returns a Handle,
// awaited alone (Wait) or in groups with the task scheduler's joins (All,
// Race, Any, AllSettled on the Client); a settled pass is forgotten once
// every awaiter has its result. Cancelling a pass (Handle.Cancel, losing a
// Race or Any, Close) settles it as cancelled at once and posts the token
// on the cancel board: the worker running it has its closure's context
// cancelled, a worker claiming it later skips it, and the result that still
// comes is dropped and counted. The first result of a pass settles it;
// another (a pass run twice after a crash or a Stop that gave up) finds
// nothing waiting and is counted (ClientStats.Unmatched).
//
// A client that leaves (Close, or proven dead and reclaimed by a watchdog)
// stalls nobody: workers skip its passes still queued (Stats.Orphaned),
// cancel the closures running for it, and drop its results
// (Stats.OrphanedResults). A client keeps at most InFlight passes awaiting
// results, fewer than its reply ring holds, so its own results always fit;
// a result that finds the ring full anyway (duplicates, a client that
// stopped reading) waits beside the workers, holding its pass's lease,
// while they go on serving the others.
//
// Stop(ctx) lets passes in flight finish until ctx ends, then cancels the
// running closures' contexts, releases their passes back to the submit
// queue, and returns without waiting for the closures; a result an
// abandoned run returns later is dropped and counted (Stats.LateResults).
// A released pass runs again, so delivery is at least once, after a Stop
// as after a crash, and closures with effects must be idempotent; and at
// most the submit ring's DeliveryLimit times: a pass that reaches it (its
// workers died in it, or stopping pools handed it back, that often) is
// answered with ErrPoisoned.
//
// The submit side may be a work-stealing deque (Shared.Submit with a
// work-stealing shape): only its owner pushes, so then one client owns it
// and the pools steal. Reply rings are always rings: results come from
// workers in many processes to one reader. Wire format and files in
// docs/format.md; crash windows and the routing design in docs/design.md.
//
// pass is a thin layer: it does not touch slot words or lay out rings
// (transport and layout do), does not judge liveness (heartbeat does), and
// does not order or bound the work it is given beyond what the queues hold
// (that is fair's job). Invalid configurations wrap
// heartbeat.ErrInvalidConfig.
package pass
