// Package peers is the participant table that every shmkit file kind with
// owner stamps keeps (the ring and the deque in package transport, the
// hash map in transport/hashmap): one entry per attached handle (pid,
// start time, boot tag, pid namespace, generation), so that a stamp in a
// slot, bucket or role word names a process whose death can be proven
// from the file alone.
//
// The proof is the entry lock: a holder takes an open-file-description
// lock on its entry's bytes before it claims the entry and keeps it until
// the entry has left its hands (shm.Region.LockEntry), so a claiming or
// active entry whose lock is released has no live holder, in whatever pid
// namespace it ran. The pid and start time are a second witness where
// they mean something (shm.Region.JudgeEntry).
//
// Entries go free -> claiming -> active -> free (a clean detach) or dead
// (a detach that leaves things for a repair, or a repair that proved the
// holder dead) -> free (a repair that recovered everything stamped with
// it). Attach only ever takes free entries: when none is free and some
// are dead, it runs the kind's repair as the repairer (Recover) to free
// them, then tries again, so processes that attach and die never exhaust
// the table. The last entry (layout.PeerEntries) is the repairer entry:
// a handle without an entry of its own (a tool's repair, such an attach)
// holds it, locked like any other, while it repairs (AsRepairer), so its
// own death is as provable as anyone's.
//
// Table also judges entries (check.Peer), marks and frees dead entries
// for a repair, takes and releases role words (the repair lock, a deque's
// owner: LockValue of an entry's stamp and generation), and reports its
// own findings (Check) in the vocabulary of package transport/check.
//
// What peers is not: it knows nothing of slots, buckets or what a kind
// must recover from a dead participant (the kind passes that in), and it
// is internal: each kind's handle holds its Table by value and never
// exposes it.
package peers
