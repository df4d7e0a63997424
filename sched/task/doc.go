// Package task is an in-process task scheduler: futures kept by id and
// awaited alone or in groups.
//
// A Scheduler[T] keeps asynchronous tasks by ID: a task is registered with
// the Callable that computes its result, or as an external task that other
// code completes through a one-shot Completer (a Receiver waits for it
// without the Scheduler). Awaiting a task (Resolve, or a join over a group
// of tasks: All, Race, Any, AllSettled) runs its callable at most once, on
// its own goroutine, and caches the Outcome, so every later await gets the
// same result without running anything.
//
// It is for futures that belong to one process: work started by a caller
// and awaited later, possibly by several goroutines, and results that arrive
// from elsewhere (for example a pass completed by another process: see
// pass.Tasks).
//
// It is not a worker pool (it does not bound how many callables run at
// once), it keeps no state in shared memory, and nothing survives the
// process: use the transports for work that must cross processes or outlive
// a crash. It imports no other shmkit package.
package task
