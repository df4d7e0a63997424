// Package shm maps shmkit files and provides the cross-process primitives
// every shmkit structure is built from: atomic words at fixed offsets, futex
// wait and wake on words in a mapping, a system-wide monotonic clock, process
// identity with proof of death, and crash points for crash-safety tests.
//
// # Proof of death
//
// A table entry's holder keeps an open-file-description lock on the
// entry's bytes of the file (Region.LockEntry) for as long as it holds the
// entry, taken before it claims the entry. The kernel drops the lock when
// the holder dies, in whatever pid namespace it ran, so Region.JudgeEntry
// proves death by the lock being released (F_OFD_GETLK), with the
// recorded pid and start time (ProcessID) as a second witness only where
// they mean the same process here (the same pid namespace, PidNamespace).
// A verdict that cannot be reached is "unknown" and acts on nothing. A
// child that inherits the descriptor keeps the lock, and so the entry,
// alive until it exits too.
//
// shm knows the common header (through package layout) but not what any
// kind keeps after it: rings, deques and tables live in transport and the
// packages under sched/.
//
// # Files
//
// A bare name ("orders") lives in /dev/shm; a path with a slash is used as
// given, so a ring may also live on a disk-backed filesystem. Create builds
// the file under a temporary name (O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, mode
// 0600 unless WithMode widens it), reserves its blocks with fallocate so a
// full tmpfs fails at once with ErrNoSpace rather than later with SIGBUS,
// writes the header, initialises the kind's area, stores the ready word last
// and only then renames the file into place with RENAME_NOREPLACE. Open uses
// O_NOFOLLOW|O_CLOEXEC|O_NONBLOCK and refuses, each with its own error,
// symbolic links (ErrSymlink), anything but a regular file (ErrNotRegular),
// files of another owner (ErrForeignOwner), modes wider than allowed
// (ErrPermissive), hard-linked files (ErrLinked), truncated files
// (ErrTruncated), files whose size differs from their header
// (ErrSizeMismatch), and, for read-only opens, files with holes
// (ErrSparse; a read-write open reserves the holes instead, or fails with
// ErrSparse and ErrNoSpace on a full filesystem). Every error names the
// path and wraps its sentinel. The order: what may be read (regular,
// owner, one link), then what the file is (a file whose first bytes are
// neither the magic nor zeros is layout.ErrBadMagic whatever its mode),
// then whether it may be used (the mode), then the header and the size.
//
// # Truncation by another process
//
// A file mapped here can still be truncated by any process that can open it
// for writing. Touching a page past the new end raises SIGBUS, which kills a
// Go program outright. shmkit guards against it in three ways: files are
// created 0600 in a directory entry nobody else can replace; Open checks the
// size against the header and looks for holes before mapping; and what
// follows runs under Guard, which uses debug.SetPanicOnFault to turn the
// fault into ErrFault: Open's header reads, the kinds' attach (OpenAs and
// friends), their checks, scans, repairs and long waits (Region.Guard,
// which names the file and says why: ErrTruncated, ErrSparse), and the
// inspectors' reads. Library fast paths do not pay for Guard: a process
// whose own file is truncated under it has a hostile neighbour with its
// uid, which no user-space check can stop. For
// file descriptors passed between processes, a sealed memfd (F_SEAL_SHRINK)
// makes truncation impossible.
//
// # What it is not
//
// shm does not allocate inside files, frame messages or know about slots.
package shm
