// Package pass is the background Pass scheduler: closures registered by id
// in every process, passes submitted on a submit queue and executed by
// workers in any process, results on a result queue.
//
// Start (or StartWithQueues over transports the caller opened) opens or
// creates the submit and result queues and a heartbeat table, registers
// this process in the table, and runs its workers, each of which claims a
// pass with a lease (recorded in its heartbeat slot), runs the closure the
// Registry holds under the pass's id (a panic becomes an error result) and
// pushes the result. A worker killed mid-pass loses nothing: the pass stays
// leased until a watchdog (heartbeat.Watchdog, run by Scheduler.ScanNow or
// periodically with Config.Watchdog) requeues it, so a pass runs at least
// once. Either side may be a work-stealing deque instead of a ring, chosen
// by StartByWorkloadShape from a workload's shape (a key-value shape is
// refused with an *UnsupportedFamilyError naming the hash map). Only a
// deque's owner can push, so a result deque needs every worker in its
// owner's process; a scheduler whose workers could not push to its result
// deque, or that would own it without workers, is refused at start
// (ErrResultDequeOwner). Stop closes Config.Events, which disconnects its
// subscriber.
//
// Stop(ctx) lets passes in flight finish until ctx ends, then cancels the
// running closures' contexts, releases their passes (and any whose result
// waits for room in a full result ring) back to the submit queue, and
// returns without waiting for the closures; a result an abandoned run
// returns later is dropped and counted (Stats.LateResults). Another worker
// runs a released pass again, so a pass can run twice: delivery is at
// least once, after a Stop as after a crash, and closures with effects
// must be idempotent.
//
// Submitter and Collector put passes and read results (wire format in
// docs/format.md, bounded by MaxArgs and MaxResult); Tasks makes every
// submitted pass a task.Scheduler task, so awaiting work in other processes
// is ordinary task code; FairBackend runs a fair.Scheduler's transitions as
// passes.
//
// pass is a thin layer: it does not touch slot words or lay out files
// (transport and layout do), does not judge liveness (heartbeat does), and
// does not order or bound the work it is given beyond what the queues hold
// (that is fair's job). Invalid configurations wrap
// heartbeat.ErrInvalidConfig, which also covers the heartbeat.Config
// inside Config. Crash windows are in docs/design.md.
package pass
