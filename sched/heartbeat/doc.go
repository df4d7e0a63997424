// Package heartbeat is the heartbeat table of a group of processes, the
// failover watchdog that reclaims the dead among them, and the exit events
// the watchdog publishes.
//
// A Table is a shmkit file of its own (kind layout.KindHeartbeat, see
// docs/format.md). Every process of a group registers in it (Register gives
// its Member) with its pid, start time, boot and pid namespace, beats on a
// shared monotonic clock, and records the leases it holds on rings and
// deques (RecordLease), so that inspectors (hbdump) and watchdogs see what
// its work is. Snapshots read the table without writing to it.
//
// # Proof of life
//
// A member holds an entry lock (shm.Region.LockEntry, an open file
// description lock) on its slot's bytes of the file from before it claims
// the slot until after it has freed it. The kernel drops the lock when the
// process dies, in whatever pid namespace it runs, so the lock, not the
// pid, proves a member alive: a claiming or active slot whose lock is
// released has no live member (shm.Region.JudgeEntry). The recorded pid
// and start time are for humans and a second witness where they mean
// something: a member of another pid namespace (a container sharing
// /dev/shm) recorded a pid of its own namespace, often 1, which names
// another process here (Participant.Where says so), and is judged by its
// lock alone. A verdict that cannot decide (the lock is unreadable, or it
// is released while the recorded process still runs) is "unknown": it is
// treated as alive, never reclaimed. A Table handle cannot see its own
// locks; it answers for the members it registered itself (Participant.Self).
//
// The lock belongs to the open file description, not the process: a child
// that inherits the table's descriptor (a fork without exec, or a
// descriptor handed on with Table.InheritableFile and exec.Cmd.ExtraFiles)
// keeps the members registered through it alive after the registering
// process dies, until the child exits or closes it too. Go opens files
// close-on-exec, so children started by os/exec do not inherit it unless
// given it.
//
// # Reclaiming the dead
//
// A Watchdog judges every participant (dead only on proof of death, stale
// when alive but silent) and, with apply, reclaims the dead: it repairs
// each queue it was given (the queue's own Repair requeues every lease of
// a dead participant of that file), then frees the slots of dead
// participants whose leases are all in those queues. Its WatchReport says,
// per dead participant, what it did or in a dry run would do, and why
// (Decision). ExitEvents carries exits to one bounded subscriber and keeps
// each exit's outcome, by pid and start time, until it is received or
// taken: a subscriber whose queue overflowed gets a *LaggedError
// (ErrLagged) and recovers what it missed with TakeOutcomes or
// TakeOutcome. The store is in the watchdog process's memory, bounded
// (WithOutcomeBound), and counts what it drops (OutcomesDropped).
//
// No crash loop can fill a table: Register on a full table recovers the
// slots of members proven dead itself, running a watchdog scan with apply
// over the queues given to it (Register(label, queues...)); a member
// without recorded leases needs no queue, one holding a lease in a queue
// not given keeps its slot. When nothing can be freed, Register returns a
// *FullError (errors.Is ErrTableFull) counting the live, unknown and
// dead-but-kept members, and why they are kept.
//
// heartbeat is not a transport and does not move messages itself: the
// ring's or deque's slot words stay the truth about a lease, and requeueing
// goes through their Repair (a Repairable). It does not schedule work
// either: package pass runs its workers and watchdog on top of it. The
// crash windows are argued in docs/design.md ("Heartbeat table, watchdog
// and the Pass scheduler").
package heartbeat
