// Package transport holds shmkit's shared transports, each a file kind
// laid out by package layout and mapped by package shm:
//
//   - Ring (kind 2): a bounded multi-producer multi-consumer queue of
//     fixed-size slots. Plain pops, and leased consumption (Claim, Ack,
//     Release) with redelivery and poison. Producers pass held leases.
//   - Deque (kind 3): a work-stealing deque. One owner pushes and pops its
//     newest work at the bottom; thieves in any process steal the oldest
//     at the top, plainly or leased. A dead owner's deque is adopted.
//   - HashMap (kind 4): a fixed-capacity map of fixed-size keys and
//     values; readers are lock-free and never see a torn value.
//
// Ring and Deque satisfy Queue, the push/pop interface the Pass scheduler
// (package sched/pass) rides on. Pick chooses a family from a workload's
// shape and OpenQueue opens one.
//
// All three are crash-safe in the same way: every slot or bucket an
// operation takes is stamped, in the same atomic step, with the taker's
// entry in the file's participant table (pid, start time, boot), so what
// a SIGKILLed process leaves behind is found by Scan and undone or
// finished by Repair on proof of death only, never on a timeout. Shared
// memory is untrusted: every word read from a mapping is validated before
// use, and corruption is reported as ErrCorrupt, never a panic. The state
// machines, the ordering arguments and a crash-window table per kind are
// in docs/design.md; the byte layouts in docs/format.md.
//
// What transport is not: it does not schedule (sched/* does), does not lay
// bytes out (layout does), and has no notion of processes beyond the
// participant table (shm proves deaths).
package transport
