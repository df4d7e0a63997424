package shm

import (
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's vDSO read of CLOCK_MONOTONIC. The runtime keeps
// this symbol linkable on purpose (go.dev/issue/67401), and it costs tens of
// nanoseconds where unix.ClockGettime costs a real system call.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// MonoNow returns CLOCK_MONOTONIC in nanoseconds.
//
// Timestamps stored in shared memory (heartbeats, lease expiries, latency
// stamps) are read by other processes, so they need a clock that is the same
// for every process on the machine. time.Now()'s monotonic reading is an
// offset from the start of the current process and cannot be compared across
// processes; CLOCK_MONOTONIC is system-wide, never jumps with wall-clock
// changes and does not advance during suspend.
func MonoNow() int64 {
	return nanotime()
}
