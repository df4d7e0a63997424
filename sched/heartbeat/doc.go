// Package heartbeat is the heartbeat table of a group of processes, the
// failover watchdog that reclaims the dead among them, and the exit events
// the watchdog publishes.
//
// A Table is a shmkit file of its own (kind layout.KindHeartbeat, see
// docs/format.md). Every process of a group registers in it (Register gives
// its Member) with its pid, start time and boot, beats on a shared
// monotonic clock, and records the leases it holds on rings and deques
// (RecordLease), so that inspectors (hbdump) and watchdogs see what its
// work is. Snapshots read the table without writing to it.
//
// A Watchdog judges every participant with shm.Judge (dead only on proof
// of death, stale when alive but silent) and, with apply, reclaims the
// dead: it repairs each queue it was given (the queue's own Repair
// requeues every lease of a dead participant of that file), then frees the
// slots of dead participants whose leases are all in those queues. Its
// WatchReport says, per dead participant, what it did or in a dry run
// would do, and why (Decision). ExitEvents carries exits to one bounded
// subscriber.
//
// heartbeat is not a transport and does not move messages itself: the
// ring's or deque's slot words stay the truth about a lease, and requeueing
// goes through their Repair (a Repairable). It does not schedule work
// either: package pass runs its workers and watchdog on top of it. The
// crash windows are argued in docs/design.md ("Heartbeat table, watchdog
// and the Pass scheduler").
package heartbeat
