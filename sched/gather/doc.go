// Package gather is the all-gather file: a fixed group of processes on one
// machine that exchange words in rounds through shared memory.
//
// A Group is a file of kind layout.KindAllGather (docs/format.md) created
// with Create or OpenOrCreate; each process joins it once as one
// participant (Join gives its Member) and in every round contributes its
// words and receives everyone's (Member.AllGather). Rounds are bounded: a
// participant proven dead fails the round at once, one that does not arrive
// fails it after the round timeout, and the first failure aborts the group
// for everyone. A joined participant holds an entry lock on its slot's
// bytes of the file (shm.Region.LockEntry) until it leaves, and proof of
// death is that lock released (shm.Region.JudgeEntry): it holds whatever
// pid namespace the participant runs in, so a participant of a container
// sharing /dev/shm, which recorded pid 1 of its namespace, is alive while
// it runs (Peer.Where names it "pid 1 in another pid namespace"). A Member is the shared-memory fair.ConsensusTransport:
// fair schedulers in several processes reach agreement through it
// (NewFairScheduler builds one only if the file's buffers carry its turns;
// FairConfig sizes a file for given limits).
//
// gather is not a message queue (a round carries at most MaxWords words per
// participant and nothing is kept once everyone has read it), not a
// membership service (the group's size is fixed when the file is created,
// and a participant that dies or leaves ends the group: it is single-use),
// and it does not cross machines. The protocol and its crash windows are in
// docs/design.md ("The all-gather file").
package gather
