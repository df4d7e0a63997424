package shm

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations from <linux/futex.h>; x/sys/unix has SYS_FUTEX but no op
// constants. FUTEX_PRIVATE_FLAG (128) is deliberately absent: a private futex
// is keyed by the waiter's virtual address in its own mm, so a wake from
// another process would find nobody and the waiter would sleep on.
const (
	futexWait = 0
	futexWake = 1
)

// ErrTimeout is returned by a timed wait that ran out of time, so a caller can
// tell "give up" apart from "go and re-check the condition".
var ErrTimeout = errors.New("shm: wait timed out")

// FutexWait sleeps while *word == expect, at most timeout (timeout < 0: no
// limit; timeout == 0: do not sleep, only compare).
//
// The kernel compares and sleeps atomically, so a FutexWake that follows a
// store by another process (or goroutine) cannot be missed. It returns nil
// when woken, when the word no longer equals expect, and on spurious wake-ups:
// callers must always re-check their own condition in a loop. It returns
// ErrTimeout when the time ran out. Signals that interrupt a timed wait are
// absorbed here: the wait resumes with the remaining time, measured on
// CLOCK_MONOTONIC, so a process that handles signals does not see early
// returns.
//
// word must live in memory shared between the processes (a MAP_SHARED
// mapping of the same file or memfd); each blocked call pins one OS thread.
func FutexWait(word *atomic.Uint32, expect uint32, timeout time.Duration) error {
	addr := uintptr(unsafe.Pointer(word))
	if timeout < 0 {
		for {
			_, _, errno := unix.Syscall6(unix.SYS_FUTEX, addr, futexWait, uintptr(expect), 0, 0, 0)
			switch errno {
			case 0, unix.EAGAIN:
				return nil
			case unix.EINTR:
				// Untimed waits are normally restarted by the kernel
				// (SA_RESTART); if one is not, just wait again.
				continue
			default:
				return fmt.Errorf("shm: futex wait: %w", errno)
			}
		}
	}
	if timeout == 0 {
		if word.Load() != expect {
			return nil
		}
		return ErrTimeout
	}
	start := MonoNow()
	deadline := start + int64(timeout)
	if deadline < start { // overflow: a timeout of centuries
		deadline = math.MaxInt64
	}
	remaining := int64(timeout)
	for {
		ts := unix.NsecToTimespec(remaining)
		_, _, errno := unix.Syscall6(unix.SYS_FUTEX, addr, futexWait, uintptr(expect), uintptr(unsafe.Pointer(&ts)), 0, 0)
		switch errno {
		case 0, unix.EAGAIN:
			return nil
		case unix.ETIMEDOUT:
			return ErrTimeout
		case unix.EINTR:
			// A timed FUTEX_WAIT is not restarted after a signal handler
			// ran (and Go handles many signals), so restart it ourselves
			// with whatever time is left.
			remaining = deadline - MonoNow()
			if remaining <= 0 {
				return ErrTimeout
			}
		default:
			return fmt.Errorf("shm: futex wait: %w", errno)
		}
	}
}

// FutexWake wakes up to n waiters blocked in FutexWait on word (n <= 0 or
// math.MaxInt32 means all) and returns how many were woken.
//
// A wake costs a system call even when nobody sleeps, so hot paths should
// only call it when a waiter count or flag in shared memory says someone may
// be waiting.
func FutexWake(word *atomic.Uint32, n int) (int, error) {
	if n <= 0 || n > math.MaxInt32 {
		n = math.MaxInt32
	}
	r, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWake, uintptr(n), 0, 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("shm: futex wake: %w", errno)
	}
	return int(r), nil
}
