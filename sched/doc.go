// Package sched holds the schedulers that sit on shmkit's transports:
//
//   - the heartbeat table (a shmkit file of its own) where every process of
//     a group registers with its pid, start time and boot, beats on a
//     shared monotonic clock and records the leases it holds;
//   - the failover watchdog, which proves participants dead, requeues their
//     leased work through each ring's Repair and frees their slots, and
//     publishes exit events to one bounded subscriber;
//   - the background Pass scheduler: closures registered by id, passes
//     submitted on a submit ring, executed by workers in any process with
//     leases (a worker killed mid-pass loses nothing), results on a result
//     ring; either side may be a work-stealing deque instead, chosen by
//     StartByWorkloadShape from a workload's shape;
//   - the task scheduler: tasks resolved once, completed externally, joined
//     with All, Race, Any and AllSettled;
//   - the fair transactional scheduler and its all-gather consensus over
//     shared memory.
//
// sched is a thin layer: it does not touch slot words or lay out rings
// (transport and layout do), and repairs go through the owning package's
// repair API. Wire formats are in docs/format.md, crash windows in
// docs/design.md.
package sched
