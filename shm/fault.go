package shm

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// Guard runs fn and turns a memory fault inside it (SIGBUS from a mapped
// file truncated by another process or whose pages cannot be backed, or
// SIGSEGV from an unmapped page) into ErrFault instead of a crash.
// Inspectors, which read files that hostile or broken processes may shrink
// under them, run their reads under Guard; so do Open, the kinds' attach
// and their slow paths (Region.Guard, which also says why).
//
// Guard must run fn on the calling goroutine: the runtime's panic-on-fault
// setting is per goroutine. Panics that are not faults propagate unchanged.
// It costs two runtime calls and a deferred recover (tens of nanoseconds):
// for opens, scans and repairs, not for every message.
func Guard(fn func() error) error {
	err, _ := guard(fn)
	return err
}

// guard is Guard, and whether fn faulted (rather than returned an error
// that wraps ErrFault from a guard of its own).
func guard(fn func() error) (err error, faulted bool) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if re, ok := r.(runtime.Error); ok {
			if a, ok := re.(interface{ Addr() uintptr }); ok {
				err, faulted = fmt.Errorf("%w: address %#x", ErrFault, a.Addr()), true
				return
			}
		}
		panic(r)
	}()
	return fn(), false
}

// Guard runs fn, which touches r's mapping, under the package Guard. A
// fault becomes an error naming the file and, as far as the file shows by
// then, the cause: shorter than the mapping (ErrTruncated), holes whose
// pages could not be backed (ErrSparse), or neither (a bare ErrFault);
// each also wraps ErrFault. op is the PathError's operation ("open",
// "repair", ...).
func (r *Region) Guard(op string, fn func() error) error {
	err, faulted := guard(fn)
	if !faulted {
		return err
	}
	return pathErr(op, r.path, r.explain(err))
}

// explain words a fault on r's mapping by what fstat says now.
func (r *Region) explain(fault error) error {
	if err := r.CheckFile(); err != nil {
		var pe *PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if !errors.Is(err, ErrClosed) {
			return fmt.Errorf("%w: %w", ErrFault, err)
		}
	}
	return fault
}

// CheckFile re-reads the file's size and allocation (one fstat; an lseek
// too when fewer blocks are allocated than the size needs) and reports
// what would make a touch of the mapping fault: ErrTruncated if the file
// is now shorter than the mapping, ErrSparse if it has holes; a file
// longer than the mapping gives ErrSizeMismatch (harmless to the mapping,
// but no longer what its header declares). Blocking calls run it when
// they time out, watch views once per frame: a few microseconds, not for
// every message.
func (r *Region) CheckFile() error {
	if r.closed.Load() {
		return pathErr("check", r.path, ErrClosed)
	}
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		return pathErr("check", r.path, err)
	}
	mapped := int64(len(r.mem))
	switch {
	case st.Size < mapped:
		return pathErr("check", r.path, fmt.Errorf("%w: %d bytes now, %d mapped (truncated under the mapping)", ErrTruncated, st.Size, mapped))
	case st.Size > mapped:
		return pathErr("check", r.path, fmt.Errorf("%w: %d bytes now, %d mapped", ErrSizeMismatch, st.Size, mapped))
	case hasHoles(r.fd, &st):
		return pathErr("check", r.path, sparseErr(&st))
	}
	return nil
}

// hasHoles reports whether the file has holes: pages that a touch through
// a mapping must allocate, which raises SIGBUS when the filesystem (a
// tmpfs) is full. A hole shows first as fewer allocated blocks than the
// size needs (fstat: free); lseek(SEEK_HOLE) then confirms it, since a
// compressing filesystem also allocates fewer blocks. SEEK_HOLE alone
// cannot decide: tmpfs and ext4 report blocks reserved by fallocate but
// never written as a hole too (checked on this project's VMs), and Create
// reserves every file that way.
func hasHoles(fd int, st *unix.Stat_t) bool {
	if st.Blocks*512 >= st.Size {
		return false
	}
	off, err := unix.Seek(fd, 0, unix.SEEK_HOLE)
	return err != nil || off < st.Size
}

func sparseErr(st *unix.Stat_t) error {
	return fmt.Errorf("%w: %d of %d bytes allocated", ErrSparse, st.Blocks*512, st.Size)
}

// fill allocates the holes of a file opened for writing, keeping its size
// (a file truncated meanwhile is not grown back). A full filesystem gives
// ErrSparse and ErrNoSpace; a filesystem without fallocate is accepted as
// it is, as Create accepts it.
func fill(fd int, st *unix.Stat_t) error {
	err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, st.Size)
	switch {
	case err == nil, errors.Is(err, unix.EOPNOTSUPP):
		return nil
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("%w: %w: filling %d bytes of holes: %v", sparseErr(st), ErrNoSpace, st.Size-st.Blocks*512, err)
	}
	return fmt.Errorf("%w: filling its holes: %v", sparseErr(st), err)
}
