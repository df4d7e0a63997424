// Package fair is a fair, transactional scheduler of state transitions,
// with consensus among processes that run it in step.
//
// A Scheduler[W, S, B, O] keeps many requests, each with a canonical State
// S and a queue of Work W. Turns prepare transitions round-robin across
// requests (one request with a long queue cannot starve the others), hand
// each with a branch B of its request's state to a Backend, which returns
// an Output O holding the backend's resources, and commit the branch only
// once the transition's exact completion succeeded. Every occupancy
// dimension is bounded by Limits; cancellation and deadlines discard
// queued work at once and keep submitted work's resources until its exact
// completion. GoBackend runs transitions on goroutines; AsyncOutput is the
// output of any asynchronous backend.
//
// RunDistributedTurn and CancelDistributed make a group of schedulers, one
// per process, agree through a ConsensusTransport (an all-gather of words)
// on each turn's schedule, cancellations, deadlines and completions before
// acting; a disagreement poisons every participant.
//
// fair is not a transport and not a worker pool: it imports no other
// shmkit package. What binds it to shared memory lives elsewhere:
// gather.Member (package sched/gather) is the shared-memory
// ConsensusTransport, and pass.FairBackend (package sched/pass) runs
// transitions as passes in worker processes. A Scheduler is not safe for
// concurrent use. The state machine and the consensus protocol are argued
// in docs/design.md ("Fair scheduler and all-gather").
package fair
