package shm

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Guard runs fn and turns a memory fault inside it (SIGBUS from a mapped
// file truncated by another process, or SIGSEGV from an unmapped page) into
// ErrFault instead of a crash. Inspectors, which read files that hostile or
// broken processes may shrink under them, run their reads under Guard.
//
// Guard must run fn on the calling goroutine: the runtime's panic-on-fault
// setting is per goroutine. Panics that are not faults propagate unchanged.
func Guard(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if re, ok := r.(runtime.Error); ok {
			if a, ok := re.(interface{ Addr() uintptr }); ok {
				err = fmt.Errorf("%w: address %#x", ErrFault, a.Addr())
				return
			}
		}
		panic(r)
	}()
	return fn()
}
