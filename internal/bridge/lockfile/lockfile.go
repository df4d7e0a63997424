// Package lockfile is a whole-file OFD lock (fcntl F_OFD_SETLK) held for
// a process's life: what makes a bridge the only one of its kind on a
// ring, and a journal the only writer of its file. The kernel releases it
// when the last descriptor of the open file description closes, which a
// SIGKILL does: no stale lock to clean up, no pid to trust. It imports no
// NATS. It is not a mutex between goroutines (two Acquire calls in one
// process conflict too, which is what the tests rely on).
package lockfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked: another open file description holds the lock.
var ErrLocked = errors.New("locked by another process")

// Lock is a held lock; Release (or the death of the process) frees it.
type Lock struct{ f *os.File }

// Acquire takes the write lock on path (created if missing) without
// waiting, and writes the caller's pid into it, for the message of the
// next one that is refused. The error wraps ErrLocked when another holds
// it, naming the pid it wrote when there is one.
func Acquire(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		holder := ""
		if b, rerr := io.ReadAll(io.LimitReader(f, 32)); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%w%s", ErrLocked, holder)
		}
		return nil, err
	}
	// The pid is a courtesy for the message, never a proof: the lock is.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release frees the lock (the file stays: removing it would race with
// the next holder's open).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
